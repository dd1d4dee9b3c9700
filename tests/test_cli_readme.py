"""The pre-commit and GitHub Actions snippets of README.md and docs/ci.md, checked statically: they
parse, name hooks and options that exist, and the `check` step they run produces the SARIF file
the upload step reads (tests/test_ci_recipes.py runs them for real)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from offlint.cli import main

yaml = pytest.importorskip("yaml", reason="pyyaml is in the dev extra")

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = README + (REPO / "docs" / "ci.md").read_text(encoding="utf-8")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def snippets(first_line: str) -> list[str]:
    """The YAML blocks of README.md and docs/ci.md whose first line is `first_line` (a comment
    naming the file)."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS, re.DOTALL)
    found = [block for block in blocks if block.splitlines()[0].strip() == first_line]
    assert found, f"no ```yaml block starts with {first_line!r}"
    return found


def options_of(subcommand: str) -> set[str]:
    context = click.Context(main)
    command = main.get_command(context, subcommand)
    assert command is not None, subcommand
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


def assert_runnable(command_line: str) -> list[str]:
    """Every option of an `offlint ...` line exists, and click parses the line."""
    words = shlex.split(command_line)
    assert words[0] == "offlint", command_line
    subcommand, args = words[1], words[2:]
    known = options_of(subcommand)
    for word in args:
        if word.startswith("-") and word != "-":
            assert word.split("=", 1)[0] in known, f"{command_line}: no option {word}"
    command = main.get_command(click.Context(main), subcommand)
    assert command is not None
    command.make_context(subcommand, list(args))  # raises on a bad value or a missing argument
    return words


# ---------------------------------------------------------------- pre-commit


def test_pre_commit_snippets_point_at_this_project_and_its_hooks() -> None:
    manifest = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    kinds = set()
    for text in snippets("# .pre-commit-config.yaml"):
        (repo,) = yaml.safe_load(text)["repos"]
        for hook in repo["hooks"]:
            if repo["repo"] == "local":
                kinds.add("local")
                # the same command as the published hook
                assert hook["entry"] == manifest[hook["id"]]["entry"]
                assert hook["require_serial"] is True and hook["types_or"] == ["python", "jupyter"]  # notebooks are checked too
                entry = hook["entry"]
            else:
                kinds.add("commit")
                assert repo["repo"] == PYPROJECT["project"]["urls"]["Repository"]
                assert repo["rev"] == "COMMIT"  # never a tag the repository does not have
                entry = manifest[hook["id"]]["entry"]
            assert_runnable(entry + " " + " ".join(shlex.quote(a) for a in hook.get("args", [])))
    assert kinds == {"local", "commit"}


def test_pre_commit_snippets_are_valid_configs(tmp_path: Path) -> None:
    clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is in the dev extra")
    for text in snippets("# .pre-commit-config.yaml"):
        path = tmp_path / ".pre-commit-config.yaml"
        path.write_text(text, encoding="utf-8")
        loaded = clientlib.load_config(str(path))
        assert [hook["id"] for hook in loaded["repos"][0]["hooks"]] == ["offlint"]


# ---------------------------------------------------------------- GitHub Actions


def workflow() -> dict[str, Any]:
    """The full workflow of docs/ci.md (README.md shows its check job)."""
    full = [w for w in map(yaml.safe_load, snippets("# .github/workflows/offlint.yml")) if "probe" in w["jobs"]]
    assert len(full) == 1
    return full[0]


def run_lines(job: dict[str, Any]) -> list[str]:
    return [line for step in job["steps"] if "run" in step for line in step["run"].splitlines() if line.strip()]


def test_workflow_checks_then_uploads_the_sarif_it_wrote() -> None:
    jobs = workflow()["jobs"]
    check = jobs["check"]
    assert check["permissions"]["security-events"] == "write"
    commands = [line for line in run_lines(check) if line.startswith("offlint ")]
    assert len(commands) == 1
    words = assert_runnable(commands[0])
    assert words[1] == "check"
    assert words[words.index("--output-format") + 1] == "sarif"
    written = words[words.index("--output-file") + 1]
    steps = check["steps"]
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("github/codeql-action/upload-sarif@"))
    assert upload["with"]["sarif_file"] == written
    # the upload runs after check, and also when check found something (exit 1)
    assert steps.index(upload) > next(i for i, s in enumerate(steps) if commands[0] in str(s.get("run", "")))
    assert "failure()" in upload["if"]


def test_workflow_probes_on_a_self_hosted_gpu_runner() -> None:
    probe = workflow()["jobs"]["probe"]
    assert "self-hosted" in probe["runs-on"] and "gpu" in probe["runs-on"]
    commands = [line for line in run_lines(probe) if line.startswith("offlint ")]
    assert commands and all(assert_runnable(line)[1] == "probe" for line in commands)
    assert any("offlint[probe]" in line for line in run_lines(probe))


def test_workflows_install_the_release_with_the_git_form_as_fallback() -> None:
    import offlint

    url = PYPROJECT["project"]["urls"]["Repository"]
    for text in snippets("# .github/workflows/offlint.yml"):
        for job in yaml.safe_load(text)["jobs"].values():
            installs = [line for line in run_lines(job) if line.startswith("pip install")]
            assert installs and all(f"=={offlint.__version__}\"" in line for line in installs), installs
        # the fallback, where no release is on the reader's index: the repository at a commit
        assert f"git+{url}@COMMIT" in text


def test_the_workflow_check_step_writes_valid_sarif(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the workflow's check command for real on a small project."""
    (command,) = [line for line in run_lines(workflow()["jobs"]["check"]) if line.startswith("offlint ")]
    (tmp_path / "bad.py").write_text(
        "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
        "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    words = shlex.split(command)
    result = CliRunner().invoke(main, [*words[1:], "--no-cache"])
    assert result.exit_code == 1, result.stderr  # a finding: the job fails, the upload still runs
    sarif = json.loads((tmp_path / words[words.index("--output-file") + 1]).read_text(encoding="utf-8"))
    assert sarif["version"] == "2.1.0"
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["OFL105"]


# ---------------------------------------------------------------- the rest of what README says about the CLI


def test_check_synopsis_lists_every_option() -> None:
    synopsis = (REPO / "docs" / "check.md").read_text(encoding="utf-8").split("```", 2)[1]
    command = main.get_command(click.Context(main), "check")
    assert command is not None
    for param in command.params:
        names = [*param.opts, *param.secondary_opts]
        if not isinstance(param, click.Option) or "--help" in names:
            continue
        assert any(re.search(re.escape(name) + r"\b", synopsis) for name in names), (
            f"docs/check.md's synopsis does not mention {names}"
        )


def test_pyproject_metadata_is_complete() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and (REPO / "LICENSE").read_text().startswith("MIT License")
    assert project["authors"] and project["classifiers"] and project["keywords"]
    assert {"Homepage", "Repository", "Issues"} <= set(project["urls"])
    assert "pathspec>=0.12" in project["dependencies"]
    dev = set(project["optional-dependencies"]["dev"])
    assert {"pre-commit>=3.2", "pyyaml>=6", "pytest-xdist>=3.5", "mkdocs>=1.6", "mkdocs-material>=9.5"} <= dev
    minor = f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"
    assert minor in project["classifiers"]
