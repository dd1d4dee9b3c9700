"""OFL108 host-pinning-off-thread and the `external=True` event exemption of OFL101/OFL202: cases
the catalogue examples do not cover, on both front ends. A line marked `# expect` must be
reported (by the rule under test, nothing else of it); no other line may be."""

from __future__ import annotations

import textwrap

import pytest

from offlint.analysis.engine import FileSettings, check_source

FRONT_ENDS = pytest.mark.parametrize("front_end", ["skeleton", "libcst"])


def findings(source: str, code: str, front_end: str) -> list[tuple[int, str]]:
    data = textwrap.dedent(source).encode()
    report = check_source(data, "case.py", FileSettings(select=frozenset({code}), front_end=front_end))
    assert not report.errors
    return sorted((d.location.line, d.confidence.value) for d in report.diagnostics)


def expected(source: str) -> list[int]:
    lines = textwrap.dedent(source).splitlines()
    return [n for n, line in enumerate(lines, start=1) if "# expect" in line]


CAPTURE = """
        def capture(model, x):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x)
            return g
        """

OFL108_CASES = {
    "join-after-capture-in-the-same-function": """
        import threading
        import torch

        def _pin(t):
            t.pin_memory()  # expect

        def start_up(model, t, x):
            worker = threading.Thread(target=_pin, args=(t,))
            worker.start()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x)
            worker.join()
        """,
    "a capture called between start and join": """
        import threading
        import torch

        def _pin(t):
            t.pin_memory()  # expect

        def start_up(runner, t):
            worker = threading.Thread(target=_pin, args=(t,))
            worker.start()
            runner.capture_model()
            worker.join()

        def capture(g, f):
            g.capture_begin()
            f()
            g.capture_end()
        """,
    "joined through a list of threads": """
        import threading
        import torch

        def _pin(t):
            t.pin_memory()

        def start_up(model, tensors, x):
            threads = [threading.Thread(target=_pin, args=(t,)) for t in tensors]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x)
        """,
    "futures waited for with result()": """
        from concurrent.futures import ThreadPoolExecutor
        import torch

        POOL = ThreadPoolExecutor(2)

        def _alloc(n):
            return torch.zeros(n, pin_memory=True)

        def start_up(model, n, x):
            fut = POOL.submit(_alloc, n)
            staging = fut.result()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x, staging)
        """,
    "a lambda target, a timer, a pinning flag, a helper of another module": """
        import threading
        import torch
        from mylib import make_buffer

        def _later(n, pin):
            return torch.empty(n, pin_memory=pin)  # expect

        def start_up(t, n, pin):
            threading.Thread(target=lambda: t.pin_memory()).start()  # expect
            threading.Timer(1.0, _later, args=(n, pin)).start()
            threading.Thread(target=lambda: make_buffer(n, pin_memory=True)).start()  # expect
        """
    + CAPTURE,
    "awaited to_thread and a ProcessPoolExecutor are not flagged; not pinning is not flagged": """
        import asyncio
        from concurrent.futures import ProcessPoolExecutor
        import torch
        from torch.utils.data import DataLoader

        def _pin(t):
            return t.pin_memory()

        def _loader(ds):
            return DataLoader(ds, pin_memory=True)

        async def start_up(t, ds):
            await asyncio.to_thread(_pin, t)
            ProcessPoolExecutor().submit(_pin, t)
            asyncio.get_running_loop().run_in_executor(None, _loader, ds)
        """
    + CAPTURE,
    "relaxed and thread_local captures only": """
        import threading
        import torch

        def _pin(t):
            t.pin_memory()

        def start_up(t):
            threading.Thread(target=_pin, args=(t,)).start()

        def capture(model, x, g1, g2):
            with torch.cuda.graph(g1, capture_error_mode="relaxed"):
                model(x)
            g2.capture_begin(capture_error_mode="thread_local")
            model(x)
            g2.capture_end()
        """,
    "one global capture among thread_local ones; what the target calls": """
        import threading
        import torch

        def _pin_all(ts):
            for t in ts:
                _pin_one(t)

        def _pin_one(t):
            torch.cuda.cudart().cudaHostRegister(t.data_ptr(), t.nbytes, 0)  # expect

        def start_up(ts):
            threading.Thread(target=_pin_all, args=(ts,), daemon=True).start()

        def capture(model, x, g1, g2, mode):
            with torch.cuda.graph(g1, capture_error_mode="thread_local"):
                model(x)
            with torch.cuda.graph(g2, capture_error_mode=mode):
                model(x)
        """,
    "started from a function called inside a global-mode capture region": """
        import threading
        import torch

        def _pin(t):
            t.pin_memory()  # expect

        def step(model, t, x):
            threading.Thread(target=_pin, args=(t,)).start()
            return model(x)

        def capture(model, t, x):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step(model, t, x)
            return g
        """,
    "started from a function called inside a thread_local capture region, joined there": """
        import threading
        import torch

        def _pin(t):
            t.pin_memory()

        def step(model, t, x):
            threading.Thread(target=_pin, args=(t,)).start()
            return model(x)

        def capture(model, t, x):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                step(model, t, x)
                pinner = threading.Thread(target=_pin, args=(t,))
                pinner.start()
                pinner.join()
            return g
        """,
    "a thread pool's map consumed in place, before the capture": """
        from concurrent.futures import ThreadPoolExecutor
        import torch

        def _pin(t):
            return t.pin_memory()

        def start_up(model, ts, x):
            ex = ThreadPoolExecutor(4)
            pinned = list(ex.map(_pin, ts))
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(x, pinned)
        """,
    "a dataset's map is not a thread pool": """
        import torch

        def _pin(sample):
            return sample.pin_memory()

        def prepare(dataset):
            return dataset.map(_pin)
        """
    + CAPTURE,
}


