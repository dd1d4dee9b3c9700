"""`[tool.offlint]` configuration: discovery (nearest pyproject.toml above each file), validation
(unknown keys and bad values are errors naming the key), and rule selection."""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(Exception):
    """A configuration or selection problem: reported as one line, exit code 2."""


KNOWN_KEYS = frozenset(
    {
        "select",
        "ignore",
        "extend-select",
        "per-file-ignores",
        "exclude",
        "extend-exclude",
        "target-torch",
        "capture-reachable",
        "min-confidence",
        "probe",
        "fix",
    }
)
CONFIDENCE_LEVELS = ("high", "medium", "low")
_TORCH_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_SELECTOR = re.compile(r"^(ALL|OFL\d{0,3})$")


@dataclass(frozen=True)
class Config:
    root: Path  # the folder globs are relative to
    source: Path | None = None  # the pyproject.toml it came from, None for defaults
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    target_torch: str | None = None
    capture_reachable: tuple[str, ...] = ()
    min_confidence: str | None = None  # "high" | "medium" | "low"
    probe: dict[str, Any] = field(default_factory=dict)
    fix: dict[str, Any] = field(default_factory=dict)

    def is_excluded(self, path: Path) -> bool:
        return _matches_any(path, self.root, self.exclude)

    def ignores_for(self, path: Path) -> tuple[str, ...]:
        found: list[str] = []
        for pattern, codes in self.per_file_ignores:
            if _matches_any(path, self.root, (pattern,)):
                found.extend(codes)
        return tuple(found)


def _matches_any(path: Path, root: Path, patterns: Sequence[str]) -> bool:
    if not patterns:
        return False
    try:
        rel = PurePosixPath(path.resolve().relative_to(root.resolve()).as_posix())
    except ValueError:
        rel = PurePosixPath(path.as_posix())
    text = str(rel)
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatchcase(text, pattern) or fnmatch.fnmatchcase(path.name, pattern):
            return True
        # `dir`, `dir/*` and `dir/**` all exclude dir and everything below it (fnmatch's `*`
        # matches `/` too)
        base = pattern.rstrip("*").rstrip("/") if pattern.endswith(("/*", "/**")) else pattern
        if base != pattern and fnmatch.fnmatchcase(text, base):
            return True
        if any(fnmatch.fnmatchcase(str(parent), base) for parent in rel.parents if str(parent) != "."):
            return True
    return False


