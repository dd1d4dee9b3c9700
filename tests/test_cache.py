"""`.offlint_cache/`: cached results equal fresh ones, and every input of a result invalidates it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from offlint.analysis import cache as cache_module
from offlint.catalogue import load_catalogue
from offlint.config import SelectionOverrides
from offlint.diagnostics import RunReport
from offlint.pipeline.check import CheckOptions, check_paths

CATALOGUE = load_catalogue()


def write_tree(root: Path) -> None:
    for spec in CATALOGUE.values():
        for example in (*spec.bad, *spec.good):
            if not example.config:
                (root / f"{example.id.lower().replace('-', '_')}.py").write_text(example.code, encoding="utf-8")
    (root / "plain.py").write_text("def f(x):\n    return x + 1\n", encoding="utf-8")
    (root / "broken.py").write_text("def f(:\n", encoding="utf-8")


def check(
    root: Path, *, use_cache: bool = True, select: tuple[str, ...] | None = ("ALL",), floor: str | None = None
) -> RunReport:
    return check_paths(
        CheckOptions(
            paths=(root / "src",),
            overrides=SelectionOverrides(select=select, min_confidence=floor),
            cwd=root,
            use_cache=use_cache,
            jobs=1,
        )
    )


def summary(report: RunReport) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for file in report.files:
        rows.extend(
            (d.path, d.location, d.code, d.name, d.message, d.fix_title, d.fix_safety, d.source_line, d.note, d.fix)
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
    """The key covers offlint's code and the catalogue: an edited rule is a new engine. Sources
    count by size and mtime (as Python's bytecode cache does), so a same-size edit shows through
    its mtime, and a new module through its name."""
    before = cache_module.engine_key()
    fake = tmp_path / "pkg"
    (fake / "analysis").mkdir(parents=True)
    module = fake / "analysis" / "x.py"
    module.write_text("A = 1\n", encoding="utf-8")
    os.utime(module, ns=(1_000_000_000, 1_000_000_000))
    monkeypatch.setattr(cache_module, "_PACKAGE", fake)
    keys = [before]
    try:
        for edit in ("same size", "new size", "new module", "cache folder"):
            cache_module.engine_key.cache_clear()
            keys.append(cache_module.engine_key())
            if edit == "same size":
                module.write_text("A = 2\n", encoding="utf-8")
                os.utime(module, ns=(2_000_000_000, 2_000_000_000))
            elif edit == "new size":
                module.write_text("A = 22\n", encoding="utf-8")
            elif edit == "new module":
                (fake / "y.py").write_text("", encoding="utf-8")
            else:  # byte-compiled files are not sources
                (fake / "__pycache__").mkdir()
                (fake / "__pycache__" / "z.py").write_text("", encoding="utf-8")
        cache_module.engine_key.cache_clear()
        keys.append(cache_module.engine_key())
        assert len(set(keys[:-1])) == 5
        assert keys[-1] == keys[-2]
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
        b'{"engine": "%s", "entries": {}, "files": []}',
        b'{"engine": "%s", "entries": {}, "files": {"x": 1, "y": [1, 2]}}',
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


@pytest.mark.parametrize("bad_row", ["digest not a string", "short row", "not a row"])
def test_corrupted_index_rows_are_misses(project: Path, monkeypatch: pytest.MonkeyPatch, bad_row: str) -> None:
    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0)
    expected = summary(check(project, use_cache=False))
    check(project)
    path = next((project / ".offlint_cache").glob("results-*.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["files"], "the tree must have been indexed"
    for real, row in data["files"].items():
        if bad_row == "digest not a string":
            row[4] = 5
        elif bad_row == "short row":
            data["files"][real] = row[:4]
        else:
            data["files"][real] = {"size": row[0]}
    path.write_text(json.dumps(data), encoding="utf-8")
    reads = count_reads(monkeypatch)
    again = check(project)
    assert len(reads) == len(again.files)  # every file read again, none misread
    assert summary(again) == expected
    reads.clear()
    check(project)
    assert reads == []  # and the index is whole again


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


def test_concurrent_writers_merge(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs that read the same old cache and write in turn keep both runs' entries."""
    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0)
    root = project / ".offlint_cache"
    first = cache_module.ResultCache(root)
    second = cache_module.ResultCache(root)
    from offlint.diagnostics import FileReport

    first.put("a:1", FileReport(path="a.py"))
    second.put("b:1", FileReport(path="b.py"))
    # the stat index merges the same way
    old = os.stat(project / "src" / "plain.py")
    first.remember("/x/a.py", old, "digest-a")
    second.remember("/x/b.py", old, "digest-b")
    assert first.save() and second.save()
    merged = cache_module.ResultCache(root)
    assert merged.get("a:1", "a.py") is not None and merged.get("b:1", "b.py") is not None
    assert merged.known_digest("/x/a.py", old) == "digest-a"
    assert merged.known_digest("/x/b.py", old) == "digest-b"
    assert not list(root.glob(".results-*"))  # no temporary files left behind


