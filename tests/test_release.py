"""An installable release (issue 34): one version, a changelog entry for it, hints that name
extras that exist, links that resolve; and (slow, needs the package registry for the build
backend and the dependencies) `python -m build`'s sdist and wheel, the wheel installed into a
clean virtual environment and run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner

import offlint
from offlint.catalogue import load_catalogue
from offlint.cli import main
from offlint.links import bundled_docs, rule_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
FIXTURE = REPO / "fixtures" / "sglang_offloader_original.py"


def test_the_version_is_stated_once() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "offlint/__init__.py"
    assert CliRunner().invoke(main, ["--version"]).stdout.splitlines()[0] == f"offlint {offlint.__version__}"


def test_the_changelog_has_the_version_and_the_tag_convention() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(offlint.__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.MULTILINE)
    assert f"v{offlint.__version__}" in text  # the tag the release gets
    assert "v0.2.0" in (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")  # how releases are tagged


def test_every_extra_a_hint_names_exists() -> None:
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    named = {
        extra
        for path in (REPO / "offlint").rglob("*.py")
        for extra in re.findall(r"offlint\[([a-z-]+)\]", path.read_text(encoding="utf-8"))
    }
    assert named and named <= extras, named - extras


def test_every_rule_link_resolves_in_a_checkout() -> None:
    docs = bundled_docs()
    assert docs is not None
    for code, spec in load_catalogue().items():
        url = rule_url(code)
        assert url is not None
        page = Path(unquote(urlparse(url).path))
        assert page.is_file() and spec.markdown() in page.read_text(encoding="utf-8")


def test_a_docs_url_must_be_a_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\ndocs-url = "docs/here"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("docs-url must be an http(s):// or file:// URL")


def _offline_skip(output: str) -> None:
    markers = ("Could not find a version", "No matching distribution", "Failed to establish", "Network is unreachable",
               "Temporary failure in name resolution", "ConnectionError", "Max retries exceeded")
    if any(marker in output for marker in markers):
        pytest.skip(f"the package registry is not reachable: {output[-300:]}")


@pytest.mark.network
@pytest.mark.slow
def test_the_built_wheel_installs_and_runs_in_a_clean_venv(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="build is in the dev extra")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)],
        capture_output=True, text=True, timeout=900, check=False,
    )
    _offline_skip(built.stdout + built.stderr)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    version = offlint.__version__
    wheel = dist / f"offlint-{version}-py3-none-any.whl"
    sdist = dist / f"offlint-{version}.tar.gz"
    assert wheel.is_file() and sdist.is_file()
    names = set(zipfile.ZipFile(wheel).namelist())
    for inside in ("offlint/_catalogue/OFL101.toml", "offlint/_docs/rules/OFL101.md", "offlint/_docs/index.md",
                   "offlint/_fixtures/sglang_offloader_original.py"):
        assert inside in names, inside
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"pyproject.toml", "CHANGELOG.md", "docs/rules/OFL101.md", "rules/OFL101.toml"} <= members

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True, text=True, timeout=900, env=env, check=False,
    )
    _offline_skip(install.stdout + install.stderr)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    exe = str(venv / "bin" / "offlint")

    def run(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env, check=False)

    assert run("--version").stdout.splitlines()[0] == f"offlint {version}"
    project = tmp_path / "project"
    project.mkdir()
    (project / "offload.py").write_bytes(FIXTURE.read_bytes())
    checked = run("check", "--output-format", "concise", ".", cwd=project)
    assert checked.returncode == 1
    assert [line.split()[1] for line in checked.stdout.splitlines()] == ["OFL103", "OFL101"]
    rules = run("rule", "--all")
    assert rules.returncode == 0 and rules.stdout.count("\n# ") + 1 == len(load_catalogue())
    # every link the installed offlint writes resolves, into the docs the wheel carries
    sarif = json.loads(run("check", "--output-format", "sarif", ".", cwd=project).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    for uri in [driver["informationUri"], *(rule["helpUri"] for rule in driver["rules"])]:
        page = Path(unquote(urlparse(uri).path))
        assert page.is_file() and venv in page.parents, uri
    demo = run("probe", "--help")
    assert demo.returncode == 0 and "--demo" in demo.stdout
