#!/usr/bin/env bash
# Final GPU call of the session (little device time left): the entry test that failed in the last
# H200 run, then the compiled GPU tests, both changed since;
# the rest ran on the H200 earlier the same day.
set -uo pipefail
export PYTHONUNBUFFERED=1
res=/tmp/res; mkdir -p $res
pack() { tar czf "$OUT/results.tgz" -C $res . ; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || echo "wheel install failed"
export PYTHONPATH=/tmp/site:$PWD
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'; git log --oneline -1 2>/dev/null; } 2>&1 | tee $res/environment.txt
part() { local name=$1 limit=$2; shift 2; local t0=$(date +%s.%N)
  timeout $limit "$@" > $res/$name.log 2>&1; local st=$?
  echo "== $name: exit $st, $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s" | tee -a $res/parts.txt; tail -6 $res/$name.log; pack; }
part probe-gpu-tests 110 python3 -m pytest tests/test_probe_entry_gpu.py -k group_offload_with_a_stream -q -rA -p no:cacheprovider --noconftest -m gpu
part compiled-gpu-tests 70 env PYTHONFAULTHANDLER=1 python3 -m pytest tests/test_probe_compiled_gpu.py -q -rA -p no:cacheprovider --noconftest -m gpu
ls $res
