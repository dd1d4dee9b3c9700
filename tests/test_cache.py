"""`.offlint_cache/`: cached results equal fresh ones, and every input of a result invalidates it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offlint.analysis import cache as cache_module
from offlint.analysis.run import CheckOptions, check_paths
from offlint.catalogue import load_catalogue
from offlint.config import SelectionOverrides
from offlint.diagnostics import RunReport

CATALOGUE = load_catalogue()


def write_tree(root: Path) -> None:
    for spec in CATALOGUE.values():
        for example in (*spec.bad, *spec.good):
            if not example.config:
                (root / f"{example.id.lower().replace('-', '_')}.py").write_text(example.code, encoding="utf-8")
    (root / "plain.py").write_text("def f(x):\n    return x + 1\n", encoding="utf-8")
    (root / "broken.py").write_text("def f(:\n", encoding="utf-8")


def check(root: Path, *, use_cache: bool = True, select: tuple[str, ...] = ("ALL",)) -> RunReport:
    return check_paths(
        CheckOptions(
            paths=(root / "src",),
            overrides=SelectionOverrides(select=select),
            cwd=root,
            use_cache=use_cache,
            jobs=1,
        )
    )


def summary(report: RunReport) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for file in report.files:
        rows.extend(
            (d.path, d.location, d.code, d.name, d.message, d.fix_title, d.fix_safety, d.source_line)
            for d in file.diagnostics
        )
        rows.extend((e.path, e.kind, e.message, e.line) for e in file.errors)
        rows.append((file.path, file.parsed, file.suppressed))
    return sorted(rows, key=repr)


def cached(report: RunReport) -> set[str]:
    return {f.path for f in report.files if f.cached}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    write_tree(tmp_path / "src")
    return tmp_path


def test_cached_results_equal_fresh_ones(project: Path) -> None:
    fresh = check(project, use_cache=False)
    assert not (project / ".offlint_cache").exists()  # --no-cache writes nothing
    first = check(project)
    second = check(project)
    assert fresh.diagnostics, "the tree must hold findings"
    assert summary(fresh) == summary(first) == summary(second)
    assert not cached(first)
    assert cached(second) == {f.path for f in second.files}
    assert (project / ".offlint_cache" / ".gitignore").is_file()


def test_changed_bytes_are_rechecked(project: Path) -> None:
    check(project)
    target = next(iter(sorted((project / "src").glob("ofl105_bad*.py"))))
    target.write_text(target.read_text(encoding="utf-8").replace("\n", "\n\n", 1), encoding="utf-8")
    again = check(project)
    shown = f"src/{target.name}"
    assert shown not in cached(again)
    assert len(cached(again)) == len(again.files) - 1
    assert summary(again) == summary(check(project, use_cache=False))


def test_settings_are_part_of_the_key(project: Path) -> None:
    check(project, select=("ALL",))
    narrower = check(project, select=("OFL105",))
    assert not cached(narrower)
    assert {d.code for d in narrower.diagnostics} == {"OFL105"}
    assert cached(check(project, select=("ALL",)))  # both results are kept


def test_new_version_starts_from_an_empty_cache(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check(project)
    monkeypatch.setattr(cache_module, "__version__", "999.0")
    cache_module.engine_key.cache_clear()
    try:
        report = check(project)
        assert not cached(report)
        assert cached(check(project))
    finally:
        monkeypatch.undo()
        cache_module.engine_key.cache_clear()


def test_rule_changes_change_the_engine_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The key covers offlint's code and the catalogue: an edited rule is a new engine."""
    before = cache_module.engine_key()
    fake = tmp_path / "pkg"
    (fake / "analysis").mkdir(parents=True)
    (fake / "analysis" / "x.py").write_text("A = 1\n", encoding="utf-8")
    monkeypatch.setattr(cache_module, "_PACKAGE", fake)
    cache_module.engine_key.cache_clear()
    try:
        one = cache_module.engine_key()
        (fake / "analysis" / "x.py").write_text("A = 2\n", encoding="utf-8")
        cache_module.engine_key.cache_clear()
        two = cache_module.engine_key()
        assert len({before, one, two}) == 3
    finally:
        monkeypatch.undo()
        cache_module.engine_key.cache_clear()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\xff not json",
        b"[]",
        b'{"engine": "%s", "entries": []}',
        b'{"engine": "%s", "entries": {"x": 1}}',
    ],
)
def test_corrupted_cache_is_ignored(project: Path, garbage: bytes) -> None:
    expected = summary(check(project, use_cache=False))
    check(project)
    files = list((project / ".offlint_cache").glob("results-*.json"))
    assert len(files) == 1
    key = cache_module.engine_key().encode()
    files[0].write_bytes(garbage.replace(b"%s", key) if b"%s" in garbage else garbage)
    assert summary(check(project)) == expected
    assert summary(check(project)) == expected  # and the rewritten cache works again


def test_corrupted_entries_are_misses(project: Path) -> None:
    expected = summary(check(project, use_cache=False))
    check(project)
    path = next((project / ".offlint_cache").glob("results-*.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    for entry in data["entries"].values():
        entry["d"] = [["not", "a", "diagnostic"]]
        entry["p"] = "x"
        entry.pop("t", None)
    path.write_text(json.dumps(data), encoding="utf-8")
    report = check(project)
    assert summary(report) == expected
    assert summary(check(project)) == expected


def test_unwritable_cache_folder_is_not_an_error(project: Path) -> None:
    (project / ".offlint_cache").write_text("a file where the folder should be", encoding="utf-8")
    report = check(project)
    assert summary(report) == summary(check(project, use_cache=False))


def test_concurrent_writers_merge(project: Path) -> None:
    """Two runs that read the same old cache and write in turn keep both runs' entries."""
    root = project / ".offlint_cache"
    first = cache_module.ResultCache(root)
    second = cache_module.ResultCache(root)
    from offlint.diagnostics import FileReport

    first.put("a:1", FileReport(path="a.py"))
    second.put("b:1", FileReport(path="b.py"))
    assert first.save() and second.save()
    merged = cache_module.ResultCache(root)
    assert merged.get("a:1", "a.py") is not None and merged.get("b:1", "b.py") is not None
    assert not list(root.glob(".results-*"))  # no temporary files left behind
