"""Inline suppression comments (offlint/suppression.py), through the real engine.

Every source below runs `step` inside `torch.cuda.graph(...)`, so each `.item()`, `.cpu()`,
`.tolist()` in it is an OFL105. Calls that must still be reported are made on `hit`, those
that must be suppressed on `x` or `y`; every test also checks how many findings were suppressed, so a directive that is
silently ignored (or a source that never fired) cannot pass.
"""

from __future__ import annotations

import textwrap

import pytest

from offlint.analysis.engine import FileSettings, check_source
from offlint.suppression import ALL, scan_comments

SELECT = FileSettings(select=frozenset({"OFL101", "OFL105"}))

PRELUDE = """\
import torch


def capture(x, xs, hit):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(x, xs, hit)


def step(x, xs, hit):
"""


def module(body: str) -> str:
    return PRELUDE + textwrap.indent(textwrap.dedent(body), "    ")


def run(source: str) -> tuple[list[tuple[int, str]], int]:
    report = check_source(source.encode(), "case.py", SELECT)
    assert not report.errors, report.errors
    return sorted((d.location.line, d.code) for d in report.diagnostics), report.suppressed


def flagged_lines(source: str, code: str = "OFL105") -> list[tuple[int, str]]:
    """The lines that must still be reported: those calling a method of `hit`."""
    return [
        (number, code) for number, line in enumerate(source.splitlines(), start=1) if "hit." in line
    ]


def check(body: str, *, suppressed: int) -> None:
    source = module(body)
    found, count = run(source)
    expected = flagged_lines(source)
    assert found == expected
    assert count == suppressed


def test_harness_reports_every_unsuppressed_call() -> None:
    found, count = run(
        module("flagged_a = hit.item()\nflagged_b = hit.cpu()\nflagged_c = hit.tolist()\n")
    )
    assert found == [(11, "OFL105"), (12, "OFL105"), (13, "OFL105")]
    assert count == 0


# ---------------------------------------------------------------- trailing directives


def test_trailing_ignore_covers_only_its_line() -> None:
    check(
        """
        quiet = x.item()  # offlint: ignore[OFL105]
        flagged = hit.item()
        """,
        suppressed=1,
    )


def test_trailing_ignore_for_another_code_does_not_cover() -> None:
    check(
        """
        flagged_a = hit.item()  # offlint: ignore[OFL101]
        flagged_b = hit.item()  # noqa: OFL101
        """,
        suppressed=0,
    )


def test_trailing_ignore_without_codes_covers_every_code() -> None:
    check(
        """
        quiet = x.item() + x.cpu()  # offlint: ignore
        flagged = hit.item()
        """,
        suppressed=2,
    )


@pytest.mark.parametrize(
    "directive",
    [
        "# offlint: ignore[OFL1]",
        "# offlint: ignore[OFL10]",
        "# offlint: ignore[OFL105]",
        "# offlint: ignore[OFL]",
        "# offlint: ignore[OFL101, OFL105]",
        "# offlint: ignore[OFL101,OFL105]",
        "# offlint:ignore[ofl105]",
        "# OFFLINT: IGNORE[OFL105]",
        "# why: hot path # offlint: ignore[OFL105]",
        "# noqa: OFL105",
        "# noqa:OFL105",
        "# noqa: E501, OFL105",
        "# noqa: E501 OFL105",
        "# noqa",
        "# NOQA",
    ],
)
def test_trailing_forms_that_cover_ofl105(directive: str) -> None:
    check(f"quiet = x.item()  {directive}\nflagged = hit.item()\n", suppressed=1)


@pytest.mark.parametrize(
    "directive",
    [
        "# offlint: ignore[OFL2]",
        "# offlint: ignore[OFL106]",
        "# offlint: ignored",
        "# noqa: E501",
        "# noqa: OFL101",
        "# offlint: file-ignore[OFL105]",  # file-ignore counts only on its own line
        "# expect: OFL105",
    ],
)
def test_trailing_forms_that_do_not_cover_ofl105(directive: str) -> None:
    check(f"flagged_a = hit.item()  {directive}\nflagged_b = hit.item()\n", suppressed=0)


