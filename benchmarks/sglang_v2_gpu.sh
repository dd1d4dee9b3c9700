#!/usr/bin/env bash
# Issue 17 item 2: SGLang's real OffloaderV2 on the GPU machine, no stand-ins
# (offlint/probing/adapters/sglang_offloader_v2.py). The machine has no network: sglang's Python
# files and the wheels its offloader's import chain needs travel in .whl/sglang/ (SOURCE.txt
# there says what they are) and are installed into /tmp/sgl-site, apart from offlint's own wheels.
# Run with `carry: [".whl"]`; results (JSON + logs) go to $OUT/sglang-v2/.
#   SGLANG_V2_PARTS="chain lifecycle probe" (the default) picks the parts:
#   chain      what the device lacks before the install, then the import of
#              sglang.srt.utils.offloader with where each third-party module came from;
#   lifecycle  python -m offlint.probing.adapters.sglang_offloader_v2 (every variant: eager
#              forwards, one capture under the capture sanitizer, the sglang lines named);
#   probe      offlint probe --entry sglang-offloader-v2 for each variant (the probe's life
#              cycle: two captures, replays, eager after capture, weight update, H2D copies).
# On the H200 (2026-12-03) install took 2 s, chain 19 s (the first import of sglang compiles its
# .pyc), lifecycle 52 s; budget about 2-3 minutes more for probe (two variants).
set -uo pipefail
export PYTHONUNBUFFERED=1
res=$OUT/sglang-v2; mkdir -p "$res"
parts=${SGLANG_V2_PARTS:-chain lifecycle probe}
t_start=$(date +%s)

[ -d /tmp/site/libcst ] || python3 -m pip install -q --no-index --no-deps --no-compile \
  --target /tmp/site .whl/*.whl || echo "offlint wheel install failed"
{ date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch,sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  git log --oneline -1 2>/dev/null; } 2>&1 | tee "$res/environment.txt"

# The import chain's third-party modules (top level), found on a torch-only Python 3.11.
chain_modules="orjson psutil pybase64 requests urllib3 idna charset_normalizer certifi triton packaging PIL starlette anyio sniffio msgspec pydantic pydantic_core typing_inspection annotated_types typing_extensions zmq tqdm IPython traitlets pygments aiohttp aiohappyeyeballs aiosignal attr frozenlist multidict propcache yarl"
if [[ " $parts " == *" chain "* ]]; then
  PYTHONPATH=/tmp/site:$PWD python3 - $chain_modules > "$res/device-before-install.json" <<'EOF'
import importlib.util, json, sys
from offlint.probing.adapters.sglang_offloader_v2 import import_offloader
from offlint.probing.adapters._library import LibraryMissing
have = {name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]}
try:
    import_offloader()
    line = None
except LibraryMissing as missing:
    line = str(missing)
print(json.dumps({"device_has": have, "missing": sorted(n for n, h in have.items() if not h),
                  "import_line": line}, indent=2))
EOF
  cat "$res/device-before-install.json"
fi

t0=$(date +%s.%N)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/sgl-site .whl/sglang/*.whl \
  || echo "sglang dependency wheel install failed"
python3 -m zipfile -e .whl/sglang/sglang-0.5.23-no-compiled-extensions.zip /tmp/sgl-site \
  || echo "sglang unpack failed"
echo "install: $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s" | tee -a "$res/environment.txt"
export PYTHONPATH=/tmp/sgl-site:/tmp/site:$PWD

part() { local name=$1 limit=$2; shift 2; local t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$res/$name.log" 2>&1; local st=$?
  echo "== $name: exit $st, $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s" | tee -a "$res/parts.txt"
  tail -8 "$res/$name.log"; }

if [[ " $parts " == *" chain "* ]]; then
  part import-chain 60 python3 - "$res/import-chain.json" <<'EOF'
import importlib.metadata, json, sys, time
started = time.monotonic()
from offlint.probing.adapters.sglang_offloader_v2 import import_offloader
module = import_offloader()
seconds = round(time.monotonic() - started, 2)
carried = "/tmp/sgl-site/"
loaded = {}
for name in sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)):
    where = getattr(sys.modules.get(name), "__file__", None) or ""
    if not where or name.startswith("_") or name in ("offlint",):
        continue
    loaded[name] = {"from": "carried" if where.startswith(carried) else "device", "file": where}
compiled = [m for m, v in sys.modules.items() if m.startswith("sglang")
            and (getattr(v, "__file__", "") or "").endswith(".so")]
result = {"module": module.__name__, "file": module.__file__, "import_s": seconds,
          "OffloaderV2": repr(module.OffloaderV2),
          "sglang_version": importlib.metadata.version("sglang"),
          "sglang_modules_loaded": sum(1 for m in sys.modules if m.startswith("sglang")),
          "compiled_sglang_modules_loaded": compiled, "third_party": loaded}
json.dump(result, open(sys.argv[1], "w"), indent=2)
print(json.dumps({k: v for k, v in result.items() if k != "third_party"}))
print("from the device:", sorted(n for n, v in loaded.items() if v["from"] == "device"))
print("carried:", sorted(n for n, v in loaded.items() if v["from"] == "carried"))
EOF
fi
if [[ " $parts " == *" lifecycle "* ]]; then
  part lifecycle 200 python3 -m offlint.probing.adapters.sglang_offloader_v2 -o "$res/lifecycle.json"
fi
if [[ " $parts " == *" probe "* ]]; then
  for v in cpu cpu-prefetch-2; do
    part probe-$v 200 python3 -m offlint probe --entry sglang-offloader-v2 --init-arg variant=$v \
      --timeout 180 --output "$res/probe-$v.json"
  done
fi
echo "total: $(( $(date +%s) - t_start )) s" | tee -a "$res/parts.txt"
ls "$res"
