"""Property tests of `offlint fix` on generated variants of the prefetch/wait offloader shape.

Variants differ in formatting (indent unit, CRLF, blank lines, comments, quoting) and in what
does not matter to the shape (method and attribute names, method order). For every variant:
the fix applies, the result compiles and is a fixed point, every comment survives, lines the
fix did not edit are unchanged, and the result has the same AST as the fix of the plainly
formatted variant with the same names (formatting never changes what the fix produces).
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from offlint.analysis.engine import FileSettings, check_source
from offlint.catalogue import load_catalogue
from offlint.diagnostics import Confidence
from offlint.fixing.apply import FIXABLE_RULES, FixSettings
from offlint.fixing.loop import fix_source

# these tests fix for an engine that captures whole forwards (`capture-modes = ["whole"]`):
# the rewrites the split capture modes defeat are offered only there (fixing/capture_modes.py)
WHOLE = ("whole",)


SELECT = frozenset(load_catalogue()) | frozenset(FIXABLE_RULES)


@dataclass(frozen=True)
class Names:
    load: str
    drop: str
    get: str
    tensors: str
    event: str
    quote: str
    loader_method_order: tuple[int, ...]
    strategy: str


def _owner() -> list[tuple[int, str]]:
    return [
        (0, "class Owner:"),
        (1, "def __init__(self, step):"),
        (2, "self.step = step"),
        (2, "self.loaders = []"),
        (1, "def wrap(self, modules):"),
        (2, "modules = list(modules)"),
        (2, "stream = torch.cuda.Stream()"),
        (2, "for m in modules:"),
        (3, "self.loaders.append(Loader(m, stream))"),
        (2, "for i, m in enumerate(modules):"),
        (3, "install(i, m, self.loaders, self.step)"),
        (2, "return modules"),
        (1, "def post_init(self):"),
        (2, "for i in range(self.step):"),
        (3, "self.loaders[i].{load}()"),
    ]


def _hook() -> list[tuple[int, str]]:
    return [
        (0, "def install(index, module, loaders, step):"),
        (1, "def on_end(module, args, output):"),
        (2, "loaders[(index + step) % len(loaders)].{load}()"),
        (2, "loaders[index].{drop}()"),
        (1, "module.register_forward_hook(on_end)"),
    ]


def _loader_methods() -> list[list[tuple[int, str]]]:
    return [
        [
            (1, "def {load}(self):"),
            (2, "self.stream.wait_stream(torch.cuda.current_stream())"),
            (2, "with torch.cuda.stream(self.stream):"),
            (3, "self.{tensors} = [p.to({q}cuda{q}, non_blocking=True) for p in self.host]"),
            (3, "self.{event} = torch.cuda.Event()"),
            (3, "self.{event}.record()"),
        ],
        [
            (1, "def {drop}(self):"),
            (2, "self.{tensors} = None"),
            (2, "self.{event} = None"),
        ],
        [
            (1, "def {get}(self):"),
            (2, "self.{event}.wait()"),
            (2, "return self.{tensors}"),
        ],
    ]


def _lines(names: Names) -> list[tuple[int, str]]:
    loader = [
        (0, "class Loader:"),
        (1, "def __init__(self, module, stream):"),
        (2, "self.stream = stream"),
        (2, "self.host = [p for p in module.parameters()]"),
        (2, "self.{tensors} = None"),
        (2, "self.{event} = None"),
    ]
    methods = _loader_methods()
    for index in names.loader_method_order:
        loader.extend(methods[index])
    lines = [(0, "import torch"), *_owner(), *_hook(), *loader]
    fields = {
        "load": names.load,
        "drop": names.drop,
        "get": names.get,
        "tensors": names.tensors,
        "event": names.event,
        "q": names.quote,
    }
    return [(level, text.format(**fields)) for level, text in lines]


@dataclass(frozen=True)
class Formatting:
    indent: str
    newline: str
    comments_before: frozenset[int]  # line indexes with a `# marker-N` line above
    trailing: frozenset[int]  # line indexes with a trailing `# tail-N` comment
    blank_before: frozenset[int]


PLAIN = Formatting("    ", "\n", frozenset(), frozenset(), frozenset())


def render(names: Names, fmt: Formatting) -> bytes:
    out = []
    for index, (level, text) in enumerate(_lines(names)):
        pad = fmt.indent * level
        if index in fmt.blank_before or (level == 0 and index):
            out.append("")
        if index in fmt.comments_before:
            out.append(f"{pad}# marker-{index}")
        tail = f"  # tail-{index}" if index in fmt.trailing and not text.endswith(":") else ""
        out.append(f"{pad}{text}{tail}")
    return (fmt.newline.join(out) + fmt.newline).encode()


def _fix(data: bytes, strategy: str):
    result = fix_source(data, "variant.py", FixSettings(select=SELECT, strategy=strategy, min_confidence=Confidence.LOW, capture_modes=WHOLE))
    assert not result.errors, result.errors
    return result


identifiers = st.sampled_from(["start_onload", "prefetch", "fetch_next", "load", "begin_copy"])
names_strategy = st.builds(
    Names,
    load=st.just("start_onload") | identifiers,
    drop=st.sampled_from(["offload", "release", "drop"]),
    get=st.sampled_from(["wait_and_get_device_tensors", "get", "tensors_now"]),
    tensors=st.sampled_from(["_device_tensors", "weights", "_bufs"]),
    event=st.sampled_from(["_load_event", "ready", "_ev"]),
    quote=st.sampled_from(['"', "'"]),
    loader_method_order=st.permutations([0, 1, 2]).map(tuple),
    strategy=st.sampled_from(["overlap", "inline"]),
).filter(lambda n: len({n.load, n.drop, n.get}) == 3)

LINE_COUNT = 39  # len(_lines(...))
indexes = st.frozensets(st.integers(min_value=1, max_value=LINE_COUNT - 1), max_size=12)
formatting_strategy = st.builds(
    Formatting,
    indent=st.sampled_from(["    ", "  ", "\t"]),
    newline=st.sampled_from(["\n", "\r\n"]),
    comments_before=indexes,
    trailing=indexes,
    blank_before=indexes,
)

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    # each example parses and fixes a module several times: shrinking would take minutes
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@SETTINGS
@given(names=names_strategy, fmt=formatting_strategy)
def test_formatting_never_changes_what_the_fix_produces(names: Names, fmt: Formatting) -> None:
    data = render(names, fmt)
    result = _fix(data, names.strategy)
    assert result.changed, (
        "the shape must be found whatever it is called and however it is formatted"
    )
    fixed = result.fixed
    compile(fixed, "variant.py", "exec")

    # same AST as the fix of the plainly formatted variant
    plain = _fix(render(names, PLAIN), names.strategy).fixed
    assert ast.dump(ast.parse(fixed)) == ast.dump(ast.parse(plain))

    # a fixed point, also for the other strategy
    assert _fix(fixed, names.strategy).fixed == fixed
    assert _fix(fixed, "auto").fixed == fixed

    # every comment survives; the newline style is kept everywhere
    text = fixed.decode()
    for index in fmt.comments_before:
        assert f"# marker-{index}" in text
    for index in fmt.trailing:
        if not _lines(names)[index][1].endswith(":"):
            assert f"# tail-{index}" in text
    if fmt.newline == "\r\n":
        assert "\n" not in text.replace("\r\n", "")

    # nothing left for check to report as fixable
    report = check_source(fixed, "variant.py", FileSettings(select=SELECT))
    assert [d for d in report.diagnostics if d.fixable] == []


@SETTINGS
@given(names=names_strategy, fmt=formatting_strategy)
def test_lines_outside_the_edits_are_unchanged(names: Names, fmt: Formatting) -> None:
    data = render(names, fmt)
    result = _fix(data, names.strategy)
    before = data.decode().split(fmt.newline)
    after = result.fixed.decode().split(fmt.newline)
    edited: set[int] = set()
    for edit in result.edits:
        edited.update(range(edit.line, edit.end_line + 1))
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("delete", "replace"):
            for line in range(i1 + 1, i2 + 1):
                # only lines of edited statements (or blank lines moved with them) may go
                assert (
                    line in edited
                    or not before[line - 1].strip()
                    or before[line - 1].strip().startswith("#")
                ), (
                    line,
                    before[line - 1],
                )


@SETTINGS
@given(fmt=formatting_strategy)
def test_mechanical_fixes_keep_formatting(fmt: Formatting) -> None:
    pad = fmt.indent
    lines = [
        "import torch",
        "",
        "def upload(side):",
        f"{pad}host = torch.empty(4, 4)  # tail",
        f"{pad}# the copy",
        f"{pad}with torch.cuda.stream(side):",
        f'{pad}{pad}dev = host.to("cuda", non_blocking=True)',
        f"{pad}{pad}dev.record_stream(torch.cuda.current_stream())",
        f"{pad}return dev",
    ]
    data = (fmt.newline.join(lines) + fmt.newline).encode()
    result = _fix(data, "auto")
    text = result.fixed.decode()
    assert "pin_memory=True" in text
    assert "record_stream(consumer_stream)" in text
    assert "# tail" in text and "# the copy" in text
    compile(result.fixed, "m.py", "exec")
    assert _fix(result.fixed, "auto").fixed == result.fixed
    if fmt.newline == "\r\n":
        assert "\n" not in text.replace("\r\n", "")
