"""The capture reach of the whole checked tree, from the semantic core (`offlint/semantics`), handed
to each file's analysis: the functions a capture region, a forward path with stream or host-copy
effects, or a serving engine's captured interface reaches (seeds, with the chain that reaches
them), and the stream, event and host-tensor objects of receivers the per-file kinds cannot type
(hints).

What the core keeps between runs is JSON in the cache folder, written and read through the
results cache's guards (never through a link, only this user's files, one engine key): the last
answer under the tree's stat key (a warm run with no file changed reads no file), each file's
slice facts by stat, and lowered files by content (an edit re-lowers one file).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from offlint.analysis.callgraph import Seed
from offlint.diagnostics import Confidence, FileError
from offlint.discovery import Discovered

# a tree with more files than this is left to the per-file analysis alone
MAX_CORE_FILES = 20_000
Reader = Callable[[Discovered], "tuple[bytes, os.stat_result | None] | FileError"]


@dataclass(frozen=True)
class TreeFacts:
    """What the semantic core hands each file's analysis, by display path."""

    seeds: dict[str, tuple[Seed, ...]] = field(default_factory=dict)
    # (function, receiver source, kind value): receivers the core's objects type
    hints: dict[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    incomplete: str | None = None  # why the answer may miss reach (a budget was spent)


def tree_seeds(
    files: Sequence[Discovered],
    cache_folder: Path | None,
    read: dict[str, tuple[bytes, os.stat_result | None]],
    reader: Reader,
) -> TreeFacts:
    """The seeds and receiver hints the semantic core finds for each file's functions. The files
    it had to read are left in `read` (display -> bytes and the stat taken before reading), so the
    run reads none of them twice; `reader` reads one (the run's guarded read)."""
    python = [f for f in files if f.real.endswith(".py")]
    if not python or len(python) > MAX_CORE_FILES:
        return TreeFacts()
    stats: dict[str, tuple[int, ...]] = {}
    key = _stat_key(python, stats)
    saved = _load(cache_folder, _names()[0])
    tree = saved.get("tree") if saved else None
    if isinstance(tree, dict) and tree.get("key") == key:
        found = _facts_from_json(tree)
        if found is not None:
            return found
    from offlint.semantics.project import LoweredStore, SourceFile, build

    def read_one(found: Discovered) -> Callable[[], bytes | None]:
        def read_it() -> bytes | None:
            data = reader(found)
            if isinstance(data, FileError):
                return None
            read[found.display] = data
            return data[0]

        return read_it

    lowered = _load(cache_folder, _names()[1])
    store = LoweredStore(saved.get("files") if saved else None, lowered.get("lowered") if lowered else None)
    sources = [SourceFile(f.display, f.real, read_one(f), stats.get(f.display)) for f in python]
    core = build(sources, store, prepare=_without_tables)
    facts = TreeFacts(
        {
            display: tuple(Seed(r.qualname, Confidence(r.tier), r.reason) for r in reached)
            for display, reached in core.reached_by_file().items()
        },
        {display: tuple(items) for display, items in core.hints_by_file().items()},
        core.incomplete,
    )
    if cache_folder is not None:
        from offlint.analysis.cache import write_blob

        name = _names()
        write_blob(cache_folder, name[0], {"tree": {"key": key, **_facts_to_json(facts)}, "files": store.index})
        if store.changed:
            write_blob(cache_folder, name[1], {"lowered": store.kept_lowered()})
    return facts


def _without_tables(data: bytes) -> bytes:
    """The text the core parses: literal tables emptied, lines and columns kept (the analysis'
    own `without_literals`, which keeps the original where that does not compile)."""
    from offlint.analysis.prefilter import without_literals

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    light = without_literals(text)
    return data if light is text else light.encode("utf-8")


def merged(first: Sequence[Seed], second: Sequence[Seed]) -> tuple[Seed, ...]:
    """One seed per function: the higher tier's (the first's on a tie)."""
    best: dict[str, Seed] = {}
    for seed in (*first, *second):
        known = best.get(seed.qualname)
        if known is None or seed.confidence.rank > known.confidence.rank:
            best[seed.qualname] = seed
    return tuple(sorted(best.values(), key=lambda s: s.qualname))


def _names() -> tuple[str, str]:
    from offlint.analysis.cache import engine_key

    engine = engine_key()[:24]
    return f"core-{engine}.json", f"lowered-{engine}.json"


def _load(cache_folder: Path | None, name: str) -> dict | None:
    if cache_folder is None:
        return None
    from offlint.analysis.cache import read_blob

    return read_blob(cache_folder, name)


def _facts_to_json(facts: TreeFacts) -> dict:
    return {
        "seeds": {d: [[s.qualname, s.confidence.value, s.reason] for s in seeds] for d, seeds in facts.seeds.items()},
        "hints": {d: [list(h) for h in hints] for d, hints in facts.hints.items()},
        "incomplete": facts.incomplete,
    }


def _facts_from_json(raw: dict) -> TreeFacts | None:
    try:
        seeds = {
            str(d): tuple(Seed(str(q), Confidence(c), str(r)) for q, c, r in rows) for d, rows in raw["seeds"].items()
        }
        hints = {str(d): tuple((str(a), str(b), str(c)) for a, b, c in rows) for d, rows in raw["hints"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    incomplete = raw.get("incomplete")
    return TreeFacts(seeds, hints, incomplete if isinstance(incomplete, str) else None)


def _stat_key(files: Sequence[Discovered], stats: dict[str, tuple[int, ...]]) -> str:
    """The tree's key: every file's path and stat (ctime too: an edit whose mtime was set back
    still changes it). A file changed within the results cache's racy window gets no stat in
    `stats` (its facts are never indexed), and the tree's key then changes on every run."""
    from offlint.analysis import cache

    digest = hashlib.blake2b(b"core-3", digest_size=16)
    now = time.time_ns()
    racy = int(cache.RACY_SECONDS * 1e9)
    for found in sorted(files, key=lambda f: f.display):
        try:
            info = os.stat(found.real)
        except OSError:
            digest.update(f"{found.display}\0missing\n".encode("utf-8", "surrogateescape"))
            continue
        stat = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        if now - max(info.st_mtime_ns, info.st_ctime_ns) > racy:
            stats[found.display] = stat
        else:
            digest.update(f"racy {now}".encode())
        digest.update(f"{found.display}\0{found.real}\0{stat}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()
