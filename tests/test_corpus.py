"""The hand-annotated real-code corpus (corpus/*.toml, benchmarks/corpus.py).

The scorer and the toml validation are tested here on synthetic cases, offline. The corpus itself
is marked `network` and `slow`: its releases come from the package registry (cached under
$OFFLINT_CACHE_DIR); when pip cannot get them the test skips with the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import corpus  # noqa: E402
from benchmarks.corpus import (  # noqa: E402
    CORPUS_DIR,
    PRECISION_BAR,
    RECALL_BAR,
    Clean,
    CorpusError,
    CorpusFile,
    CorpusUnavailable,
    Expect,
    Project,
    Reported,
    Score,
    check_lines,
    extract_files,
    extraction_root,
    fetch_archive,
    format_score,
    load_corpus,
    parse_project,
    prepare,
    run_offlint,
    score,
    sha256_of,
    wheel_tag_options,
)
from benchmarks.trees import TreeUnavailable  # noqa: E402

SHA = "0" * 64


def _project(name: str, files: list[CorpusFile]) -> Project:
    return Project(name, f"{name}==1.0", "wheel", f"{name}-1.0-py3-none-any.whl", SHA, tuple(files), Path(f"{name}.toml"))


def _document(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "project": "demo",
        "requirement": "demo==1.0",
        "dist": "wheel",
        "archive": "demo-1.0-py3-none-any.whl",
        "archive_sha256": SHA,
        "file": [
            {
                "path": "demo/offload.py",
                "sha256": SHA,
                "role": "offloader",
                "expect": [{"line": 3, "code": "OFL101", "reason": "waits on an event recorded in warm-up"}],
                "clean": [{"line": 9, "reason": "guarded by is_current_stream_capturing()"}],
            }
        ],
    }
    document.update(overrides)
    return document


def test_scoring_counts_matches_misses_and_extras() -> None:
    offload = CorpusFile(
        "a/offload.py",
        SHA,
        "offloader",
        "",
        (Expect(10, "OFL101", "r"), Expect(20, "OFL103", "r"), Expect(30, "OFL201", "r")),
        (Clean(40, "guarded"),),
    )
    runner = CorpusFile("a/runner.py", SHA, "capture-driver", "", (), (Clean(5, "drives capture"),))
    other = CorpusFile("b/hooks.py", SHA, "offloader", "", (Expect(7, "OFL105", "r"),), ())
    projects = [_project("a", [offload, runner]), _project("b", [other])]
    reported = [
        Reported("a", "a/offload.py", 10, "OFL101", "m"),  # TP
        Reported("a", "a/offload.py", 20, "OFL102", "m"),  # right line, wrong code: FP (and 20/OFL103 is a FN)
        Reported("a", "a/offload.py", 40, "OFL105", "m"),  # on a clean line: FP and a clean violation
        Reported("a", "a/runner.py", 5, "OFL106", "m"),  # on a clean line of a driver: FP, violation
        Reported("a", "a/offload.py", 10, "OFL101", "duplicate"),  # the same finding twice counts once
        Reported("b", "b/hooks.py", 7, "OFL105", "m"),  # TP
    ]
    result = score(projects, reported)
    a, b = result.projects["a"], result.projects["b"]
    assert (a.files, a.expects, a.tp, a.fn, a.fp) == (2, 3, 1, 2, 3)
    assert (b.files, b.expects, b.tp, b.fn, b.fp) == (1, 1, 1, 0, 0)
    total = result.total
    assert (total.files, total.expects, total.tp, total.fn, total.fp) == (3, 4, 2, 2, 3)
    assert total.recall == pytest.approx(2 / 4)
    assert total.precision == pytest.approx(2 / 5)
    assert {(path, e.line, e.code) for _, path, e in result.false_negatives} == {
        ("a/offload.py", 20, "OFL103"),
        ("a/offload.py", 30, "OFL201"),
    }
    assert sorted((r.path, r.line, r.code) for r in result.false_positives) == [
        ("a/offload.py", 20, "OFL102"),
        ("a/offload.py", 40, "OFL105"),
        ("a/runner.py", 5, "OFL106"),
    ]
    assert sorted((c.reason, r.line) for c, r in result.clean_violations) == [("drives capture", 5), ("guarded", 40)]
    assert not result.meets_bars()


def test_scoring_perfect_report_meets_the_bars() -> None:
    corpus_file = CorpusFile("p/x.py", SHA, "offloader", "", (Expect(1, "OFL101", "r"), Expect(2, "OFL105", "r")), ())
    result = score([_project("p", [corpus_file])], [Reported("p", "p/x.py", 1, "OFL101", ""), Reported("p", "p/x.py", 2, "OFL105", "")])
    assert (result.total.tp, result.total.fn, result.total.fp) == (2, 0, 0)
    assert result.total.recall == result.total.precision == 1.0
    assert result.meets_bars()
    empty = score([_project("p", [corpus_file])], [])
    assert empty.total.recall == 0.0 and empty.total.precision == 1.0 and not empty.meets_bars()


def test_a_valid_document_parses() -> None:
    project = parse_project(_document(), Path("demo.toml"))
    assert project.version == "1.0"
    (corpus_file,) = project.files
    assert corpus_file.expects == (Expect(3, "OFL101", "waits on an event recorded in warm-up"),)
    assert corpus_file.cleans == (Clean(9, "guarded by is_current_stream_capturing()"),)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"color": "blue"}, "unknown key 'color'"),
        ({"project": "other"}, "must match the file name"),
        ({"requirement": "demo>=1.0"}, "must pin one release"),
        ({"dist": "egg"}, "'wheel' or 'sdist'"),
        ({"archive": "demo-1.0.tar.gz"}, "must be the file name of the wheel"),
        ({"archive_sha256": "abc"}, "64 lowercase hex"),
        ({"file": []}, "no [[file]] entries"),
        ({"file": [{"path": "demo/x.py", "sha256": SHA}]}, "missing 'role'"),
        ({"file": [{"path": "demo/x.py", "sha256": SHA, "role": "hero"}]}, "role 'hero'"),
        ({"file": [{"path": "../x.py", "sha256": SHA, "role": "other"}]}, "relative .py path"),
        ({"file": [{"path": "x.py", "sha256": SHA, "role": "other", "expect": [{"line": 1, "code": "OFL101"}]}]}, "missing 'reason'"),
        ({"file": [{"path": "x.py", "sha256": SHA, "role": "other", "expect": [{"line": 0, "code": "OFL101", "reason": "r"}]}]}, "positive integer"),
        ({"file": [{"path": "x.py", "sha256": SHA, "role": "other", "expect": [{"line": 1, "code": "E501", "reason": "r"}]}]}, "not a rule code"),
        ({"file": [{"path": "x.py", "sha256": SHA, "role": "other", "clean": [{"line": 1, "reason": "r", "code": "OFL101"}]}]}, "unknown key 'code'"),
        (
            {"file": [{"path": "x.py", "sha256": SHA, "role": "other", "expect": [{"line": 2, "code": "OFL101", "reason": "r"}], "clean": [{"line": 2, "reason": "r"}]}]},
            "both an expect and clean",
        ),
        ({"file": [{"path": "x.py", "sha256": SHA, "role": "other"}, {"path": "x.py", "sha256": SHA, "role": "other"}]}, "listed twice"),
    ],
)
def test_invalid_documents_are_rejected_with_the_reason(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(CorpusError) as caught:
        parse_project(_document(**overrides), Path("demo.toml"))
    assert message in str(caught.value)


def test_a_line_past_the_end_of_the_file_is_an_error() -> None:
    project = parse_project(_document(), Path("demo.toml"))
    (corpus_file,) = project.files
    check_lines(project, corpus_file, b"\n".join(b"x = %d" % i for i in range(9)))  # 9 lines: fine
    with pytest.raises(CorpusError, match="line 9 is past the file's end"):
        check_lines(project, corpus_file, b"x = 1\ny = 2\nz = 3\n")


def test_wheel_tags_pin_the_platform_wheel() -> None:
    assert wheel_tag_options("demo-1.0-py3-none-any.whl") == []
    options = wheel_tag_options("sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl")
    assert options == ["--platform", "manylinux_2_34_x86_64", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
    abi3 = wheel_tag_options("vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    assert abi3[abi3.index("--abi") + 1] == "abi3"
    major, minor = abi3[abi3.index("--python-version") + 1].split(".")
    assert (int(major), int(minor)) >= (3, 8)


def _demo_release(tmp_path: Path, source: bytes) -> tuple[Path, Project]:
    """A one-file wheel in `<tmp>/downloads` and the validated project that pins it."""
    downloads = tmp_path / "downloads"
    downloads.mkdir(parents=True)
    wheel = downloads / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zipped:
        zipped.writestr("demo/offload.py", source)
        zipped.writestr("demo/other.py", b"x = 1\n")
    document = _document(archive_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest())
    document["file"][0]["sha256"] = hashlib.sha256(source).hexdigest()
    return wheel, parse_project(document, Path("demo.toml"))


def test_an_archive_in_the_cache_is_reused_and_only_listed_files_are_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(corpus, "pip_download", _no_registry)
    source = b"".join(b"line_%d = %d\n" % (i, i) for i in range(12))
    wheel, project = _demo_release(tmp_path, source)
    assert fetch_archive(project) == wheel  # no download: the registry stub would raise
    extracted = extract_files(project, wheel)
    assert extracted == {"demo/offload.py": extraction_root(project) / "demo/offload.py"}
    assert extracted["demo/offload.py"].read_bytes() == source
    assert not (extraction_root(project) / "demo/other.py").exists()
    assert not extraction_root(project).is_relative_to(REPO)
    tampered = dataclasses.replace(project.files[0], sha256="1" * 64)
    with pytest.raises(CorpusError, match="has sha256"):
        extract_files(dataclasses.replace(project, files=(tampered,)), wheel)


def test_an_archive_with_the_wrong_hash_is_fetched_again_then_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path))
    wheel, project = _demo_release(tmp_path, b"x = 1\n" * 12)
    served = wheel.read_bytes()
    fetched: list[str] = []

    def registry(requirement: str, into: Path, **_: object) -> None:
        fetched.append(requirement)
        (into / project.archive).write_bytes(served)

    monkeypatch.setattr(corpus, "pip_download", registry)
    with pytest.raises(CorpusError, match="the corpus pins"):
        fetch_archive(dataclasses.replace(project, archive_sha256="2" * 64))
    assert fetched == ["demo==1.0"]  # one fresh download replaced the cached copy, then failed


def test_no_registry_is_reported_as_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(corpus, "pip_download", _no_registry)
    project = parse_project(_document(), Path("demo.toml"))
    with pytest.raises(CorpusUnavailable, match="offline"):
        fetch_archive(project)


def _no_registry(requirement: str, into: Path, **_: object) -> None:
    raise TreeUnavailable(f"{requirement}: pip download failed (offline?): no network")


def test_every_corpus_file_validates() -> None:
    """Offline: the toml files parse and validate (hashes and lines are checked with the network)."""
    projects = load_corpus()
    assert projects, f"no corpus/*.toml in {CORPUS_DIR}"
    for project in projects:
        for corpus_file in project.files:
            assert corpus_file.expects or corpus_file.cleans, f"{project.name}: {corpus_file.path} has no annotation"


@pytest.fixture(scope="module")
def corpus_run() -> tuple[list[Project], dict[Path, tuple[str, str]], Score]:
    """Download (or reuse) every release, verify both hashes and every annotated line, extract the
    files and run offlint once over them; skip with the reason when the registry is unreachable."""
    projects = load_corpus()
    try:
        located = prepare(projects)  # CorpusError (a failing test) on any hash or line mismatch
    except CorpusUnavailable as exc:
        pytest.skip(f"corpus releases not available: {exc}")
    reported, errors = run_offlint(sorted(located), None, located)
    return projects, located, score(projects, reported, errors)


@pytest.mark.network
@pytest.mark.slow
def test_every_hash_matches_and_every_file_is_extracted(
    corpus_run: tuple[list[Project], dict[Path, tuple[str, str]], Score],
) -> None:
    projects, located, _ = corpus_run
    listed = {(project.name, corpus_file.path) for project in projects for corpus_file in project.files}
    assert set(located.values()) == listed
    for path, (project_name, archive_path) in located.items():
        project = next(p for p in projects if p.name == project_name)
        corpus_file = next(f for f in project.files if f.path == archive_path)
        assert sha256_of(path) == corpus_file.sha256, f"{project_name}: {archive_path}"


@pytest.mark.network
@pytest.mark.slow
def test_the_corpus_is_large_enough(corpus_run: tuple[list[Project], dict[Path, tuple[str, str]], Score]) -> None:
    projects, _, result = corpus_run
    assert len(projects) >= 10, f"{len(projects)} projects in the corpus, the issue asks for at least 10"
    assert result.total.files >= 40, f"{result.total.files} files in the corpus, the issue asks for at least 40"
    assert result.total.expects > 0, "no expected finding anywhere"
    assert sum(len(f.cleans) for p in projects for f in p.files) > 0, "no clean line pinned anywhere"


# What the corpus measured on the last committed analysis (README, "On real code"): a finding
# lost or a false alarm gained fails here, above the bars below.
MEASURED_RECALL, MEASURED_PRECISION = 0.90, 0.97


@pytest.mark.network
@pytest.mark.slow
def test_the_corpus_scores_do_not_regress(corpus_run: tuple[list[Project], dict[Path, tuple[str, str]], Score]) -> None:
    _, _, result = corpus_run
    report = format_score(result)
    assert result.errors == [], report
    assert result.total.recall >= MEASURED_RECALL, f"recall {result.total.recall:.1%}\n{report}"
    assert result.total.precision >= MEASURED_PRECISION, f"precision {result.total.precision:.1%}\n{report}"


@pytest.mark.network
@pytest.mark.slow
def test_the_corpus_meets_the_bars(corpus_run: tuple[list[Project], dict[Path, tuple[str, str]], Score]) -> None:
    _, _, result = corpus_run
    report = format_score(result)
    assert result.errors == [], report
    assert result.total.recall >= RECALL_BAR, f"recall {result.total.recall:.1%} < {RECALL_BAR:.0%}\n{report}"
    assert result.total.precision >= PRECISION_BAR, (
        f"precision {result.total.precision:.1%} < {PRECISION_BAR:.0%}\n{report}"
    )