def test_trailing_directive_on_a_compound_header_covers_the_header_only() -> None:
    check(
        """
        with torch.cuda.stream(x.item()):  # offlint: ignore[OFL105]
            flagged = hit.item()
        """,
        suppressed=1,
    )


def test_trailing_directive_on_a_multi_line_call_covers_its_own_line_only() -> None:
    check(
        """
        quiet = foo(x.item(),  # offlint: ignore[OFL105]
            flagged_arg=hit.cpu(),
        )
        """,
        suppressed=1,
    )


# ---------------------------------------------------------------- own-line directives


def test_own_line_ignore_covers_the_next_simple_statement() -> None:
    check(
        """
        # offlint: ignore[OFL105]
        quiet = x.item() + x.cpu()
        flagged = hit.item()
        """,
        suppressed=2,
    )


def test_own_line_ignore_covers_a_whole_multi_line_call() -> None:
    check(
        """
        # offlint: ignore[OFL105]
        quiet = foo(
            x.item(),
            x.tolist(),
            key=x.cpu(),
        )
        flagged = hit.item()
        """,
        suppressed=3,
    )


def test_own_line_ignore_covers_a_with_header_but_not_its_body() -> None:
    check(
        """
        # offlint: ignore[OFL105]
        with torch.cuda.stream(
            x.item()
        ), other(x.cpu()):
            flagged = hit.item()
        """,
        suppressed=2,
    )


def test_own_line_ignore_covers_an_if_header_but_not_its_body() -> None:
    check(
        """
        # offlint: ignore[OFL105]
        if foo(
                x) > x.item():
            flagged_body = hit.item()
        else:
            flagged_else = hit.item()
        """,
        suppressed=1,
    )


def test_own_line_ignore_covers_an_elif_header() -> None:
    check(
        """
        if xs:
            flagged_a = hit.item()
        # offlint: ignore[OFL105]
        elif x.item():
            flagged_b = hit.item()
        """,
        suppressed=1,
    )


def test_own_line_ignore_covers_a_decorated_def_with_its_decorators() -> None:
    check(
        """
        # offlint: ignore[OFL105]
        @register(
            x.item(),
        )
        @other(x.cpu())
        def inner():
            flagged = hit.item()
        """,
        suppressed=2,
    )


def test_own_line_ignore_inside_decorator_arguments_covers_the_next_line() -> None:
    check(
        """
        @register(
            # offlint: ignore[OFL105]
            x.item(),
            flagged=hit.cpu(),
        )
        def inner():
            pass
        """,
        suppressed=1,
    )


def test_own_line_ignore_inside_a_comprehension_covers_the_next_line() -> None:
    check(
        """
        flagged = [
            # offlint: ignore[OFL105]
            y.item()
            for y in xs
            if hit.cpu()
        ]
        """,
        suppressed=1,
    )


def test_trailing_ignore_inside_a_comprehension() -> None:
    check(
        """
        quiet = {k: v.item() for k, v in xs}  # offlint: ignore[OFL105]
        flagged = {
            k: v.item()  # noqa: OFL105
            for k, v in xs
            if hit.cpu()
        }
        """,
        suppressed=2,
    )


def test_comment_lines_between_directive_and_statement_keep_the_link() -> None:
    check(
        """
        # offlint: ignore[OFL105]
        # the host read is fine here: warm-up only
        quiet = x.item()
        flagged = hit.item()
        """,
        suppressed=1,
    )


def test_a_blank_line_breaks_the_link() -> None:
    check(
        """
        # offlint: ignore[OFL105]

        flagged = hit.item()
        """,
        suppressed=0,
    )


def test_own_line_noqa_covers_nothing() -> None:
    check(
        """
        # noqa: OFL105
        flagged_a = hit.item()
        # noqa
        flagged_b = hit.item()
        """,
        suppressed=0,
    )