@FRONT_ENDS
@pytest.mark.parametrize("name", list(OFL108_CASES))
def test_ofl108(name: str, front_end: str) -> None:
    source = OFL108_CASES[name]
    found = findings(source, "OFL108", front_end)
    assert [line for line, _ in found] == expected(source)
    assert all(confidence == "high" for _, confidence in found)


EXTERNAL_CASES = {
    "a local external event, a list filled with append, tuple assignment": """
        import torch

        class Overlap:
            def __init__(self, n):
                self.side = torch.cuda.Stream()
                self.events = []
                for _ in range(n):
                    self.events.append(torch.cuda.Event(external=True))
                self.a, self.b = torch.cuda.Event(external=True), torch.cuda.Event(external=True)

            def forward(self, i, ev_maker):
                self.events[i].wait()
                torch.cuda.current_stream().wait_event(self.a)
                self.b.wait()
        """,
    "one binding not external, a record_event result, a parameter": """
        import torch

        class Overlap:
            def __init__(self):
                self.side = torch.cuda.Stream()
                self.ev = torch.cuda.Event(external=True)
                self.other = self.side.record_event()

            def reset(self):
                self.ev = torch.cuda.Event()

            def forward(self, x, given: torch.cuda.Event):
                self.ev.wait()  # expect
                self.other.wait()  # expect
                given.wait()  # expect
                return x
        """,
    "an external event through a local alias and a conditional": """
        import torch

        class Overlap:
            def __init__(self, timing):
                self.side = torch.cuda.Stream()
                ev = torch.cuda.Event(enable_timing=True, external=True) if timing else torch.cuda.Event(external=True)
                self.ev = ev

            def forward(self, x):
                self.ev.wait()
                return x
        """,
}


@FRONT_ENDS
@pytest.mark.parametrize("name", list(EXTERNAL_CASES))
def test_external_events_are_not_ofl101(name: str, front_end: str) -> None:
    source = EXTERNAL_CASES[name]
    assert [line for line, _ in findings(source, "OFL101", front_end)] == expected(source)


@FRONT_ENDS
def test_external_module_event_is_not_ofl202(front_end: str) -> None:
    source = """
        import torch

        READY = torch.cuda.Event(external=True)
        LATE = torch.cuda.Event()

        def publish():
            if torch.cuda.is_current_stream_capturing():
                READY.record()
                LATE.record()

        def drain(stream: torch.cuda.Stream):
            stream.wait_event(READY)
            stream.wait_event(LATE)  # expect
        """
    assert [line for line, _ in findings(source, "OFL202", front_end)] == expected(source)


def test_ofl108_tokens_cover_every_pinning_api() -> None:
    from offlint.analysis.rules.ofl108_host_pinning_off_thread import (
        _PINNING_APIS,
        HostPinningOffThread,
    )

    assert set(HostPinningOffThread.tokens) == {"pin_memory", *_PINNING_APIS}
