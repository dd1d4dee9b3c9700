"""Real large source trees, obtained the way a user's CI has them: released sources from the
package registry (`pip download --no-deps`), unpacked once into a cache folder.

    from benchmarks.trees import get_tree, TreeUnavailable
    path = get_tree("deepspeed")          # Path to the unpacked tree

Cache: `$OFFLINT_CACHE_DIR`, default `~/.cache/offlint-trees`. Offline (or when pip cannot get
the release) `TreeUnavailable` is raised with the reason, so tests can skip.

`$OFFLINT_TREES_SEED` (optional, for local speed only): a folder holding unpacked trees or
release archives (`<name>/` or `*.whl`/`*.tar.gz`) that is copied from instead of downloading.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class TreeUnavailable(RuntimeError):
    """The tree could not be obtained (offline, package missing, archive broken)."""


@dataclass(frozen=True)
class TreeSpec:
    name: str
    requirement: str  # what pip downloads
    sdist: bool  # --no-binary :all: (the source release) instead of the wheel
    package_dirs: tuple[str, ...] = ()  # folders of the unpacked release to check ("" = all)


TREES: dict[str, TreeSpec] = {
    "accelerate": TreeSpec("accelerate", "accelerate==1.15.0", sdist=True),
    "deepspeed": TreeSpec("deepspeed", "deepspeed==0.19.8", sdist=True),
    "sglang": TreeSpec("sglang", "sglang==0.5.23", sdist=False),
    "diffusers": TreeSpec("diffusers", "diffusers==0.36.0", sdist=False),
    "vllm": TreeSpec("vllm", "vllm==0.34.0", sdist=False),
}
DEFAULT_TREES = ("accelerate", "deepspeed", "sglang")


def cache_dir() -> Path:
    return Path(os.environ.get("OFFLINT_CACHE_DIR") or Path.home() / ".cache" / "offlint-trees")


def get_tree(name: str, *, quiet: bool = True) -> Path:
    """The unpacked release of `name` (a key of TREES), downloading it on first use."""
    spec = TREES.get(name)
    if spec is None:
        raise KeyError(f"unknown tree {name!r}; known: {', '.join(TREES)}")
    root = cache_dir() / spec.requirement.replace("==", "-")
    done = root / ".complete"
    if done.is_file():
        return root / "src"
    archive = _seeded_archive(spec) or _download(spec, quiet=quiet)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=_ensure(cache_dir())))
    try:
        if archive.is_dir():
            shutil.copytree(archive, staging / "src", symlinks=True)
        else:
            _unpack(archive, staging / "src")
        (staging / ".complete").write_text(spec.requirement + "\n", encoding="utf-8")
        if root.exists():
            shutil.rmtree(root)
        os.replace(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root / "src"


def get_trees(names: tuple[str, ...] = DEFAULT_TREES) -> dict[str, Path]:
    return {name: get_tree(name) for name in names}


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _seeded_archive(spec: TreeSpec) -> Path | None:
    seed = os.environ.get("OFFLINT_TREES_SEED")
    if not seed:
        return None
    folder = Path(seed)
    unpacked = folder / spec.name
    if unpacked.is_dir():
        return unpacked
    version = spec.requirement.split("==")[1]
    for pattern in (f"{spec.name}-{version}*.whl", f"{spec.name}-{version}*.tar.gz", f"{spec.name}_whl/*.whl"):
        for found in sorted(folder.glob(pattern)):
            if version in found.name:
                return found
    return None


def _download(spec: TreeSpec, *, quiet: bool) -> Path:
    downloads = _ensure(cache_dir() / "downloads")
    version = spec.requirement.split("==")[1]
    for found in sorted(downloads.glob(f"{spec.name}-{version}*")):
        if found.suffix in (".whl", ".gz", ".zip"):
            return found
    pip_download(spec.requirement, downloads, sdist=spec.sdist, quiet=quiet)
    for found in sorted(downloads.glob(f"{spec.name}-{version}*")):
        if found.suffix in (".whl", ".gz", ".zip"):
            return found
    raise TreeUnavailable(f"{spec.requirement}: pip reported success but left no archive")


def pip_download(
    requirement: str, into: Path, *, sdist: bool, extra: Sequence[str] = (), quiet: bool = True
) -> None:
    """`pip download --no-deps` of one release into `into`: the sdist (`--no-binary :all:`) or a
    wheel (`--only-binary :all:`, `extra` options such as `--platform` choosing which).
    TreeUnavailable with pip's last line when it fails (offline, no such release)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    command += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    command += [*extra, "-d", str(_ensure(into)), requirement]
    if not quiet:
        print("+", " ".join(command), file=sys.stderr)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TreeUnavailable(f"{requirement}: pip download failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TreeUnavailable(f"{requirement}: pip download failed (offline?): {tail[0]}")


def _unpack(archive: Path, into: Path) -> None:
    into.mkdir(parents=True)
    try:
        if archive.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(into)
        else:
            with tarfile.open(archive) as tarred:
                if sys.version_info >= (3, 12):
                    tarred.extractall(into, filter="data")
                else:  # pragma: no cover - older pythons have no filter
                    tarred.extractall(into)
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise TreeUnavailable(f"{archive.name}: cannot unpack: {exc}") from exc


def tree_stats(path: Path) -> tuple[int, int]:
    """(number of .py files, their total bytes) as offlint's discovery would see them,
    roughly: build/VCS folders are skipped."""
    skipped = {".git", "build", "dist", "__pycache__", ".venv", "venv", "node_modules", "site-packages"}
    files = size = 0
    for folder, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d not in skipped and not d.endswith(".egg-info")]
        for name in filenames:
            if name.endswith(".py"):
                files += 1
                size += os.path.getsize(os.path.join(folder, name))
    return files, size


if __name__ == "__main__":
    for tree_name in sys.argv[1:] or DEFAULT_TREES:
        try:
            print(tree_name, get_tree(tree_name, quiet=False))
        except TreeUnavailable as error:
            print(tree_name, "unavailable:", error)
