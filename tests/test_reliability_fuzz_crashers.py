"""Every input a fuzz run failed on (`benchmarks/fuzz.py --crashers`), kept as a regression test:
each must now hold every property the campaign checks (check with both front ends, fix, add-noqa).
And the libcst position case of input #32621 at its root."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import libcst as cst
import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.analysis.positions import align_folded, libcst_statement_spans
from offlint.catalogue import load_catalogue

_SPEC = importlib.util.spec_from_file_location(
    "offlint_fuzz_crashers", Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"
)
assert _SPEC is not None and _SPEC.loader is not None
fuzz = importlib.util.module_from_spec(_SPEC)
sys.modules["offlint_fuzz_crashers"] = fuzz
_SPEC.loader.exec_module(fuzz)

CRASHERS = sorted((Path(__file__).parent / "data" / "fuzz_crashers").glob("input-*.bin"))
ALL = frozenset(load_catalogue())


def test_the_corpus_is_there() -> None:
    assert {p.name for p in CRASHERS} >= {"input-32621.bin", "input-36979.bin"}


@pytest.mark.parametrize("path", CRASHERS, ids=lambda p: p.stem)
def test_a_kept_crasher_holds_every_property(path: Path) -> None:
    found = fuzz.failures_for(path.read_bytes(), path.name)
    assert [f for f in found if f[0] not in fuzz.INFO_KINDS] == []


def _reported(data: bytes, front_end: str) -> list[tuple[str, int, int]]:
    report = check_source(data, "m.py", FileSettings(select=ALL, front_end=front_end), prefiltered=True)
    assert not report.errors
    return [(d.code, d.location.line, d.location.column) for d in report.diagnostics]


def test_a_backslash_on_a_blank_line_keeps_libcst_positions_on_their_line() -> None:
    # libcst folds `        \` into the next line and keeps neither: its tree lacks the line
    data = (Path(__file__).parent / "data" / "fuzz_crashers" / "input-32621.bin").read_bytes()
    assert cst.parse_module(data).bytes != data  # the root: libcst drops the line
    assert ("OFL101", 12, 17) in _reported(data, "libcst")
    assert _reported(data, "libcst") == _reported(data, "skeleton")


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_folded_lines_inside_a_block_and_twice_in_a_row(newline: str) -> None:
    text = (
        "import torch\n"
        "\n"
        "class Prefetcher:\n"
        "    def wait_and_get_device_tensors(self, *args):\n"
        "        return x\n"
        "        \\\n"
        "        \\\n"
        "        with torch.cuda.stream(stream):\n"
        "            with torch.cuda.graph(g):\n"
        "                del out\n"
        "                \\\n"
        "        ev.wait()\n"
    ).replace("\n", newline)
    data = text.encode()
    module = cst.parse_module(data)
    mapping = align_folded(module.code, text)
    assert mapping is not None and [line for line, _ in mapping] == [0, 1, 2, 3, 4, 7, 8, 9, 11]
    assert mapping[8] == (11, -8)  # libcst writes `ev.wait()` at its block's indentation
    reported = _reported(data, "skeleton")
    assert ("OFL101", 12, 9) in reported
    assert _reported(data, "libcst") == reported
    spans = libcst_statement_spans(module, text)
    assert (12, 12) in spans and (5, 5) in spans


def test_a_text_libcst_reproduces_is_not_remapped() -> None:
    text = 'x = (1,\n  \\\n 2)\ns = """\n\\\n"""\n'
    module = cst.parse_module(text)
    assert module.code == text
    assert align_folded(module.code, text) == [(i, 0) for i in range(6)]


def test_the_add_noqa_property_sees_lost_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    import offlint.suppression as suppression

    data = (Path(__file__).parent / "data" / "fuzz_crashers" / "input-36979.bin").read_bytes()
    report = check_source(data, "m.py", FileSettings(select=ALL))
    assert report.diagnostics
    assert fuzz.add_noqa_failures(data, "m.py", report, FileSettings(select=ALL)) == []
    real = suppression.add_directives

    def losing(text: str, wanted: dict[int, set[str]], spans_of: object) -> object:
        result = real(text, wanted, spans_of)  # type: ignore[arg-type]
        return type(result)(**{**result.__dict__, "text": result.text.replace("import torch\n", "", 1)})

    monkeypatch.setattr(suppression, "add_directives", losing)
    assert [kind for kind, _ in fuzz.add_noqa_failures(data, "m.py", report, FileSettings(select=ALL))] == [
        "add-noqa-lost-bytes"
    ]


def test_a_run_keeps_its_failing_inputs_byte_for_byte(tmp_path: Path) -> None:
    data = b"import torch\n\xff\xfe odd bytes\r\n"
    source = data.decode("utf-8", "surrogateescape")  # as a run keeps a failing input
    results = [
        (7, "mutated", [("fix-not-idempotent", "again")], 0.1, True, source),
        (8, "mutated", [("fix-refused-round-trip", "by design")], 0.1, True, source),  # not a failure
        (9, "generated", [], 0.1, True, None),
    ]
    written = fuzz.save_crashers(tmp_path, results)
    assert [p.name for p in written] == ["input-7.bin"]
    assert written[0].read_bytes() == data


def test_add_noqa_writes_no_directive_its_own_scan_cannot_read() -> None:
    # input 43064: `tokenize` refuses the file (CPython compiles it), so no comment in it can be
    # read: an own-line directive was written, did not suppress, and was asked for on every run
    from offlint.suppression import add_directives

    text = (Path(__file__).parent / "data" / "fuzz_crashers" / "input-43064.bin").read_bytes().decode()
    result = add_directives(text, {63: {"OFL105"}}, None)
    assert result.text == text and result.added == 0 and result.unplaced == [(63, "OFL105")]