def test_own_line_ignore_for_another_code_does_not_cover() -> None:
    check(
        """
        # offlint: ignore[OFL101]
        flagged = hit.item()
        """,
        suppressed=0,
    )


def test_directive_on_the_last_line_is_harmless() -> None:
    source = module("flagged = hit.item()\n") + "# offlint: ignore[OFL105]\n"
    found, count = run(source)
    assert found == flagged_lines(source)
    assert count == 0


# ---------------------------------------------------------------- file-level directives


def test_file_ignore_anywhere_on_its_own_line_covers_the_file() -> None:
    source = (
        module("quiet_a = x.item()\nquiet_b = x.cpu()\n") + "\n# offlint: file-ignore[OFL105]\n"
    )
    assert run(source) == ([], 2)


def test_file_ignore_is_code_specific() -> None:
    source = "# offlint: file-ignore[OFL101]\n" + module("flagged = hit.item()\n")
    found, count = run(source)
    assert found == flagged_lines(source)
    assert count == 0


def test_bare_file_ignore_covers_every_code() -> None:
    source = "# offlint: file-ignore\n" + module("quiet = x.item()\n")
    assert run(source) == ([], 1)


def test_file_ignore_with_prefix() -> None:
    source = "# offlint: file-ignore[OFL1]\n" + module("quiet = x.item()\n")
    assert run(source) == ([], 1)


# ---------------------------------------------------------------- what is not a comment


def test_hash_inside_a_string_is_not_a_directive() -> None:
    check(
        """
        s = "# offlint: ignore[OFL105]"; flagged_a = hit.item()
        t = '# noqa'; flagged_b = hit.item()
        u = f"{x} # offlint: ignore"; flagged_c = hit.item()
        """,
        suppressed=0,
    )


def test_directive_inside_a_docstring_is_not_a_directive() -> None:
    source = '"""Module.\n\n# offlint: file-ignore\n"""\n' + module(
        '"""# offlint: ignore[OFL105]"""\nflagged = hit.item()\n'
    )
    found, count = run(source)
    assert found == flagged_lines(source)
    assert count == 0


def test_directives_apply_per_rule_for_ofl101() -> None:
    source = textwrap.dedent(
        """\
        import torch


        class ModuleOffloader:
            def __init__(self, alt_stream):
                self.alt_stream = alt_stream
                self._load_event = None

            def start_onload(self):
                with torch.cuda.stream(self.alt_stream):
                    self._load_event = torch.cuda.Event()
                    self._load_event.record()

            def first(self):
                self._load_event.wait()  # offlint: ignore[OFL105]

            def second(self):
                # offlint: ignore[OFL101]
                self._load_event.wait()

            def third(self):
                self._load_event.wait()  # noqa: OFL101
        """
    )
    found, count = run(source)
    assert found == [(15, "OFL101")]
    assert count == 2


# ---------------------------------------------------------------- scan_comments directly


def test_scan_comments_classifies_directives() -> None:
    found = scan_comments(
        textwrap.dedent(
            """\
            # offlint: file-ignore[OFL105]
            a = 1  # offlint: ignore[OFL101, ofl2]
            # offlint: ignore
            b = 2  # noqa
            c = 3  # noqa: OFL101
            d = "# offlint: ignore[OFL999]"
            """
        )
    )
    assert found.file_codes == frozenset({"OFL105"})
    assert found.line_codes == {2: {"OFL101", "OFL2"}, 4: {ALL}, 5: {"OFL101"}}
    assert found.pending == {3: frozenset({ALL})}
    assert found.suppresses("OFL105", 40)
    assert found.suppresses("OFL204", 2)
    assert not found.suppresses("OFL101", 6)


def test_scan_comments_survives_tokenizer_errors() -> None:
    found = scan_comments("x = 1  # offlint: ignore[OFL105]\ny = (\n")
    assert found.line_codes == {1: {"OFL105"}}
