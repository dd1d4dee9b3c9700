"""`.pre-commit-hooks.yaml`, run by pre-commit itself on a temporary git repository.

Offline, the hooks are run as `repo: local` hooks with the manifest's own entry, args, types and
serial setting (language `system`: pre-commit runs this environment's `offlint`). With the
package registry reachable, pre-commit also installs the hooks from a git copy of this checkout
(`language: python`, as a user's `repo:` gets them); that test skips when it cannot install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the dev extra")
clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is in the dev extra")

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / ".pre-commit-hooks.yaml"
BIN = Path(sys.executable).parent
HOST_SYNC = (
    "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
    "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n"
)
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "offlint tests",
    "GIT_AUTHOR_EMAIL": "tests@offlint.invalid",
    "GIT_COMMITTER_NAME": "offlint tests",
    "GIT_COMMITTER_EMAIL": "tests@offlint.invalid",
}


def hooks() -> dict[str, dict[str, object]]:
    return {hook["id"]: hook for hook in yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))}


def pre_commit_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GIT_"))}
    env.update(GIT_IDENTITY)
    env["PRE_COMMIT_HOME"] = str(home)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # this environment's offlint
    env["NO_COLOR"] = "1"
    return env


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_IDENTITY})


def pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args, "--color", "never"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=pre_commit_env(home),
    )


@pytest.fixture
def work_tree(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if shutil.which("offlint", path=str(BIN)) is None:
        pytest.skip(f"no offlint script next to {sys.executable} for the hooks to run")
    tree = tmp_path / "project"
    tree.mkdir()
    git(tree, "init", "-q")
    (tree / "pyproject.toml").write_text('[tool.offlint]\nexclude = ["generated"]\n', encoding="utf-8")
    return tree


def test_the_manifest_is_valid_for_pre_commit() -> None:
    loaded = clientlib.load_manifest(str(MANIFEST))
    assert [hook["id"] for hook in loaded] == ["offlint", "offlint-fix"]
    found = hooks()
    assert found["offlint"]["entry"] == "offlint check --force-exclude"
    assert found["offlint-fix"]["entry"] == "offlint fix --apply --force-exclude"
    for hook in found.values():
        assert (hook["language"], hook["require_serial"]) == ("python", True)
    # check reads notebooks too (cell by cell); fix leaves them alone, so its hook is not given them
    assert found["offlint"]["types_or"] == ["python", "jupyter"] and "types" not in found["offlint"]
    assert found["offlint-fix"]["types"] == ["python"]


def test_there_is_no_unsafe_fixes_flag_to_opt_into() -> None:
    """The brief: an `--unsafe-fixes`-style opt-in only if `fix` has one. It has none (every
    fixer's rewrite is applied, unsafe ones listed as such); when one is added, the hook must
    pass it."""
    from click.testing import CliRunner

    from offlint.cli import main

    help_text = CliRunner().invoke(main, ["fix", "--help"]).stdout
    assert ("--unsafe-fixes" in help_text) == ("--unsafe-fixes" in str(hooks()["offlint-fix"]["entry"]))


def local_config(tree: Path, ids: list[str]) -> None:
    local_hooks = []
    for hook_id in ids:
        hook = dict(hooks()[hook_id])
        hook["language"] = "system"  # this environment's offlint, nothing to install
        hook.pop("minimum_pre_commit_version", None)
        local_hooks.append(hook)
    config = {"repos": [{"repo": "local", "hooks": local_hooks}]}
    (tree / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def test_the_check_hook_under_pre_commit(work_tree: Path, tmp_path: Path) -> None:
    local_config(work_tree, ["offlint"])
    (work_tree / "clean.py").write_text("x = 1\n", encoding="utf-8")
    (work_tree / "generated").mkdir()
    (work_tree / "generated" / "made.py").write_text(HOST_SYNC, encoding="utf-8")
    git(work_tree, "add", "-A")
    # clean code, and a bad file that `exclude` names: pre-commit names it, force-exclude skips it
    done = pre_commit(work_tree, tmp_path / "home", "run", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "offlint check" in done.stdout and "Passed" in done.stdout
    (work_tree / "bad.py").write_text(HOST_SYNC, encoding="utf-8")
    git(work_tree, "add", "-A")
    done = pre_commit(work_tree, tmp_path / "home", "run", "--all-files")
    assert done.returncode == 1
    assert "bad.py:5:5: OFL105" in done.stdout
    assert "generated/made.py" not in done.stdout


def test_the_fix_hook_rewrites_and_fails_the_commit(work_tree: Path, tmp_path: Path) -> None:
    local_config(work_tree, ["offlint-fix"])
    source = (REPO / "fixtures" / "golden" / "record_stream" / "in.py").read_text(encoding="utf-8")
    (work_tree / "prefetch.py").write_text(source, encoding="utf-8")
    git(work_tree, "add", "-A")
    done = pre_commit(work_tree, tmp_path / "home", "run", "--all-files")
    assert done.returncode == 1
    assert "files were modified by this hook" in done.stdout
    fixed = (work_tree / "prefetch.py").read_text(encoding="utf-8")
    assert fixed == (REPO / "fixtures" / "golden" / "record_stream" / "out.py").read_text(encoding="utf-8")
    git(work_tree, "add", "-A")
    assert pre_commit(work_tree, tmp_path / "home", "run", "--all-files").returncode == 0


@pytest.mark.network
def test_pre_commit_installs_the_hooks_from_the_repository(work_tree: Path, tmp_path: Path) -> None:
    """As a user's `repo:` entry does: a git copy of this checkout (committed, since pre-commit
    clones), its hooks installed by pre-commit with pip."""
    source = tmp_path / "offlint-src"
    source.mkdir()
    for name in ("offlint", "rules", "fixtures", "docs"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml"):
        shutil.copy2(REPO / name, source / name)
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "snapshot")
    (work_tree / "bad.py").write_text(HOST_SYNC, encoding="utf-8")
    git(work_tree, "add", "-A")
    done = pre_commit(work_tree, tmp_path / "home", "try-repo", str(source), "offlint", "--all-files")
    if done.returncode != 1 and "OFL105" not in done.stdout:
        pytest.skip(f"pre-commit could not install the hook environment (offline?): {done.stdout[-400:]}")
    assert done.returncode == 1, done.stdout
    assert "bad.py:5:5: OFL105" in done.stdout
