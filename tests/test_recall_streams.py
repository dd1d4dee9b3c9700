"""Recall of stream/event dataflow that follows the code, not the spelling (issue 13, item 2).

The rule examples in rules/*.toml carry the user-facing cases; these tests pin the facts under
them: accelerator aliases in the resolver, context variables as stream scopes, streams handed
through helpers, joins on every path, closures that outlive a call, capture tests of other shapes,
and the precision guards that came with them.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from offlint.analysis import prefilter
from offlint.analysis.build import build_model
from offlint.analysis.engine import FileSettings, check_source
from offlint.analysis.kinds import Kind
from offlint.analysis.model import Context, ModuleModel
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence
from offlint.fixing.apply import FixSettings
from offlint.fixing.loop import fix_source

ALL = frozenset(load_catalogue())


def _model(source: str) -> ModuleModel:
    return build_model(cst.parse_module(textwrap.dedent(source)))


def _found(source: str, *, front_end: str = "skeleton") -> list[tuple[int, str]]:
    """Every finding, whatever its tier (as tests/test_rule_examples.py checks the examples)."""
    settings = FileSettings(select=ALL, front_end=front_end)
    report = check_source(textwrap.dedent(source).encode(), "case.py", settings)
    assert not report.errors, report.errors
    return sorted((d.location.line, d.code) for d in report.diagnostics)


# ------------------------------------------------------------------ accelerator aliases


def test_device_module_spellings_resolve_to_the_cuda_api() -> None:
    model = _model(
        """
        import torch

        mod = torch.cuda


        class A:
            def __init__(self, device, kind):
                self.dm = torch.get_device_module(device)
                self.gm = getattr(torch, kind)
                self.cond = getattr(torch, kind) if kind else torch.cuda

            def f(self):
                local = self.dm
                return local, torch.get_device_module().Event, getattr(torch, "cuda").Stream
        """
    )
    resolve = model.resolver.qualname
    for text in ("self.dm.Stream", "self.gm.stream", "self.cond.current_stream", "mod.Event", "local.Stream"):
        assert resolve(cst.parse_expression(text)) in ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.current_stream", "torch.cuda.Event"), text
    assert resolve(cst.parse_expression("torch.get_device_module().Event")) == "torch.cuda.Event"
    assert resolve(cst.parse_expression('getattr(torch, "cuda").Stream')) == "torch.cuda.Stream"


def test_names_bound_to_something_else_too_are_not_device_modules() -> None:
    model = _model(
        """
        import torch
        from types import SimpleNamespace


        def real(device):
            device_module = torch.get_device_module(device)
            return device_module


        def fake():
            device_module = SimpleNamespace(synchronize=lambda: None)
            device_module.synchronize()
            dtype = getattr(torch, "float16")
            other = getattr(torch, "npu", None)
        """
    )
    assert "device_module" not in model.resolver.device_modules
    assert model.resolver.qualname(cst.parse_expression("device_module.synchronize")) is None
    assert "dtype" not in model.resolver.device_modules and "other" not in model.resolver.device_modules


def test_optional_stream_annotations_type_streams_but_not_tensors() -> None:
    model = _model(
        """
        from typing import Optional, Union

        import torch


        class A:
            buf: torch.Tensor | None = None

            def __init__(self, s: Optional[torch.cuda.Stream], t: Union[torch.cuda.Stream, torch.Stream, None], e: torch.cuda.Event | None):
                self.s, self.t, self.e = s, t, e
                self.buf = torch.empty(4)
        """
    )
    init = next(fn for fn in model.functions if fn.name == "__init__")
    assert init.locals["s"].kind is Kind.STREAM
    assert init.locals["t"].kind is Kind.STREAM
    assert init.locals["e"].kind is Kind.EVENT
    # the declaration does not blur what the assignment says (a pageable host buffer)
    assert model.classes[0].attrs["buf"].kind is Kind.PAGEABLE_HOST


def test_a_parameter_used_with_wait_stream_is_a_stream_but_an_event_argument_is_not_typed() -> None:
    model = _model(
        """
        import torch


        def f(s, ev, other):
            s.wait_stream(torch.cuda.current_stream())
            torch.cuda.current_stream().wait_event(ev)
            with torch.cuda.stream(other):
                pass
        """
    )
    fn = model.functions[0]
    assert fn.locals["s"].kind is Kind.STREAM
    assert fn.locals["other"].kind is Kind.STREAM
    assert "ev" not in fn.locals


def test_module_globals_under_if_and_global_statements_and_getters() -> None:
    model = _model(
        """
        import torch

        if torch.cuda.is_available():
            _EV = torch.cuda.Event()
        _LAZY = None


        def get_lazy():
            global _LAZY
            if _LAZY is None:
                _LAZY = torch.cuda.Stream()
            return _LAZY


        def use():
            s = get_lazy()
            return s
        """
    )
    assert model.oracle.globals["_EV"].kind is Kind.EVENT
    assert model.oracle.globals["_LAZY"].kind is Kind.STREAM
    assert "_LAZY" not in model.module_functions["get_lazy"].locals
    assert model.module_functions["use"].locals["s"].kind is Kind.STREAM


@pytest.mark.parametrize(
    ("source", "passes"),
    [
        ("import torch\nclass A:\n    def f(self):\n        self.dm = torch.get_device_module()\n        self.dm.Stream().synchronize()\n", True),
        ("import torch\nmod = torch.cuda\ns = mod.Stream()\ns.synchronize()\n", True),
        ("import torch\ndef f(req):\n    x = torch.cuda.is_available()\n    if req.stream:\n        print(x.item())\n", False),
        ("from pkg.modes import get_is_capture_mode\ndef f(x):\n    if get_is_capture_mode():\n        return\n    return x.item()\n", True),
        ("def f(x):\n    # not capturing anything\n    return x.item()\n", False),
    ],
)
def test_capture_gate_knows_device_modules_and_imported_capture_tests(source: str, passes: bool) -> None:
    assert prefilter.accepts(source, frozenset({"OFL105"})) is passes


# ------------------------------------------------------------------ OFL204 through helpers


def test_record_stream_of_a_stream_taken_in_the_callers_block_both_front_ends() -> None:
    source = """
    import torch


    class Prefetch(torch.nn.Module):
        def __init__(self):
            self.stream = torch.cuda.Stream()

        def _record(self, host, *, consumer):
            t = host.to("cuda", non_blocking=True)
            t.record_stream(consumer)
            return t

        def forward(self, host):
            self.stream.wait_stream(torch.cuda.current_stream())
            ctx = torch.cuda.stream(self.stream)
            with ctx:
                t = self._record(host, consumer=torch.cuda.current_stream())
            torch.cuda.current_stream().wait_stream(self.stream)
            return t
    """
    assert _found(source) == [(11, "OFL204")]
    assert _found(source, front_end="libcst") == [(11, "OFL204")]


def test_record_stream_of_a_tensor_made_before_the_block_is_the_right_call() -> None:
    # a gradient (or any tensor) allocated on the compute stream, used on the side stream inside
    # the block: recording the side stream there is what record_stream is for (DeepSpeed ZeRO-3)
    source = """
    import torch


    def reduce(param, side):
        with torch.cuda.stream(side):
            param.grad.record_stream(torch.cuda.current_stream())
            param.grad.mul_(0.5)
    """
    assert [f for f in _found(source) if f[1] == "OFL204"] == []


# ------------------------------------------------------------------ OFL103 joins on every path


JOIN_UNDER_A_TEST = """
import torch


