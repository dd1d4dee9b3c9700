"""`[tool.offlint]`: every key, validation (errors name the key), discovery, and selection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.config import (
    Config,
    ConfigError,
    ConfigFinder,
    SelectionOverrides,
    load_config_file,
    parse_config,
    resolve_selection,
)
from tests.sources import HOST_SYNC

HOST_SYNC_FINDINGS = [(5, "OFL105"), (6, "OFL105")]

EVENT = textwrap.dedent(
    """\
    import torch
    from torch.cuda import Event, current_stream


    class Prefetcher(torch.nn.Module):
        def __init__(self):
            self.copy_stream = torch.cuda.Stream()
            self.ready = Event()

        def forward(self, x):
            current_stream().wait_event(self.ready)
            return self.buffers
    """
)
EVENT_FINDINGS = [(11, "OFL101")]

# `.item()` in a plain function: reported only when configuration makes it capture-reachable
PLAIN = textwrap.dedent(
    """\
    def helper(x):
        return x.sum().item()


    class Loader:
        def fetch_all(self, x):
            return x.tolist()

        def other(self, x):
            return x.cpu()
    """
)

SOURCE = Path("/project/pyproject.toml")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def check(cwd: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["check", "--output-format", "concise", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def findings(stdout: str) -> list[tuple[str, int, str]]:
    """(path, line, code) of each concise line."""
    rows = []
    for line in stdout.splitlines():
        where, code = line.split(": ", 1)[0], line.split(": ", 1)[1].split(" ", 1)[0]
        path, row, _ = where.rsplit(":", 2)
        rows.append((path, int(row), code))
    return rows


# ---------------------------------------------------------------- parsing every key


def test_every_key_is_parsed() -> None:
    config = parse_config(
        {
            "select": ["ofl1", "ALL"],
            "ignore": ["OFL105"],
            "extend-select": ["OFL2"],
            "per-file-ignores": {"tests/*.py": ["OFL101"], "gen/**": ["OFL1"]},
            "exclude": ["build-*"],
            "extend-exclude": ["vendor/**"],
            "respect-gitignore": False,
            "force-exclude": False,
            "capture-reachable": ["helper", "Loader.fetch_*"],
            "probe": {"replays": 3},
            "fix": {"strategy": "inline"},
        },
        SOURCE,
    )
    assert config.root == Path("/project")
    assert config.source == SOURCE
    assert config.select == ("OFL1", "ALL")
    assert config.ignore == ("OFL105",)
    assert config.extend_select == ("OFL2",)
    assert config.per_file_ignores == (("tests/*.py", ("OFL101",)), ("gen/**", ("OFL1",)))
    assert config.exclude == ("build-*", "vendor/**")
    assert (config.respect_gitignore, config.force_exclude) == (False, False)
    assert config.capture_reachable == ("helper", "Loader.fetch_*")
    assert config.probe == {"replays": 3}
    assert config.fix == {"strategy": "inline"}


def test_empty_table_gives_defaults() -> None:
    config = parse_config({}, SOURCE)
    assert config.select is None
    assert (config.ignore, config.extend_select, config.per_file_ignores) == ((), (), ())
    assert (config.exclude, config.capture_reachable) == ((), ())
    assert (config.respect_gitignore, config.force_exclude) == (True, False)


def test_target_torch_was_removed_with_a_reason() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"target-torch": "2.11"}, SOURCE)
    assert str(info.value).startswith("/project/pyproject.toml: [tool.offlint] target-torch: it was removed")


def test_unknown_key_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"select": ["OFL1"], "selct": ["OFL1"]}, SOURCE)
    assert str(info.value) == "/project/pyproject.toml: unknown key [tool.offlint] selct (did you mean `select`?)"


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"select": 3}, "select must be a list of strings"),
        ({"select": ["OFL101", 7]}, "select must be a list of strings"),
        ({"select": ["XYZ"]}, "select: 'XYZ' is not a rule code or prefix"),
        ({"ignore": ["OFL1x"]}, "ignore: 'OFL1x' is not a rule code or prefix"),
        ({"extend-select": [True]}, "extend-select must be a list of strings"),
        ({"per-file-ignores": ["tests/*"]}, "per-file-ignores must be a table"),
        ({"per-file-ignores": {"tests/*": ["E501"]}}, "per-file-ignores.'tests/*': 'E501'"),
        ({"per-file-ignores": {"tests/*": 1}}, "per-file-ignores.'tests/*' must be a list"),
        ({"exclude": 5}, "exclude must be a list of strings"),
        ({"extend-exclude": [["a"]]}, "extend-exclude must be a list of strings"),
        ({"select": "OFL101"}, 'select must be a list of strings, not a string (write ["OFL101"])'),
        ({"respect-gitignore": "no"}, "respect-gitignore must be true or false"),
        ({"force-exclude": 1}, "force-exclude must be true or false"),
        ({"capture-reachable": [1]}, "capture-reachable must be a list of strings"),
        ({"capture-reachable": {"helper": True}}, "capture-reachable must be a list of strings"),
        ({"probe": 1}, "probe must be a table"),
        ({"fix": "yes"}, "fix must be a table"),
    ],
)
def test_bad_values_are_errors_naming_the_key(table: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(table, SOURCE)
    assert str(info.value).startswith("/project/pyproject.toml: [tool.offlint] ")
    assert named in str(info.value)


# ---------------------------------------------------------------- files


def test_load_pyproject_reads_the_tool_offlint_table(tmp_path: Path) -> None:
    path = write(
        tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.offlint]\nignore = ["OFL105"]\n'
    )
    config = load_config_file(path)
    assert config.ignore == ("OFL105",)
    assert config.root == tmp_path.resolve()


def test_load_offlint_toml_reads_the_whole_file(tmp_path: Path) -> None:
    path = write(tmp_path / "offlint.toml", 'ignore = ["OFL105"]\n')
    assert load_config_file(path).ignore == ("OFL105",)


def test_load_any_file_with_a_tool_offlint_table(tmp_path: Path) -> None:
    # `--config ci/pyproject-ci.toml`: a pyproject-style file under another name
    path = write(tmp_path / "ci" / "pyproject-ci.toml", '[tool.offlint]\nignore = ["OFL101"]\n')
    config = load_config_file(path)
    assert config.ignore == ("OFL101",)
    assert config.root == (tmp_path / "ci").resolve()
    # through --config, globs are relative to the working directory instead
    assert (
        ConfigFinder(path, fallback_root=tmp_path).for_path(tmp_path / "x.py").root
        == tmp_path.resolve()
    )


def test_invalid_toml_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "pyproject.toml", "[tool.offlint\nselect = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config_file(path)


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config_file(tmp_path / "nope.toml")


def test_finder_takes_the_nearest_pyproject_with_a_tool_offlint_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.offlint]\nignore = ["OFL101"]\n')
    write(tmp_path / "a" / "pyproject.toml", '[project]\nname = "no-offlint-table"\n')
    write(tmp_path / "a" / "b" / "pyproject.toml", '[tool.offlint]\nignore = ["OFL105"]\n')
    finder = ConfigFinder(fallback_root=tmp_path)
    assert finder.for_path(tmp_path / "x.py").ignore == ("OFL101",)
    assert finder.for_path(tmp_path / "a" / "x.py").ignore == ("OFL101",)  # skipped: no table
    assert finder.for_path(tmp_path / "a" / "b" / "c" / "x.py").ignore == ("OFL105",)
    assert (
        finder.for_path(tmp_path / "a" / "b").source
        == (tmp_path / "a" / "b" / "pyproject.toml").resolve()
    )


def test_finder_falls_back_to_defaults(tmp_path: Path) -> None:
    finder = ConfigFinder(fallback_root=tmp_path)
    config = finder.for_path(tmp_path / "x.py")
    if config.source is not None:  # pragma: no cover - a [tool.offlint] above the temp dir
        pytest.skip(f"{config.source} is above the temporary folder")
    assert config == Config(root=tmp_path.resolve())


def test_explicit_config_wins_everywhere(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.offlint]\nignore = ["OFL101"]\n')
    explicit = write(tmp_path / "other.toml", 'ignore = ["OFL105"]\n')
    finder = ConfigFinder(explicit, fallback_root=tmp_path)
    assert finder.for_path(tmp_path / "deep" / "x.py").ignore == ("OFL105",)


# ---------------------------------------------------------------- selection


CODES = ["OFL101", "OFL102", "OFL105", "OFL201", "OFL204"]
DEFAULTS = ["OFL101", "OFL105", "OFL201"]


NO_OVERRIDES = SelectionOverrides()


def select(
    config: Config, overrides: SelectionOverrides = NO_OVERRIDES, path: Path | None = None
) -> list[str]:
    return sorted(resolve_selection(config, overrides, CODES, DEFAULTS, path))


def test_selection_defaults() -> None:
    assert select(Config(root=Path("/p"))) == DEFAULTS


def test_selection_config_and_command_line() -> None:
    config = parse_config(
        {"select": ["OFL1"], "extend-select": ["OFL204"], "ignore": ["OFL102"]}, SOURCE
    )
    assert select(config) == ["OFL101", "OFL105", "OFL204"]
    # --select replaces the config's select and extend-select; the config's ignore still applies
    assert select(config, SelectionOverrides(select=("OFL201",))) == ["OFL201"]
    assert select(config, SelectionOverrides(select=("all",), ignore=("OFL2",))) == [
        "OFL101",
        "OFL105",
    ]
    assert select(config, SelectionOverrides(select=("OFL102",))) == []
    # --extend-select adds even what the config ignores; --ignore removes
    assert select(config, SelectionOverrides(extend_select=("OFL102",))) == [
        "OFL101",
        "OFL102",
        "OFL105",
        "OFL204",
    ]
    assert select(config, SelectionOverrides(ignore=("OFL10",))) == ["OFL204"]
    assert select(config, SelectionOverrides(extend_select=("OFL102",), ignore=("OFL102",))) == [
        "OFL101",
        "OFL105",
        "OFL204",
    ]


def test_selection_per_file_ignores(tmp_path: Path) -> None:
    config = parse_config(
        {"per-file-ignores": {"tests/*": ["OFL1"], "conftest.py": ["OFL201"]}},
        tmp_path / "pyproject.toml",
    )
    assert select(config, path=tmp_path / "tests" / "test_a.py") == ["OFL201"]
    assert select(config, path=tmp_path / "tests" / "sub" / "conftest.py") == []
    assert select(config, path=tmp_path / "src" / "a.py") == DEFAULTS


def test_selector_matching_no_rule_is_an_error() -> None:
    config = parse_config({"select": ["OFL8"]}, SOURCE)
    with pytest.raises(ConfigError, match=r"/project/pyproject.toml: 'OFL8' matches no rule"):
        select(config)
    with pytest.raises(ConfigError, match=r"--ignore: 'OFL3' matches no rule"):
        select(Config(root=Path("/p")), SelectionOverrides(ignore=("OFL3",)))


# ---------------------------------------------------------------- end to end through the CLI


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "pyproject.toml", "[tool.offlint]\n")
    write(tmp_path / "pkg" / "host_sync.py", HOST_SYNC)
    write(tmp_path / "pkg" / "offloader.py", EVENT)
    return tmp_path


def test_cli_config_select_and_ignore(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project / "pyproject.toml", '[tool.offlint]\nselect = ["OFL1"]\nignore = ["OFL105"]\n')
    code, out, err = check(project, monkeypatch=monkeypatch)
    assert (code, findings(out)) == (1, [("pkg/offloader.py", 11, "OFL101")])
    # OFL101 has a fixer, but `offlint fix` cannot fix this snippet: nothing counted fixable
    assert err == "Found 1 error.\n"
    # the command line's --select replaces the config's; the config's ignore still applies
    code, out, _ = check(project, "--select", "OFL105", monkeypatch=monkeypatch)
    assert (code, out) == (0, "")
    code, out, _ = check(project, "--select", "OFL", monkeypatch=monkeypatch)
    assert findings(out) == [("pkg/offloader.py", 11, "OFL101")]
    # --extend-select wins over the config's ignore
    code, out, _ = check(project, "--extend-select", "OFL105", monkeypatch=monkeypatch)
    assert findings(out) == [
        ("pkg/host_sync.py", 5, "OFL105"),
        ("pkg/host_sync.py", 6, "OFL105"),
        ("pkg/offloader.py", 11, "OFL101"),
    ]


def test_cli_per_file_ignores(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        project / "pyproject.toml",
        '[tool.offlint.per-file-ignores]\n"pkg/host_*.py" = ["OFL105"]\n"offloader.py" = ["OFL1"]\n',
    )
    code, out, err = check(project, monkeypatch=monkeypatch)
    assert (code, out) == (0, "")
    assert err == "All checks passed!\n"
    write(project / "pyproject.toml", '[tool.offlint.per-file-ignores]\n"other/*" = ["OFL105"]\n')
    code, out, _ = check(project, monkeypatch=monkeypatch)
    assert code == 1
    assert findings(out) == [
        ("pkg/host_sync.py", 5, "OFL105"),
        ("pkg/host_sync.py", 6, "OFL105"),
        ("pkg/offloader.py", 11, "OFL101"),
    ]


@pytest.mark.parametrize(
    "pattern", ["pkg/gen", "pkg/gen/**", "gen", "*/gen/*", "pkg/gen/*.py", "host_sync.py"]
)
def test_cli_exclude(project: Path, pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project / "pkg" / "gen" / "host_sync.py", HOST_SYNC)
    write(project / "pyproject.toml", f'[tool.offlint]\nexclude = ["{pattern}"]\n')
    code, out, _ = check(project, monkeypatch=monkeypatch)
    paths = {path for path, _, _ in findings(out)}
    assert "pkg/gen/host_sync.py" not in paths
    assert "pkg/offloader.py" in paths
    assert code == 1
    # a file named on the command line is excluded only with --force-exclude (what the
    # pre-commit hooks pass); by default, as in ruff, it is checked as given
    code, out, _ = check(project, "--force-exclude", "pkg/gen/host_sync.py", monkeypatch=monkeypatch)
    assert (code, findings(out)) == (0, [])
    _, out, _ = check(project, "pkg/gen/host_sync.py", monkeypatch=monkeypatch)
    assert findings(out) == [
        ("pkg/gen/host_sync.py", 5, "OFL105"),
        ("pkg/gen/host_sync.py", 6, "OFL105"),
    ]


def test_cli_extend_exclude(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        project / "pyproject.toml",
        '[tool.offlint]\nexclude = ["pkg/offloader.py"]\nextend-exclude = ["pkg/host_sync.py"]\n',
    )
    code, out, err = check(project, monkeypatch=monkeypatch)
    assert (code, out) == (0, "")
    # every file excluded: said, so an empty run is not mistaken for a clean one
    assert err == "No files were checked.\nofflint: warning: no Python files found under the given paths\n"


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ([], []),
        (["helper"], [("plain.py", 2, "OFL105")]),
        (["Loader.fetch_*"], [("plain.py", 7, "OFL105")]),
        (["fetch_all", "other"], [("plain.py", 7, "OFL105"), ("plain.py", 10, "OFL105")]),
        (
            ["help*", "Loader.*"],
            [("plain.py", 2, "OFL105"), ("plain.py", 7, "OFL105"), ("plain.py", 10, "OFL105")],
        ),
    ],
)
def test_cli_capture_reachable(
    tmp_path: Path,
    patterns: list[str],
    expected: list[tuple[str, int, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write(tmp_path / "plain.py", PLAIN)
    quoted = ", ".join(f'"{p}"' for p in patterns)
    write(tmp_path / "pyproject.toml", f"[tool.offlint]\ncapture-reachable = [{quoted}]\n")
    code, out, _ = check(tmp_path, monkeypatch=monkeypatch)
    assert findings(out) == expected
    assert code == (1 if expected else 0)


def test_cli_target_torch_is_an_error_naming_the_line(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        project / "pyproject.toml", '[tool.offlint]\nignore = ["OFL101"]\ntarget-torch = "2.11"\n'
    )
    code, out, err = check(project, monkeypatch=monkeypatch)
    assert (code, out) == (2, "")
    assert err.startswith(f"offlint: error: {(project / 'pyproject.toml').resolve()}:3: [tool.offlint] target-torch")


def test_cli_nested_projects_use_their_nearest_config(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "pyproject.toml", '[tool.offlint]\nignore = ["OFL105"]\n')
    # a nested project: its own root for globs, its own selection
    write(
        project / "sub" / "pyproject.toml",
        '[tool.offlint]\nignore = ["OFL101"]\n[tool.offlint.per-file-ignores]\n"pkg/skip.py" = ["OFL1"]\n',
    )
    write(project / "sub" / "pkg" / "host_sync.py", HOST_SYNC)
    write(project / "sub" / "pkg" / "offloader.py", EVENT)
    write(project / "sub" / "pkg" / "skip.py", HOST_SYNC)
    code, out, _ = check(project, monkeypatch=monkeypatch)
    assert code == 1
    assert findings(out) == [
        ("pkg/offloader.py", 11, "OFL101"),
        ("sub/pkg/host_sync.py", 5, "OFL105"),
        ("sub/pkg/host_sync.py", 6, "OFL105"),
    ]
    # run from inside the nested project: the same files, the same answer
    code, out, _ = check(project / "sub", monkeypatch=monkeypatch)
    assert findings(out) == [("pkg/host_sync.py", 5, "OFL105"), ("pkg/host_sync.py", 6, "OFL105")]


def test_cli_explicit_config_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(project / "pyproject.toml", '[tool.offlint]\nignore = ["OFL105"]\n')
    write(project / "ci" / "offlint.toml", 'ignore = ["OFL101"]\n')
    write(project / "ci" / "pyproject-ci.toml", '[tool.offlint]\nselect = ["OFL101"]\n')
    code, out, _ = check(project, "--config", "ci/offlint.toml", monkeypatch=monkeypatch)
    assert (code, [c for _, _, c in findings(out)]) == (1, ["OFL105", "OFL105"])
    code, out, _ = check(project, "--config", "ci/pyproject-ci.toml", monkeypatch=monkeypatch)
    assert (code, findings(out)) == (1, [("pkg/offloader.py", 11, "OFL101")])


def test_cli_explicit_config_globs_are_relative_to_the_working_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as with ruff, `--config FILE` globs are relative to where offlint runs, not to FILE
    write(project / "ci" / "offlint.toml", '[per-file-ignores]\n"pkg/host_*" = ["OFL105"]\n')
    code, out, _ = check(project, "--config", "ci/offlint.toml", monkeypatch=monkeypatch)
    assert (code, findings(out)) == (1, [("pkg/offloader.py", 11, "OFL101")])
    code, out, _ = check(
        project, str(project / "pkg"), "--config", "ci/offlint.toml", monkeypatch=monkeypatch
    )
    assert (code, findings(out)) == (1, [("pkg/offloader.py", 11, "OFL101")])
    write(project / "ci" / "offlint.toml", 'exclude = ["pkg/offloader.py"]\n')
    code, out, _ = check(project, "--config", "ci/offlint.toml", monkeypatch=monkeypatch)
    assert [p for p, _, _ in findings(out)] == ["pkg/host_sync.py", "pkg/host_sync.py"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.offlint]\nbogus = 1\n", "unknown key [tool.offlint] bogus"),
        ('[tool.offlint]\nselect = ["XYZ"]\n', "select: 'XYZ' is not a rule code or prefix"),
        ('[tool.offlint]\nselect = ["OFL8"]\n', "'OFL8' matches no rule"),
        ("[tool.offlint]\nexclude = 3\n", "exclude must be a list of strings"),
        ('[tool.offlint]\ncapture-reachable = ["helper"]\nprobe = 1\n', "probe must be a table"),
        ('[tool.offlint]\ncapture-reachable = "helper"\n', "capture-reachable must be a list of strings"),
        ("[tool.offlint]\ntarget-torch = 2.1\n", "target-torch: it was removed"),
        ("[tool.offlint\n", "invalid TOML"),
    ],
)
def test_cli_bad_config_exits_2_naming_the_problem(
    project: Path, text: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "pyproject.toml", text)
    code, out, err = check(project, monkeypatch=monkeypatch)
    assert code == 2
    assert out == ""
    assert err.startswith(f"offlint: error: {(project / 'pyproject.toml').resolve()}")
    assert message in err
    assert "Traceback" not in err


def test_cli_bad_nested_config_is_an_error_too(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "sub" / "pyproject.toml", "[tool.offlint]\nignroe = []\n")
    write(project / "sub" / "x.py", HOST_SYNC)
    code, out, err = check(project, monkeypatch=monkeypatch)
    assert (code, out) == (2, "")
    assert "unknown key [tool.offlint] ignroe" in err
    assert str((project / "sub" / "pyproject.toml").resolve()) in err


def test_cli_missing_config_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = check(project, "--config", "nope.toml", monkeypatch=monkeypatch)
    assert (code, out) == (2, "")
    assert err == "offlint: error: nope.toml: config file not found\n"


def test_catalogue_codes_are_what_selection_expands_against() -> None:
    # the CLI tests above rely on OFL101 and OFL105 being on by default
    catalogue = load_catalogue()
    assert catalogue["OFL101"].default_enabled and catalogue["OFL105"].default_enabled
