"""The CI recipes of README.md and docs/ci.md, run as written.

Each ```yaml block that starts with `# .pre-commit-config.yaml` is run by pre-commit on a
temporary git repository holding one hazard; each `# .github/workflows/...` block's `check` job
has its `run:` lines executed, in order, in a fresh virtual environment. The only substitutions
are the ones the docs ask the reader to make: the repository URL (pyproject's `Repository`)
becomes a git copy of this checkout, and `COMMIT` that copy's commit. Installing from the copy
needs the package registry (offlint's dependencies, the build backend): offline these tests skip
with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the dev extra")
pytest.importorskip("pre_commit", reason="pre-commit is in the dev extra")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = {name: (REPO / name).read_text(encoding="utf-8") for name in ("README.md", "docs/ci.md")}
URL = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Repository"]
VERSION = re.search(r'__version__ = "([^"]+)"', (REPO / "offlint" / "__init__.py").read_text()).group(1)  # type: ignore[union-attr]
BIN = Path(sys.executable).parent
HOST_SYNC = (
    "import torch\n\n\ndef step(x):\n    torch.cuda.synchronize()\n    return x\n\n\n"
    "def capture(x):\n    g = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(g):\n        step(x)\n"
)
FINDING = "bad.py:5:5: OFL105"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "offlint tests",
    "GIT_AUTHOR_EMAIL": "tests@offlint.invalid",
    "GIT_COMMITTER_NAME": "offlint tests",
    "GIT_COMMITTER_EMAIL": "tests@offlint.invalid",
}


def blocks(first_line: str) -> list[tuple[str, str]]:
    """(document, text) of every ```yaml block of the docs whose first line is `first_line`."""
    found = [
        (name, block)
        for name, text in DOCUMENTS.items()
        for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
        if block.splitlines()[0].strip() == first_line
    ]
    assert found, f"no ```yaml block starts with {first_line!r}"
    return found


