#!/usr/bin/env bash
# The probe's GPU evidence in one go, for a GPU machine (used on the lent H200, see
# benchmarks/results/): the default `offlint probe` (bundled fixtures, heavy configuration,
# timed), the bundled `--entry` examples, the capture sanitizer on a graph runner, its eager
# overhead, and the GPU tests. Logs and JSON land in $OUT (default ./probe-out).
#
#   bash benchmarks/probe_gpu.sh            # from the repository root
#
# The default probe runs first, alone on the GPU, because its timings are the result that
# matters. SKIP_TESTS=1 leaves the GPU tests out.
set -uo pipefail
out="${OUT:-probe-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python="${PYTHON:-python3}"
status=0

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  "$python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$out/environment.txt"

# 1. The default probe: original, inline, inline-fixed, overlap at L=16, H=4096, bf16,
#    batch 4096 and 2048, in one shared worker where no isolation is needed. Exit 0 = every
#    scenario did what it is expected to do. Its wall time is the issue-16 number (<= 60 s).
start=$(date +%s.%N)
timeout "${PROBE_TIMEOUT:-300}" "$python" -m offlint.probing --demo --timeout 240 \
  -o "$out/probe-default.json" 2>&1 | tee "$out/probe.log"
probe_status=${PIPESTATUS[0]}
end=$(date +%s.%N)
wall=$("$python" -c "print(round($end - $start, 1))")
echo "offlint probe exit status: $probe_status; wall $wall s" | tee -a "$out/probe.log"
[ "$probe_status" -eq 0 ] || status=1

# 2. The bundled --entry examples (a user's own model with its own offloading). Each is
#    expected to fail somewhere (exit 1) except group-offload's leaf variant; the JSON is the
#    evidence, the exit status is logged.
for entry in "group-offload" "group-offload --init-arg variant=outside" \
  "group-offload --init-arg variant=leaf" "prefetch-offload" "sglang-offload" \
  "sglang-offload --init-arg fixture=inline" "sglang-offload --init-arg fixture=overlap" \
  "accelerate-offload"; do
  name=$(echo "$entry" | tr ' =' '__' | sed 's/--init-arg_//')
  timeout 240 "$python" -m offlint.probing --timeout 200 --entry $entry \
    -o "$out/entry-$name.json" 2>&1 | tail -3 | tee -a "$out/entries.log"
  echo "--entry $entry: exit ${PIPESTATUS[0]}" | tee -a "$out/entries.log"
done

# 3. The sanitizer on a graph runner that drives SGLang's pre-fix offloader and swallows the
#    capture failure: exit 1, OFL101 with the wait's line and the record's line.
cat > "$out/sglang_runner.py" <<'PY'
import torch
from offlint.probing.examples.sglang_offload import build
probed = build(fixture="original", layers=16, hidden=4096)
x = probed.make_inputs(256)
with torch.no_grad():
    probed.model(x)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            probed.model(x)
    except Exception as exc:  # a graph runner falling back to eager
        print("capture failed, falling back to eager:", type(exc).__name__)
PY
timeout 200 "$python" -m offlint.probing --sanitize -o "$out/sanitize-sglang-original.json" -- \
  "$python" "$out/sglang_runner.py" 2>&1 | tee "$out/sanitize.log"
echo "offlint probe --sanitize exit status: ${PIPESTATUS[0]} (1 expected)" | tee -a "$out/sanitize.log"

# 4. The sanitizer's eager overhead (bar: 1.2x).
timeout 200 "$python" benchmarks/sanitizer_overhead.py --output "$out/sanitizer-overhead.json" \
  2>&1 | tee "$out/sanitizer-overhead.log"

# 5. The GPU tests (small sizes). --noconftest: the GPU image has no libcst, and only the
#    probe's tests are meant to run there.
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout "${TESTS_TIMEOUT:-400}" "$python" -m pytest tests/test_probe_gpu.py \
    tests/test_probe_entry_gpu.py tests/test_probe_sanitizer_gpu.py -q -p no:cacheprovider \
    --noconftest -m gpu 2>&1 | tee "$out/gpu-tests.log"
  tests_status=${PIPESTATUS[0]}
  echo "GPU tests exit status: $tests_status" | tee -a "$out/gpu-tests.log"
  [ "$tests_status" -eq 0 ] || status=1
fi
exit $status
