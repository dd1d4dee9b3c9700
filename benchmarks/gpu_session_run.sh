#!/usr/bin/env bash
# The last GPU call of the 2026-12-03 evening session: what changed since its last H200 run, in
# one call (device time is scarce). Run with `carry: [".whl"]`; results go to $OUT/results.tgz.
#   PARTS="fix agreement sanitizer sglang" (the default) picks the parts:
#   fix        pytest -m gpu tests/test_fix_gpu.py (every fixed fixture through the life cycle);
#   agreement  the static/dynamic agreement record (tests/test_probe_agreement_gpu.py, written to
#              agreement.json by OFFLINT_AGREEMENT_RECORD);
#   sanitizer  the sanitizer's GPU tests (races on and off in one process);
#   sglang     benchmarks/sglang_v2_gpu.sh's probe part (SGLang's real OffloaderV2 life cycle).
set -uo pipefail
export PYTHONUNBUFFERED=1
res=/tmp/res; mkdir -p $res
parts=${PARTS:-fix agreement sanitizer sglang}
pack() { tar czf "$OUT/results.tgz" -C $res . ; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || echo "wheel install failed"
export PYTHONPATH=/tmp/site:$PWD
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'; git log --oneline -1 2>/dev/null; } 2>&1 | tee $res/environment.txt
part() { local name=$1 limit=$2; shift 2; local t0=$(date +%s.%N)
  timeout $limit "$@" > $res/$name.log 2>&1; local st=$?
  echo "== $name: exit $st, $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s" | tee -a $res/parts.txt; tail -4 $res/$name.log; pack; }
pytest_gpu() { python3 -m pytest -q -rA -p no:cacheprovider --noconftest -m gpu "$@"; }
for p in $parts; do case $p in
  fix) part fix-gpu-tests 240 pytest_gpu tests/test_fix_gpu.py ;;
  agreement) part agreement 150 env OFFLINT_AGREEMENT_RECORD=$res/agreement.json python3 -m pytest -q -rA -p no:cacheprovider --noconftest -m gpu tests/test_probe_agreement_gpu.py ;;
  sanitizer) part sanitizer-gpu-tests 120 pytest_gpu tests/test_probe_sanitizer_gpu.py tests/test_probe_plugin_gpu.py ;;
  sglang) part sglang-v2 200 env SGLANG_V2_PARTS=probe OUT=$res bash benchmarks/sglang_v2_gpu.sh ;;
esac; done
ls -R $res | head -40
