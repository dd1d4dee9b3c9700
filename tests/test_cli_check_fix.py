"""`offlint check --fix / --unsafe-fixes / --show-fixes / --diff`, ruff's contract: safe fixes by
default, unsafe ones on request, the remaining findings reported after fixing, `--diff` writes
nothing and exits 1 when it has something to show."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from offlint.cli import main

# OFL204 (safe fix): the consumer stream taken inside the side-stream block
RECORD = """\
import torch.cuda as tc


def copy_all(srcs, copy_stream: tc.Stream):
    out = []
    with tc.stream(copy_stream):
        for s in srcs:
            d = s.to("cuda", non_blocking=True)
            d.record_stream(tc.current_stream())
            out.append(d)
    return out
"""

# OFL106 (unsafe fix): a pageable host copy made in the constructor, copied non_blocking
PAGEABLE = """\
import torch


class CpuOffloader:
    def __init__(self, params):
        self.copy_stream = torch.cuda.Stream()
        self.host = {}
        for name, param in params.items():
            host = torch.empty(param.shape, dtype=param.dtype)
            host.copy_(param.data)
            self.host[name] = host

    def onload(self, name, device):
        return self.host[name].to(device, non_blocking=True)
"""


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "pyproject.toml").write_text("[tool.offlint]\n", encoding="utf-8")
    record = tmp_path / "record.py"
    pageable = tmp_path / "pageable.py"
    record.write_text(RECORD, encoding="utf-8")
    pageable.write_text(PAGEABLE, encoding="utf-8")
    return record, pageable


def _check(tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    return runner.invoke(
        main,
        ["check", "--no-cache", "--output-format", "offlint-json", "--min-confidence", "low", *args, str(tmp_path)],
        catch_exceptions=False,
    )


def _codes(output: str) -> list[str]:
    return sorted(d["code"] for d in json.loads(output)["diagnostics"])


def test_fix_applies_only_safe_fixes_and_reports_what_is_left(tmp_path: Path) -> None:
    record, pageable = _tree(tmp_path)
    result = _check(tmp_path, "--fix")
    assert "consumer_stream = tc.current_stream()" in record.read_text(encoding="utf-8")
    assert pageable.read_text(encoding="utf-8") == PAGEABLE  # unsafe: not without --unsafe-fixes
    assert _codes(result.stdout) == ["OFL106"]
    assert result.exit_code == 1


def test_unsafe_fixes_opt_in_fixes_everything_and_the_run_is_clean(tmp_path: Path) -> None:
    record, pageable = _tree(tmp_path)
    result = _check(tmp_path, "--fix", "--unsafe-fixes", "--show-fixes")
    assert "pin_memory=True" in pageable.read_text(encoding="utf-8")
    assert "consumer_stream" in record.read_text(encoding="utf-8")
    assert "OFL106 (14:16) [unsafe]" in result.stderr and "OFL204 (9:13) [safe]" in result.stderr
    assert _codes(result.stdout) == []
    assert result.exit_code == 0
    # a second run has nothing left to do
    again = _check(tmp_path, "--fix", "--unsafe-fixes")
    assert again.exit_code == 0 and _codes(again.stdout) == []


def test_diff_writes_nothing_and_exits_1_with_a_diff(tmp_path: Path) -> None:
    record, pageable = _tree(tmp_path)
    result = _check(tmp_path, "--diff")
    assert result.exit_code == 1
    assert "+    consumer_stream = tc.current_stream()" in result.stdout
    assert "pin_memory" not in result.stdout  # the unsafe one only with --unsafe-fixes
    assert record.read_text(encoding="utf-8") == RECORD and pageable.read_text(encoding="utf-8") == PAGEABLE
    record.write_text(RECORD.replace("tc.current_stream())", "copy_stream)"), encoding="utf-8")
    assert _check(tmp_path, "--diff").exit_code == 0


def test_flag_combinations_are_usage_errors(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _check(tmp_path, "--fix", "--diff").exit_code == 2
    assert _check(tmp_path, "--unsafe-fixes").exit_code == 2


def test_fix_applies_exclude_to_named_files_unless_told_not_to(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """As check: `exclude` covers files named on the command line with `--force-exclude` (the
    pre-commit hooks pass it); without it they are taken as given (what `make demo` does)."""
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["fixtures/**"]\n', encoding="utf-8")
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "record.py").write_text(RECORD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    excluded = runner.invoke(main, ["fix", "--force-exclude", "fixtures/record.py"], catch_exceptions=False)
    assert excluded.exit_code == 0 and "consumer_stream" not in excluded.stdout
    named = runner.invoke(main, ["fix", "fixtures/record.py"], catch_exceptions=False)
    assert named.exit_code == 1 and "+    consumer_stream = tc.current_stream()" in named.stdout
