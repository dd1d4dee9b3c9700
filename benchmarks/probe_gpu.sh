#!/usr/bin/env bash
# The probe's GPU evidence in one go, for a GPU machine (used on the lent H200, see
# benchmarks/results/): the default `offlint probe` (bundled fixtures, heavy configuration)
# with its JSON, then the GPU tests. Logs and JSON land in $OUT (default ./probe-out).
#
#   bash benchmarks/probe_gpu.sh            # from the repository root
#
# The probe runs first, alone on the GPU, because its timings are the result that matters.
set -uo pipefail
out="${OUT:-probe-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python="${PYTHON:-python3}"

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  "$python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$out/environment.txt"

# 1. The default probe: original, inline, inline-fixed, overlap at L=16, H=4096, bf16,
#    batch 4096 and 2048. Exit 0 = every scenario did what it is expected to do.
timeout "${PROBE_TIMEOUT:-480}" "$python" -m offlint.probing --timeout 240 \
  --output "$out/probe-h200.json" 2>&1 | tee "$out/probe.log"
probe_status=${PIPESTATUS[0]}
echo "offlint probe exit status: $probe_status" | tee -a "$out/probe.log"

# 1b. What `offlint fix` writes for the original (fixtures/golden/sglang_original/), probed as a
#     user TARGET in the same heavy configuration: exit 0 = every check passed.
golden_status=0
for strategy in overlap inline; do
  timeout "${GOLDEN_TIMEOUT:-150}" "$python" -m offlint.probing --timeout 120 \
    "fixtures/golden/sglang_original/out_${strategy}.py" \
    --output "$out/probe-fix-${strategy}.json" 2>&1 | tee -a "$out/probe-fix.log"
  status=${PIPESTATUS[0]}
  echo "offlint probe (fix --strategy ${strategy}) exit status: $status" | tee -a "$out/probe-fix.log"
  [ "$status" -eq 0 ] || golden_status=$status
done

# 2. The GPU tests (small sizes). --noconftest: the GPU image has no libcst, and only the probe's
#    tests are meant to run there.
timeout "${TESTS_TIMEOUT:-300}" "$python" -m pytest tests/test_probe_gpu.py -q -p no:cacheprovider \
  --noconftest -m gpu 2>&1 | tee "$out/gpu-tests.log"
tests_status=${PIPESTATUS[0]}
echo "GPU tests exit status: $tests_status" | tee -a "$out/gpu-tests.log"

# 3. Optional (PROBE_LIGHT=1): the light configuration of GROUND-TRUTH.md section 2 (batch
#    1024, where H2D outweighs compute), timed only.
if [ "${PROBE_LIGHT:-0}" = 1 ]; then
  timeout "${LIGHT_TIMEOUT:-240}" "$python" -m offlint.probing --timeout 120 --batch-sizes 1024,512 \
    --no-compile --output "$out/probe-h200-light.json" 2>&1 | tee "$out/probe-light.log"
fi

[ "$probe_status" -eq 0 ] && [ "$golden_status" -eq 0 ] && [ "$tests_status" -eq 0 ]