def _string_list(key: str, value: object, source: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: [tool.offlint] {key} must be a list of strings")
    return tuple(value)


def _selectors(key: str, value: object, source: Path) -> tuple[str, ...]:
    items = _string_list(key, value, source)
    for item in items:
        if not _SELECTOR.match(item.strip().upper()):
            raise ConfigError(f"{source}: [tool.offlint] {key}: {item!r} is not a rule code or prefix")
    return tuple(item.strip().upper() for item in items)


def parse_config(table: dict[str, Any], source: Path) -> Config:
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key [tool.offlint] {unknown[0]}")
    per_file: list[tuple[str, tuple[str, ...]]] = []
    raw_per_file = table.get("per-file-ignores", {})
    if not isinstance(raw_per_file, dict):
        raise ConfigError(f"{source}: [tool.offlint] per-file-ignores must be a table of glob = [codes]")
    for pattern, codes in raw_per_file.items():
        per_file.append((pattern, _selectors(f"per-file-ignores.{pattern!r}", codes, source)))
    target = table.get("target-torch")
    if target is not None and (not isinstance(target, str) or not _TORCH_VERSION.match(target)):
        raise ConfigError(f"{source}: [tool.offlint] target-torch must be a version like \"2.11\"")
    floor = table.get("min-confidence")
    if floor is not None and floor not in CONFIDENCE_LEVELS:
        raise ConfigError(f"{source}: [tool.offlint] min-confidence must be one of {', '.join(CONFIDENCE_LEVELS)}")
    for key in ("probe", "fix"):
        if key in table and not isinstance(table[key], dict):
            raise ConfigError(f"{source}: [tool.offlint] {key} must be a table")
    return Config(
        root=source.parent,
        source=source,
        select=_selectors("select", table["select"], source) if "select" in table else None,
        ignore=_selectors("ignore", table.get("ignore", []), source),
        extend_select=_selectors("extend-select", table.get("extend-select", []), source),
        per_file_ignores=tuple(per_file),
        exclude=_string_list("exclude", table.get("exclude", []), source)
        + _string_list("extend-exclude", table.get("extend-exclude", []), source),
        target_torch=target,
        capture_reachable=_string_list("capture-reachable", table.get("capture-reachable", []), source),
        min_confidence=floor,
        probe=dict(table.get("probe", {})),
        fix=dict(table.get("fix", {})),
    )


def load_config_file(path: Path) -> Config:
    """Read `[tool.offlint]` from a pyproject.toml (or a bare offlint.toml / .offlint.toml)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    tool = data.get("tool")
    if path.name == "pyproject.toml" or (isinstance(tool, dict) and "offlint" in tool):
        # any file holding a [tool.offlint] table is read like a pyproject.toml (--config
        # ci-pyproject.toml); otherwise the whole file is the table (offlint.toml)
        table = tool.get("offlint", {}) if isinstance(tool, dict) else {}
    else:
        table = data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.offlint] must be a table")
    return parse_config(table, path.resolve())


class ConfigFinder:
    """Nearest `pyproject.toml` with a `[tool.offlint]` table above a path (cached per folder)."""

    def __init__(self, explicit: Path | None = None, fallback_root: Path | None = None) -> None:
        root = (fallback_root or Path.cwd()).resolve()
        # as ruff does: globs of a `--config FILE` are relative to the working directory
        self.explicit = (
            dataclasses.replace(load_config_file(explicit), root=root) if explicit is not None else None
        )
        self.fallback = Config(root=root)
        self._by_dir: dict[str, Config] = {}

    def for_path(self, path: Path) -> Config:
        if self.explicit is not None:
            return self.explicit
        folder = path.resolve()
        if not folder.is_dir():
            folder = folder.parent
        return self._for_dir(str(folder))

    def for_real_folder(self, folder: str) -> Config:
        """`for_path` of a folder whose path is already resolved (no `resolve` again)."""
        if self.explicit is not None:
            return self.explicit
        return self._for_dir(folder)

    def for_real_file(self, real: str) -> Config:
        """The config of a file by its resolved path (a linked file's is where it points)."""
        return self.for_real_folder(os.path.dirname(real))

    def _for_dir(self, folder: str) -> Config:
        # plain strings, not Paths: a big tree asks this for every folder it holds
        cached = self._by_dir.get(folder)
        if cached is not None:
            return cached
        candidate = os.path.join(folder, "pyproject.toml")
        config: Config | None = None
        parent = os.path.dirname(folder)
        if os.path.isfile(candidate) and _has_offlint_table(Path(candidate)):
            config = load_config_file(Path(candidate))
        elif parent != folder:
            config = self._for_dir(parent)
        else:
            config = self.fallback
        self._by_dir[folder] = config
        return config


def _has_offlint_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if "offlint" not in text:
        return False
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    return isinstance(data.get("tool"), dict) and "offlint" in data["tool"]


@dataclass(frozen=True)
class SelectionOverrides:
    """What the command line says about selection; it wins over the config file."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    min_confidence: str | None = None  # --min-confidence, over the config's min-confidence


def expand_selectors(selectors: Iterable[str], codes: Sequence[str], where: str) -> set[str]:
    chosen: set[str] = set()
    for raw in selectors:
        selector = raw.strip().upper()
        if not selector:
            continue
        if selector == "ALL":
            chosen.update(codes)
            continue
        matched = {c for c in codes if c.startswith(selector)}
        if not matched:
            raise ConfigError(f"{where}: {raw!r} matches no rule (see `offlint rules`)")
        chosen.update(matched)
    return chosen


def resolve_selection(
    config: Config,
    overrides: SelectionOverrides,
    all_codes: Sequence[str],
    default_codes: Sequence[str],
    path: Path | None = None,
) -> frozenset[str]:
    """The codes to run on `path`, as layers: the config file's, then the command line's.

    Config: `select` (or the defaults) + `extend-select` - `ignore`. Command line: `--select`
    replaces the config's select and extend-select (its ignore still applies), `--extend-select`
    adds even what the config ignores, `--ignore` removes. `per-file-ignores` always win.
    """
    where = str(config.source) if config.source else "configuration"
    config_select = (
        expand_selectors(config.select, all_codes, where) if config.select is not None else set(default_codes)
    )
    config_select |= expand_selectors(config.extend_select, all_codes, where)
    if overrides.select is not None:
        chosen = expand_selectors(overrides.select, all_codes, "--select")
    else:
        chosen = config_select
    chosen -= expand_selectors(config.ignore, all_codes, where)
    chosen |= expand_selectors(overrides.extend_select, all_codes, "--extend-select")
    chosen -= expand_selectors(overrides.ignore, all_codes, "--ignore")
    if path is not None:
        chosen -= expand_selectors(config.ignores_for(path), all_codes, where)
    return frozenset(chosen)