class Overlap(torch.nn.Module):
    def __init__(self):
        self.side = torch.cuda.Stream()

    def forward(self, x, f):
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            y = f(x)
        if {test}:
            cur.wait_stream(self.side)
        return y
"""


def test_a_join_under_a_capture_test_holds_on_every_capturing_path() -> None:
    source = JOIN_UNDER_A_TEST.format(test="torch.cuda.is_current_stream_capturing()")
    assert not [code for _, code in _found(source) if code == "OFL103"]


def test_a_join_only_when_not_capturing_leaves_the_captured_fork_open() -> None:
    source = JOIN_UNDER_A_TEST.format(test="not torch.cuda.is_current_stream_capturing()")
    assert (11, "OFL103") in _found(source)


def test_self_removing_hooks_of_one_forward_fork_and_join_as_siblings() -> None:
    # DeepSeek's shared-expert overlap: each hook removes its own handle
    source = """
    import torch


    class MoE:
        def __init__(self):
            self.alt_stream = torch.cuda.Stream()

        def forward(self, x, dispatcher, shared):
            out = None

            def pre(d, inputs):
                nonlocal out
                self.alt_stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.alt_stream):
                    out = shared(inputs)
                pre_handle.remove()

            def post(d, outputs):
                torch.cuda.current_stream().wait_stream(self.alt_stream)
                post_handle.remove()

            pre_handle = dispatcher.register_pre_combine_hook(pre)
            post_handle = dispatcher.register_post_combine_hook(post)
            if torch.cuda.is_current_stream_capturing():
                pass
            return dispatcher(x)
    """
    assert _found(source) == []


# ------------------------------------------------------------------ guards


def test_capture_test_shapes_of_same_module_helpers() -> None:
    model = _model(
        '''
        import torch


        def a():
            """Doc."""
            return bool(torch.cuda.is_current_stream_capturing())


        def b(device):
            with torch.cuda.device(device):
                return torch.cuda.is_current_stream_capturing()


        def c():
            try:
                return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
            except Exception:
                return False


        def d():
            try:
                return torch.cuda.is_current_stream_capturing()
            except Exception:
                raise_it()
        '''
    )
    predicates = {fn.name for fn in model.functions if fn.is_capture_predicate}
    assert predicates == {"a", "b", "c"}


def test_flags_set_only_eagerly_and_cuda_checks_guard_the_host_reads() -> None:
    # sglang's kernel API logging: a dump made only when not capturing, statistics of a tensor
    # skipped when it is a CUDA tensor and a capture is on
    source = """
    import torch


    def _active():
        try:
            return torch.cuda.is_current_stream_capturing()
        except Exception:
            return False


    def stats(t):
        if t.device.type == "cuda" and _active():
            return None
        return t.float().mean().item()


    def wrapper(f, x):
        dump = None
        if _active():
            pass
        else:
            dump = x.detach()
        y = f(x)
        if dump is not None:
            print(dump.cpu())
        return y
    """
    model = _model(source)
    stats_fn = model.module_functions["stats"]
    item = next(site for site in stats_fn.calls if site.method == "item")
    assert item.context is Context.EAGER
    wrapper_fn = model.module_functions["wrapper"]
    cpu = next(site for site in wrapper_fn.calls if site.method == "cpu")
    assert cpu.context is Context.EAGER
    assert _found(source) == []


# ------------------------------------------------------------------ OFL106: check and fix agree


def test_check_reports_the_non_blocking_copies_fix_pins() -> None:
    source = textwrap.dedent(
        """
        import torch


        def stage(n, dev):
            host = torch.zeros(n)
            return host.to(dev, non_blocking=True)


        def move(x, device):
            return x.to(device, non_blocking=True)
        """
    ).encode()
    # an eager copy is a `low` finding (no capture reaches it): both act at that floor only
    for floor, expected in ((Confidence.LOW, [(7, "OFL106")]), (Confidence.MEDIUM, [])):
        fixed = fix_source(source, "case.py", FixSettings(select=frozenset({"OFL106"}), min_confidence=floor))
        assert fixed.changed is bool(expected)
        assert (b"pin_memory=True" in fixed.fixed) is bool(expected)
        report = check_source(source, "case.py", FileSettings(select=ALL, min_confidence=floor))
        shown = [d for d in report.diagnostics if d.confidence.at_least(floor)]
        assert [(d.location.line, d.code) for d in shown] == expected


# ------------------------------------------------------------------ accelerator objects by use


def test_project_accelerator_objects_are_known_by_their_stream_methods() -> None:
    """diffusers' `TorchDeviceBackend(device)` held on self and DeepSpeed's `get_accelerator()`
    are used as the device module: `.current_stream()`, `.Stream()`, `.Event()` on them."""
    model = _model(
        """
        import torch
        from pkg.accelerator import get_accelerator
        from pkg.backend import TorchDeviceBackend


        class Group:
            def __init__(self, device):
                self.backend = TorchDeviceBackend(device)
                self.stream = self.backend.Stream()

            def onload(self):
                return self.backend.current_stream(), get_accelerator().Event()
        """
    )
    resolve = model.resolver.qualname
    assert resolve(cst.parse_expression("self.backend.stream")) == "torch.cuda.stream"
    assert resolve(cst.parse_expression("get_accelerator().current_stream")) == "torch.cuda.current_stream"
    assert model.classes[0].attrs["stream"].kind is Kind.STREAM
    # a name bound to something else as well is no accelerator, whatever is called on it
    other = _model(
        """
        import torch
        from pkg import make_reader


        def f(flag):
            reader = make_reader() if flag else 3
            return reader.current_stream()
        """
    )
    assert other.resolver.qualname(cst.parse_expression("reader.current_stream")) is None


def test_group_offloading_through_a_backend_object_is_checked() -> None:
    source = """
    from contextlib import nullcontext

    import torch
    from pkg.hooks import ModelHook
    from pkg.backend import TorchDeviceBackend


    class Group:
        def __init__(self, device, stream):
            self.backend = TorchDeviceBackend(device)
            self.stream = stream

        def onload_(self, host):
            context = nullcontext() if self.stream is None else self.backend.stream(self.stream)
            with context:
                self.weight = host.to("cuda", non_blocking=True)

        def offload_(self):
            if self.stream is not None:
                self.backend.current_stream().synchronize()


    class GroupHook(ModelHook):
        def __init__(self, group):
            self.group = group

        def pre_forward(self, module, *args):
            self.group.onload_(module.host)
            return args

        def post_forward(self, module, output):
            self.group.offload_()
            return output
    """
    for front_end in ("skeleton", "libcst"):
        assert _found(source, front_end=front_end) == [(16, "OFL104"), (21, "OFL105")], front_end


def test_capture_gate_lets_in_accelerator_objects_of_any_name() -> None:
    source = "import torch\nclass G:\n    def f(self):\n        self.backend.current_stream().synchronize()\n"
    assert prefilter.accepts(source, frozenset({"OFL105"}))


# ------------------------------------------------------------------ flags and containers


def test_a_negated_capture_flag_guards_what_it_tests() -> None:
    source = """
    import torch


    def expand(x, overflow):
        check = not torch.cuda.is_current_stream_capturing()
        y = x * 2
        if check and int(overflow.item()) != 0:
            raise RuntimeError("overflow")
        return y, overflow.tolist()
    """
    assert _found(source) == [(10, "OFL105")]


def test_events_recorded_into_a_local_list_are_this_calls() -> None:
    source = """
    import torch


    class Exchange(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.copy = torch.cuda.Stream()
            self.pending = []

        def forward(self, parts):
            main = torch.cuda.current_stream()
            sent, done = [], []
            for p in parts:
                p.mul_(2)
                sent.append(main.record_event())
            self.copy.wait_stream(main)
            with torch.cuda.stream(self.copy):
                for i, p in enumerate(parts):
                    self.copy.wait_event(sent[i])
                    p.add_(1)
                    done.append(self.copy.record_event())
            for ev in done:
                main.wait_event(ev)
            for ev in self.pending:
                main.wait_event(ev)
            return parts
    """
    assert _found(source) == [(26, "OFL101")]


def test_record_stream_of_a_stream_bound_two_ways_needs_both_to_be_the_block() -> None:
    """`s = self.side if overlap else current_stream()` on separate branches: the record runs
    only on the overlap path, where it records the side stream it allocated on (harmless)."""
    source = """
    import torch


    class Reducer:
        def __init__(self):
            self.side = torch.cuda.Stream()

        def reduce(self, bucket, overlap):
            if overlap:
                stream = self.side
            else:
                stream = torch.cuda.current_stream()
            with torch.cuda.stream(stream):
                out = bucket.sum(0)
                if overlap:
                    out.record_stream(stream)
            return out
    """
    assert _found(source) == []


def test_a_test_that_led_to_a_capture_bail_out_guards_what_it_tests_later() -> None:
    """`if pool is None or check is not None: if capturing: return` ... `if check is not None:
    verify()`: with `check` set the capture has returned already, so the verification is eager;
    before the bail-out, and for a test that was not part of it, nothing is implied."""
    source = """
    import torch


    class Exchange(torch.nn.Module):
        def forward(self, x, check):
            if check is not None:
                x.sum().item()
            if self.pool is None or check is not None:
                if torch.cuda.is_current_stream_capturing():
                    return None
                self.pool = x.new_empty(8)
            y = x * 2
            if check is not None:
                return self._verify(y)
            if self.strict:
                x.sum().item()
            return y

        def _verify(self, y):
            return bool(y.sum().item())
    """
    for front_end in ("skeleton", "libcst"):
        assert _found(source, front_end=front_end) == [(8, "OFL105"), (17, "OFL105")], front_end


def test_lazy_one_time_set_up_ran_in_the_warm_up() -> None:
    """`if not self._saved:` / `if self.buf is None:` set by the same method and never cleared
    after `__init__`: the first (eager) call ran it. A flag cleared per call, or set elsewhere,
    proves nothing."""
    source = """
    import torch


    class Group(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stream = torch.cuda.Stream()
            self._saved = False
            self.buf = None
            self.kw = None

        def forward(self, x):
            if not self._saved and x.numel() > 0:
                self.snapshot = x.to("cpu")
            self._saved = True
            if self.buf is None:
                self.buf = torch.empty(4, device="cuda")
                print(self.buf.sum().item())
            if self.kw is None:
                x.sum().item()
            kw, self.kw = self.kw, None
            if not self.ready:
                x.sum().item()
            return x

        def prime(self):
            self.ready = True
    """
    assert _found(source) == [(21, "OFL105"), (24, "OFL105")]


def test_an_autograd_function_forward_runs_in_the_model_forward() -> None:
    """Megatron's activation offloading: an autograd Function's forward commits a layer group and
    forks the D2H stream of a handler held opaquely (`Manager.get_instance().d2h_stream`, typed
    by its `wait_stream` use); nothing joins it before the forward ends."""
    source = """
    import torch


    class Handler:
        def __init__(self):
            self.d2h_stream = Manager.get_instance().d2h_stream

        def commit(self, tensors):
            self.d2h_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.d2h_stream):
                for t in tensors:
                    t.cpu_copy.copy_(t, non_blocking=True)


    class GroupCommit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor, handler, tensors):
            handler.commit(tensors)
            return tensor

        @staticmethod
        def backward(ctx, grad):
            return grad, None, None


    class ChunkedLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            ctx.save_for_backward(logits.to("cpu"), labels)
            return logits.float().mean()
    """
    found = _found(source)
    assert (10, "OFL103") in found
    assert (30, "OFL105") not in found  # a computing Function is a layer, not a hook point
    report = check_source(textwrap.dedent(source).encode(), "case.py", FileSettings(select=ALL))
    tiers = {d.location.line: d.confidence for d in report.diagnostics}
    assert tiers[10] is Confidence.MEDIUM


def test_training_only_code_is_not_on_the_forward_path() -> None:
    """What DeepSpeed's training code showed once its `get_accelerator()` streams were typed: a
    backward hook runs in backward (low at most), a closure a factory returns runs where it is
    installed, a computing autograd Function runs where a caller `.apply`s it (not as a module
    forward of its own), and `param.grad = None` makes no tensor for OFL204."""
    source = """
    import torch
    from pkg.accelerator import get_accelerator


    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sp_stream = get_accelerator().Stream()
            self.register_full_backward_hook(self._grad_hook)

        def _grad_hook(self, module, grad_in, grad_out):
            get_accelerator().current_stream().synchronize()

        def forward(self, x):
            def make_hook(name):
                def hook(grad):
                    self.sp_stream.synchronize()
                    return grad
                return hook

            x.register_hook(make_hook("q"))
            return OffloadedAttention.apply(x)


    class OffloadedAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            side = get_accelerator().Stream()
            side.wait_stream(get_accelerator().current_stream())
            with get_accelerator().stream(side):
                y = x * 2
            side.synchronize()
            return y


    class Reducer:
        def __init__(self):
            self.reduce_stream = get_accelerator().Stream()

        def partition(self, params):
            with get_accelerator().stream(self.reduce_stream):
                for param in params:
                    if param.grad is None:
                        param.grad = None
                    param.grad.record_stream(get_accelerator().current_stream())
    """
    report = check_source(textwrap.dedent(source).encode(), "case.py", FileSettings(select=ALL, min_confidence=Confidence.LOW))
    tiers = {(d.location.line, d.code): d.confidence for d in report.diagnostics}
    assert tiers[(13, "OFL105")] is Confidence.LOW  # the backward hook
    assert (18, "OFL105") not in tiers  # the factory's closure
    # the Function's forward is reached from Attention.forward's `.apply` (medium), as a layer
    assert tiers[(33, "OFL105")] is Confidence.MEDIUM
    assert not any(code == "OFL204" for _, code in tiers)


def test_a_method_call_on_an_annotated_parameter_or_a_made_local_resolves() -> None:
    """`pending.wait()` with `pending: _Pending` (or `p = _Pending(...)`) runs `_Pending.wait`:
    a name too common to resolve by itself, resolved by the parameter's same-module class."""
    source = """
    import torch


    class _Pending:
        def __init__(self, host):
            self.host = host

        def wait(self):
            return self.host.tolist()


    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.copy_stream = torch.cuda.Stream()

        def _finish(self, pending: _Pending):
            return pending.wait()

        def forward(self, x):
            made = _Pending(x)
            return self._finish(made), made.wait()
    """
    report = check_source(textwrap.dedent(source).encode(), "case.py", FileSettings(select=ALL))
    assert [(d.location.line, d.code) for d in report.diagnostics] == [(10, "OFL105")]
    model = _model(source)
    wait = next(f for f in model.functions if f.qualname == "_Pending.wait")
    assert wait.reachable and wait.confidence is Confidence.MEDIUM