# ---------------------------------------------------------------- the stat index


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy on the run's file reads (the real function still runs)."""
    from offlint.pipeline import check as run_module

    seen: list[str] = []
    real_read = run_module.read_file_and_stat

    def spy(found):  # type: ignore[no-untyped-def]
        seen.append(found.display)
        return real_read(found)

    monkeypatch.setattr(run_module, "read_file_and_stat", spy)
    return seen


def test_unchanged_files_are_not_read_again(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0)  # the tree was written just now
    reads = count_reads(monkeypatch)
    first = check(project)
    assert len(reads) == len(first.files)
    reads.clear()
    second = check(project)
    assert reads == [], "a file the index knows unchanged must not be read"
    assert cached(second) == {f.path for f in second.files}
    assert summary(second) == summary(first) == summary(check(project, use_cache=False))


def test_a_same_size_edit_with_its_mtime_restored_is_seen(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ctime changes on every write and cannot be set back: the index sees through `touch -d`."""
    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0)
    target = project / "src" / "plain.py"
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    check(project)
    before = target.stat()
    target.write_text("def f(x):\n    return x - 1\n", encoding="utf-8")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    reads = count_reads(monkeypatch)
    again = check(project)
    assert reads == ["src/plain.py"]
    assert "src/plain.py" not in cached(again)


def test_files_changed_just_now_are_never_indexed(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Racy files (changed within RACY_SECONDS of the run) are read every time, but their
    results still come from the content-keyed cache."""
    old = project / "src" / "plain.py"
    stamp = 1_000_000_000
    os.utime(old, ns=(stamp, stamp))
    first = check(project)
    (written,) = (project / ".offlint_cache").glob("results-*.json")
    index = json.loads(written.read_bytes())["files"]
    # every file's ctime is recent (os.utime sets it), so nothing is indexed yet
    assert index == {}
    reads = count_reads(monkeypatch)
    second = check(project)
    assert len(reads) == len(first.files)
    assert cached(second) == {f.path for f in second.files}


def test_a_moved_file_is_found_by_content(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "RACY_SECONDS", 0)
    check(project)
    source = next(iter(sorted((project / "src").glob("ofl101_bad*.py"))))
    source.rename(project / "src" / "renamed.py")
    reads = count_reads(monkeypatch)
    again = check(project)
    assert reads == ["src/renamed.py"]
    assert "src/renamed.py" in cached(again)
    assert summary(again) == summary(check(project, use_cache=False))


LOW_ONLY_FIXABLE = """\
import torch


class Offloader:
    def __init__(self, module):
        self.module = module
        self.stream = torch.cuda.Stream()
        self.ready = None

    def prefetch(self, host, device):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            device.copy_(host, non_blocking=True)
            self.ready = torch.cuda.Event()
            self.ready.record()

    def consume(self):
        self.ready.wait()
"""


def _fixable_at(root: Path, floor: str, *, use_cache: bool) -> list[tuple[str, int, bool]]:
    report = check(root, use_cache=use_cache, select=None, floor=floor)
    return sorted((d.code, d.location.line, d.fixable) for f in report.files for d in f.diagnostics)


def test_a_lower_floor_sees_the_fixes_a_cached_run_left_unconfirmed(tmp_path: Path) -> None:
    """A run at the default floor does not pay to confirm the fixes of findings it hides; the
    cache holds every tier, so a later run at a lower floor must not show them unconfirmed."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "off.py").write_text(LOW_ONLY_FIXABLE, encoding="utf-8")
    # the event hand-off fix is sound for an engine capturing whole forwards only
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\ncapture-modes = ["whole"]\n', encoding="utf-8")
    fresh = _fixable_at(tmp_path, "low", use_cache=False)
    assert fresh == [("OFL101", 18, True), ("OFL103", 11, True)]  # fixable, both only at low
    assert _fixable_at(tmp_path, "medium", use_cache=True) == []
    assert _fixable_at(tmp_path, "low", use_cache=True) == fresh
    assert _fixable_at(tmp_path, "low", use_cache=True) == fresh  # and now from the cache