PRE_COMMIT = blocks("# .pre-commit-config.yaml")
WORKFLOWS = blocks("# .github/workflows/offlint.yml")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GIT_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(GIT_IDENTITY)
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=clean_env())
    return done.stdout.strip()


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git copy of this checkout's package (committed: pip and pre-commit clone it) and its commit."""
    source = tmp_path_factory.mktemp("offlint-src")
    for name in ("offlint", "rules", "fixtures"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(REPO / "docs", source / "docs", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", ".pre-commit-hooks.yaml"):
        shutil.copy2(REPO / name, source / name)
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "snapshot")
    return source, git(source, "rev-parse", "HEAD")


def as_written(text: str, snapshot: tuple[Path, str], wheel: Path | None = None) -> str:
    """The reader's substitutions: the repository and the commit; and the release, which a test
    installs from a wheel built from the checkout (what `python -m build` makes for the index)."""
    source, commit = snapshot
    assert "COMMIT" in text or URL not in text, "a recipe that names the repository pins a commit"
    text = text.replace(URL, source.as_uri()).replace("COMMIT", commit)
    if wheel is not None:
        released = re.compile(r"offlint(\[[a-z]+\])?==" + re.escape(VERSION))
        text = released.sub(lambda m: f"offlint{m.group(1) or ''} @ {wheel.as_uri()}", text)
    return text


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, snapshot: tuple[Path, str]) -> Path:
    """The release's wheel, built from the snapshot (the build backend comes from the registry)."""
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(snapshot[0])],
        capture_output=True, text=True, timeout=900, check=False,
    )
    offline_skip(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (built,) = out.glob(f"offlint-{VERSION}-*.whl")
    return built


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's repository with one hazard, staged."""
    work = tmp_path / "project"
    work.mkdir()
    git(work, "init", "-q")
    (work / "bad.py").write_text(HOST_SYNC, encoding="utf-8")
    return work


def offline_skip(output: str) -> None:
    markers = ("Could not find a version", "No matching distribution", "Failed to establish", "Network is unreachable",
               "Temporary failure in name resolution", "ConnectionError", "Max retries exceeded")
    if any(marker in output for marker in markers):
        pytest.skip(f"the package registry is not reachable: {output[-300:]}")


# ---------------------------------------------------------------- pre-commit


def test_no_recipe_pins_a_tag() -> None:
    """pre-commit exits 3 on a `rev:` the repository does not have: offlint has no release tags."""
    for _, text in PRE_COMMIT:
        for repo in yaml.safe_load(text)["repos"]:
            assert repo["repo"] == "local" or repo["rev"] == "COMMIT", repo


@pytest.mark.parametrize(
    "recipe", [pytest.param(text, id=name) for name, text in PRE_COMMIT if "language: system" in text]
)
def test_local_pre_commit_recipe_reports_the_hazard(recipe: str, project: Path, tmp_path: Path) -> None:
    """`repo: local` with `language: system`: the `offlint` on PATH (this environment's) runs."""
    (project / ".pre-commit-config.yaml").write_text(recipe, encoding="utf-8")
    git(project, "add", "-A")
    env = clean_env(PRE_COMMIT_HOME=str(tmp_path / "home"), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=project, capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert FINDING in done.stdout, done.stdout
    (project / "bad.py").write_text("x = 1\n", encoding="utf-8")
    git(project, "add", "-A")
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=project, capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe", [pytest.param(text, id=name) for name, text in PRE_COMMIT if "additional_dependencies" in text]
)
def test_pre_commit_recipe_installs_the_release(
    recipe: str, project: Path, tmp_path: Path, snapshot: tuple[Path, str], wheel: Path
) -> None:
    """`repo: local`, `language: python`, `additional_dependencies: ["offlint==X"]`: pre-commit
    installs the release (here: its wheel) into the hook's environment."""
    assert f'"offlint=={VERSION}"' in recipe
    _pre_commit_installs_and_reports(as_written(recipe, snapshot, wheel), project, tmp_path)


def _pre_commit_installs_and_reports(config: str, project: Path, tmp_path: Path) -> None:
    """pre-commit, with no offlint on PATH, installs the hook from `config` and reports the hazard."""
    (project / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    git(project, "add", "-A")
    env = clean_env(PRE_COMMIT_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=project, capture_output=True, text=True, timeout=900, env=env, check=False,
    )
    offline_skip(done.stdout + done.stderr)
    assert done.returncode == 1, done.stdout + done.stderr
    assert FINDING in done.stdout, done.stdout


@pytest.mark.network
@pytest.mark.parametrize(
    "recipe", [pytest.param(text, id=name) for name, text in PRE_COMMIT if "repo: local" not in text]
)
def test_pre_commit_recipe_installs_offlint_at_a_commit(
    recipe: str, project: Path, tmp_path: Path, snapshot: tuple[Path, str]
) -> None:
    """`repo:` + `rev: COMMIT`: pre-commit clones the repository at that commit and installs the
    hook with pip, as a user's pre-commit does (no offlint on PATH)."""
    _pre_commit_installs_and_reports(as_written(recipe, snapshot), project, tmp_path)


# ---------------------------------------------------------------- GitHub Actions


def check_job_runs(text: str) -> list[str]:
    steps = yaml.safe_load(text)["jobs"]["check"]["steps"]
    return [line for step in steps if "run" in step for line in step["run"].splitlines() if line.strip()]


def test_readme_and_docs_run_the_same_check_job() -> None:
    assert len({tuple(check_job_runs(text)) for _, text in WORKFLOWS}) == 1
    assert {name for name, _ in WORKFLOWS} == set(DOCUMENTS)


@pytest.mark.network
@pytest.mark.slow
def test_workflow_check_job_runs_in_a_clean_venv(
    project: Path, tmp_path: Path, snapshot: tuple[Path, str], wheel: Path
) -> None:
    """The check job's `run:` lines in order, in a new virtual environment with a current pip (what
    setup-python gives), from the root of the user's checkout. `check` exits 1 on the finding; the
    SARIF file the upload step reads holds it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(venv))
    # pip before 23.3 refuses `name @ git+file:///path` (a URL with no host) as a requirement
    upgrade = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )
    offline_skip(upgrade.stdout + upgrade.stderr)
    (command_install, command_check) = check_job_runs(WORKFLOWS[0][1])
    install = subprocess.run(
        ["bash", "-c", as_written(command_install, snapshot, wheel)],
        cwd=project, capture_output=True, text=True, timeout=900, env=env, check=False,
    )
    offline_skip(install.stdout + install.stderr)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    assert (venv / "bin" / "offlint").exists()
    check = subprocess.run(
        ["bash", "-c", command_check], cwd=project, capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert check.returncode == 1, check.stderr  # a finding: the job fails, the upload still runs
    sarif_file = command_check.split("--output-file", 1)[1].split()[0]
    sarif = json.loads((project / sarif_file).read_text(encoding="utf-8"))
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["OFL105"]
