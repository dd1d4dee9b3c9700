"""The compile-safe rewrite's custom ops on the CPU torch (issue 25, item 4).

The rewritten SGLang offloader imports, its two ops register under `offlint::<module>_...`, their
fake implementations trace (FakeTensorMode, make_fx) with the copy op before the wait and the
wait before the read of the device tensors, and torch.library.opcheck accepts their schemas.
What needs CUDA (streams, events, a capture, Inductor's CUDA code) is in
tests/test_fix_custom_ops_gpu.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "fixtures" / "golden"
CASES = ("sglang_original", "sglang_merged_inline")


def _load(case: str) -> ModuleType:
    # one module name per golden: the op names carry it, and an op registers once per process
    name = f"offlint_custom_ops_{case}"
    spec = importlib.util.spec_from_file_location(name, GOLDEN / case / "compile_safe" / "out_custom_ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MODULES: dict[str, ModuleType] = {}


def module(case: str) -> ModuleType:
    if case not in _MODULES:
        _MODULES[case] = _load(case)
    return _MODULES[case]


@pytest.mark.parametrize("case", CASES)
def test_the_ops_register_under_the_module_name(case: str) -> None:
    mod = module(case)
    prefix = f"offlint_custom_ops_{case}"
    for op in ("start_onload", "wait_and_get_device_tensors"):
        packet = getattr(torch.ops.offlint, f"{prefix}_{op}")
        schema = str(packet.default._schema)
        assert "Tensor(a0!)[] device_tensors" in schema, schema  # declared mutated: orders the ops
        assert schema.endswith("-> ()"), schema
    assert mod._offlint_offloaders is not None and len(mod._offlint_offloaders) == 0


@pytest.mark.parametrize("case", CASES)
def test_fake_impls_run_under_fake_tensor_mode(case: str) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    mod = module(case)
    with FakeTensorMode():
        device, host = [torch.empty(4, 4)], [torch.empty(4, 4)]
        # no offloader has key 1: only the fake implementations can run here
        assert mod._offlint_start_onload(device, host, 1) is None
        assert mod._offlint_wait_and_get_device_tensors(device, 1) is None


@pytest.mark.parametrize("case", CASES)
def test_traced_order_is_copy_then_wait_then_read(case: str) -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    mod = module(case)

    def step(host: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        device = [torch.empty_like(host)]
        mod._offlint_start_onload(device, [host], 7)
        mod._offlint_wait_and_get_device_tensors(device, 7)
        return x @ device[0]

    graph = make_fx(step, tracing_mode="fake")(torch.randn(4, 4), torch.randn(2, 4)).graph
    targets = [str(n.target) for n in graph.nodes if n.op == "call_function"]
    prefix = f"offlint.offlint_custom_ops_{case}"
    assert targets == [
        "aten.empty_like.default",
        f"{prefix}_start_onload.default",
        f"{prefix}_wait_and_get_device_tensors.default",
        "aten.mm.default",
    ]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_building_the_offloader_needs_cuda() -> None:
    mod = module("sglang_original")
    offloader = mod.Offloader(group_size=2, num_in_group=1, prefetch_step=1)
    layers = [torch.nn.Linear(4, 4) for _ in range(2)]
    with pytest.raises((AssertionError, RuntimeError)):
        offloader.wrap_modules(layers)  # CPU modules, and torch.cuda.Stream() needs CUDA
