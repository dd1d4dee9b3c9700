"""`[tool.offlint]` configuration: discovery (the closest `.offlint.toml`, `offlint.toml` or
pyproject.toml with a `[tool.offlint]` table above each file), command-line overrides, validation
(unknown keys and bad values are errors naming the file, the line and the key, with a suggestion
for a misspelt key), and rule selection."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
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
        "respect-gitignore",
        "force-exclude",
        "capture-reachable",
        "capture-modes",
        "min-confidence",
        "probe",
        "fix",
        "docs-url",
        "fixable",
        "unfixable",
        "extend",
    }
)
# keys that once existed: a config still holding one gets an error saying what to do instead
REMOVED_KEYS = {
    "target-torch": "it was removed: no rule depends on the PyTorch version (every fact the rules "
    "rest on was measured on 2.11, and none is known to differ by version); delete the line",
}
# `[tool.offlint.fix]`: what `offlint fix` (and `check`'s fixes) read; values validated below
FIX_KEYS = frozenset({"strategy", "compile-safe"})
CONFIDENCE_LEVELS = ("high", "medium", "low")
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
    # skip what git ignores (.gitignore files, .git/info/exclude) while walking folders
    respect_gitignore: bool = True
    # `exclude` also applies to files named on the command line (off by default, as in ruff: a
    # file named on purpose is checked; the pre-commit hooks pass `--force-exclude`)
    force_exclude: bool = False
    capture_reachable: tuple[str, ...] = ()
    # how the engine may capture the forward (fixing/capture_modes.py); None: every mode
    capture_modes: tuple[str, ...] | None = None
    min_confidence: str | None = None  # "high" | "medium" | "low"
    probe: dict[str, Any] = field(default_factory=dict)
    fix: dict[str, Any] = field(default_factory=dict)
    # where rule links point (`links.py`); None: the docs installed with offlint
    docs_url: str | None = None
    # ruff's `fixable` / `unfixable`: which codes' fixes `check --fix` applies (None: all)
    fixable: tuple[str, ...] | None = None
    unfixable: tuple[str, ...] = ()
    # the table as written (command-line overrides are merged into it), and the line of each
    # selection key in `source`, for errors found only when the selection is resolved
    table: dict[str, Any] = field(default_factory=dict, compare=False)
    key_lines: dict[str, int] = field(default_factory=dict, compare=False)
    from_command_line: frozenset[str] = frozenset()  # keys `--config KEY=VALUE` & co. set

    def where(self, key: str) -> str:
        """`file:line` of `key` for an error line, `file` when its line is unknown."""
        if key in self.from_command_line:
            return "--config"
        if self.source is None:
            return "configuration"
        line = self.key_lines.get(key)
        return f"{self.source}:{line}" if line else str(self.source)

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


class KeyLines:
    """Where a key is written in a TOML file, for error lines: `path:12: ...`.

    tomllib gives no positions, so the text is scanned: table headers (`[tool.offlint.fix]`),
    dotted and plain keys under them (`fix.strategy = ...`), and, failing that, the first line
    that assigns the bare key anywhere (an inline table). A key it cannot find has no line.
    """

    _HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\[\]]+?)\s*\]\]?\s*(#.*)?$")
    _PART = r"(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)"
    _ASSIGN = re.compile(rf"^\s*(?P<key>{_PART}(?:\s*\.\s*{_PART})*)\s*=")

    def __init__(self, text: str | None, prefix: tuple[str, ...]) -> None:
        self.lines = text.splitlines() if text else []
        self.prefix = prefix  # ("tool", "offlint") in a pyproject.toml, () in an offlint.toml

    @staticmethod
    def _split(dotted: str) -> tuple[str, ...]:
        parts = re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', dotted)
        return tuple(part.strip().strip("\"'") for part in parts if part.strip())

    def line_of(self, *keys: str) -> int | None:
        wanted = self.prefix + keys
        table: tuple[str, ...] = ()
        for number, line in enumerate(self.lines, start=1):
            header = self._HEADER.match(line)
            if header is not None:
                table = self._split(header.group("name"))
                if table == wanted:
                    return number
                continue
            assign = self._ASSIGN.match(line)
            if assign is not None:
                path = table + self._split(assign.group("key"))
                if path[: len(wanted)] == wanted:
                    return number
        bare = re.compile(r"(^|[\s{,])[\"']?" + re.escape(keys[-1]) + r"[\"']?\s*=") if keys else None
        for number, line in enumerate(self.lines, start=1):
            if bare is not None and bare.search(line.split("#", 1)[0]):
                return number
        return None


class _Validator:
    """Turns a problem with one key into a ConfigError naming the file, the line and the key."""

    def __init__(self, source: Path, lines: KeyLines) -> None:
        self.source = source
        self.lines = lines

    def error(self, keys: tuple[str, ...], message: str) -> ConfigError:
        line = self.lines.line_of(*keys)
        where = f"{self.source}:{line}" if line else str(self.source)
        return ConfigError(f"{where}: {message}")

    def unknown(self, table: dict[str, Any], known: Iterable[str], keys: tuple[str, ...], name: str) -> None:
        for key in table:
            if key in known:
                continue
            if not keys and key in REMOVED_KEYS:
                raise self.error((key,), f"{name} {key}: {REMOVED_KEYS[key]}")
            close = difflib.get_close_matches(key.replace("_", "-"), sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            raise self.error((*keys, key), f"unknown key {name} {key}{hint}")

    def string_list(self, key: str, value: object, shown: str | None = None) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            found = "a string" if isinstance(value, str) else f"a {_toml_type(value)}"
            example = f' (write ["{value}"])' if isinstance(value, str) else ""
            raise self.error(
                tuple(key.split(".")) if shown is None else ("per-file-ignores",),
                f"[tool.offlint] {shown or key} must be a list of strings, not {found}{example}",
            )
        return tuple(value)

    def selectors(self, key: str, value: object, shown: str | None = None) -> tuple[str, ...]:
        items = self.string_list(key, value, shown)
        for item in items:
            if not _SELECTOR.match(item.strip().upper()):
                raise self.error(
                    (key,) if shown is None else ("per-file-ignores",),
                    f"[tool.offlint] {shown or key}: {item!r} is not a rule code or prefix",
                )
        return tuple(item.strip().upper() for item in items)

    def boolean(self, table: dict[str, Any], key: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.error((key,), f"[tool.offlint] {key} must be true or false, not a {_toml_type(value)}")
        return value


def _toml_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _probe_keys() -> frozenset[str] | None:
    """The keys `offlint probe` reads from `[tool.offlint.probe]`, or None where the probe's
    options module is absent or changed (its own reader still validates them when it runs)."""
    try:
        from offlint.probing import options
    except ImportError:  # pragma: no cover - the probe ships with every install
        return None
    converters = getattr(options, "_CONVERTERS", None)
    return frozenset(converters) if isinstance(converters, dict) else None


def parse_config(
    table: dict[str, Any], source: Path, text: str | None = None, prefix: tuple[str, ...] = ("tool", "offlint")
) -> Config:
    """Validate a `[tool.offlint]` table; `text` (the file's) lets errors name the line."""
    check = _Validator(source, KeyLines(text, prefix))
    check.unknown(table, KNOWN_KEYS, (), "[tool.offlint]")
    per_file: list[tuple[str, tuple[str, ...]]] = []
    raw_per_file = table.get("per-file-ignores", {})
    if not isinstance(raw_per_file, dict):
        raise check.error(("per-file-ignores",), "[tool.offlint] per-file-ignores must be a table of glob = [codes]")
    for pattern, codes in raw_per_file.items():
        per_file.append((pattern, check.selectors("per-file-ignores", codes, f"per-file-ignores.{pattern!r}")))
    floor = table.get("min-confidence")
    if floor is not None and floor not in CONFIDENCE_LEVELS:
        raise check.error(("min-confidence",), f"[tool.offlint] min-confidence must be one of {', '.join(CONFIDENCE_LEVELS)}")
    for key in ("probe", "fix"):
        if key in table and not isinstance(table[key], dict):
            raise check.error((key,), f"[tool.offlint] {key} must be a table")
    fix = dict(table.get("fix", {}))
    check.unknown(fix, FIX_KEYS, ("fix",), "[tool.offlint.fix]")
    if "strategy" in fix and not isinstance(fix["strategy"], str):
        raise check.error(("fix", "strategy"), "[tool.offlint.fix] strategy must be a string")
    if "compile-safe" in fix and not (isinstance(fix["compile-safe"], bool) or fix["compile-safe"] == "auto"):
        raise check.error(("fix", "compile-safe"), '[tool.offlint.fix] compile-safe must be "auto", true or false')
    capture_modes = None
    if "capture-modes" in table:
        from offlint.fixing.capture_modes import parse_modes

        try:
            capture_modes = parse_modes(table["capture-modes"])
        except ValueError as exc:
            raise check.error(("capture-modes",), f"[tool.offlint] {exc}") from None
    probe = dict(table.get("probe", {}))
    probe_keys = _probe_keys() if probe else None
    if probe_keys is not None:
        # the probe accepts snake_case spellings and `gpus` too
        spelt = {key: key.replace("_", "-") for key in probe}
        aliases = {"gpus": "gpu"}
        unknown = {key: raw for raw, key in spelt.items() if aliases.get(key, key) not in probe_keys}
        check.unknown({raw: None for raw in unknown.values()}, probe_keys, ("probe",), "[tool.offlint.probe]")
    docs_url = table.get("docs-url")
    if docs_url is not None and not (isinstance(docs_url, str) and re.match(r"^(https?|file)://\S+$", docs_url)):
        raise check.error(("docs-url",), "[tool.offlint] docs-url must be an http(s):// or file:// URL")
    lines = check.lines
    key_lines: dict[str, int] = {
        key: line
        for key in ("select", "ignore", "extend-select", "per-file-ignores")
        if key in table and (line := lines.line_of(key)) is not None
    }
    return Config(
        root=source.parent,
        source=source,
        table=table,
        key_lines=key_lines,
        select=check.selectors("select", table["select"]) if "select" in table else None,
        ignore=check.selectors("ignore", table.get("ignore", [])),
        extend_select=check.selectors("extend-select", table.get("extend-select", [])),
        per_file_ignores=tuple(per_file),
        exclude=check.string_list("exclude", table.get("exclude", []))
        + check.string_list("extend-exclude", table.get("extend-exclude", [])),
        respect_gitignore=check.boolean(table, "respect-gitignore", True),
        force_exclude=check.boolean(table, "force-exclude", False),
        capture_reachable=check.string_list("capture-reachable", table.get("capture-reachable", [])),
        capture_modes=capture_modes,
        min_confidence=floor,
        probe=probe,
        fix=fix,
        docs_url=docs_url,
        fixable=check.selectors("fixable", table["fixable"]) if "fixable" in table else None,
        unfixable=check.selectors("unfixable", table.get("unfixable", [])),
    )


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """tomllib's parse, with its failures as one ConfigError line: invalid TOML, and arrays or
    tables nested so deeply that the (recursive) parser runs out of stack."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply to read") from None
    except MemoryError:
        raise ConfigError(f"{path}: invalid TOML: too large to read") from None


def _read_config_text(path: Path) -> str:
    """A config file's text through the guarded read: a FIFO, a device or an oversized file is
    one ConfigError line, never a hang or a MemoryError."""
    from offlint.guarded_io import Refused, read_regular_text

    try:
        return read_regular_text(path)
    except Refused as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            raise ConfigError(f"{path}: config file not found") from None
        raise ConfigError(f"{path}: cannot read config: {exc}") from None


# keys whose lists an extending file adds to those of the file it extends (as ruff's `extend-*`)
_EXTENDED_LISTS = ("extend-select", "extend-exclude")
MAX_EXTEND_DEPTH = 16


def _extended_table(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """`own` over `base` (ruff's `extend`): a key of `own` replaces the base's, a table (`fix`,
    `probe`, `per-file-ignores`) is merged key by key, and the `extend-*` lists add up."""
    merged = _merge(base, own)
    for key in _EXTENDED_LISTS:
        if key in base and key in own and isinstance(base[key], list) and isinstance(own[key], list):
            merged[key] = [*base[key], *own[key]]
    merged.pop("extend", None)
    return merged


def load_config_file(path: Path, _extending: tuple[Path, ...] = ()) -> Config:
    """Read `[tool.offlint]` from a pyproject.toml (or a bare offlint.toml / .offlint.toml).

    `extend = "../pyproject.toml"` (ruff's, for monorepos) names a config file, relative to this
    one, whose settings this file's override; globs stay relative to the extending file's folder."""
    text = _read_config_text(path)
    data = parse_toml(text, path)
    tool = data.get("tool")
    prefix: tuple[str, ...] = ("tool", "offlint")
    if path.name == "pyproject.toml" or (isinstance(tool, dict) and "offlint" in tool):
        # any file holding a [tool.offlint] table is read like a pyproject.toml (--config
        # ci-pyproject.toml); otherwise the whole file is the table (offlint.toml)
        table = tool.get("offlint", {}) if isinstance(tool, dict) else {}
    else:
        table, prefix = data, ()
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.offlint] must be a table")
    if "extend" in table:
        lines = KeyLines(text, prefix)
        line = lines.line_of("extend")
        where = f"{path}:{line}" if line else str(path)
        target = table["extend"]
        if not isinstance(target, str) or not target.strip():
            raise ConfigError(f"{where}: [tool.offlint] extend must be the path of a config file")
        base_path = (path.parent / os.path.expanduser(target)).resolve()
        chain = (*_extending, path.resolve())
        if base_path in chain:
            raise ConfigError(f"{where}: [tool.offlint] extend = {target!r} makes a cycle ({' -> '.join(map(str, (*chain, base_path)))})")
        if len(chain) > MAX_EXTEND_DEPTH:
            raise ConfigError(f"{where}: [tool.offlint] extend: more than {MAX_EXTEND_DEPTH} files extend each other")
        if not base_path.is_file():
            raise ConfigError(f"{where}: [tool.offlint] extend = {target!r}: no such file ({base_path})")
        base = load_config_file(base_path, chain)
        table = _extended_table(base.table, table)
    return parse_config(table, path.resolve(), text, prefix)


@dataclass(frozen=True)
class DiscoveryOverrides:
    """What the command line says about configuration, over every config file found (as ruff's
    overrides): the discovery flags (`--no-respect-gitignore`, `--no-force-exclude`; None leaves
    each config's value), `--config KEY=VALUE` and `--exclude` / `--per-file-ignores` (`settings`,
    a `[tool.offlint]` table whose keys replace the file's), `--extend-exclude` (added to the
    file's), and `--isolated` (no config file is read at all)."""

    respect_gitignore: bool | None = None
    force_exclude: bool | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    extend_exclude: tuple[str, ...] = ()
    isolated: bool = False

    def __post_init__(self) -> None:
        if self.settings:  # wrong keys or values fail the run once, naming `--config`
            parse_config(self.settings, Path("--config"), None, ())

    def apply(self, config: Config) -> Config:
        if self.settings or self.extend_exclude:
            table = _merge(config.table, self.settings)
            if self.extend_exclude:
                table["extend-exclude"] = [*table.get("extend-exclude", []), *self.extend_exclude]
            merged = parse_config(table, config.source or Path("--config"), None)
            config = dataclasses.replace(
                merged,
                root=config.root,
                source=config.source,
                key_lines=config.key_lines,
                from_command_line=frozenset(self.settings),
            )
        return dataclasses.replace(
            config,
            respect_gitignore=config.respect_gitignore if self.respect_gitignore is None else self.respect_gitignore,
            force_exclude=config.force_exclude if self.force_exclude is None else self.force_exclude,
        )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over`'s keys replace `base`'s; a table in both (`fix`, `probe`) is merged key by key."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_override(text: str) -> dict[str, Any]:
    """`--config KEY=VALUE`: one TOML line (`select = ["OFL101"]`, `fix.strategy = "inline"`) as
    a `[tool.offlint]` table, as ruff reads its `--config` overrides."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"--config {text!r}: neither a config file nor a TOML `key = value` ({exc})"
        ) from None
    if len(table) != 1:
        raise ConfigError(f"--config {text!r}: give one `key = value` per --config")
    return table


def parse_per_file_ignores(values: Sequence[str]) -> dict[str, list[str]]:
    """`--per-file-ignores GLOB:CODE[,CODE...]` (as ruff's) as the config's table."""
    table: dict[str, list[str]] = {}
    for value in values:
        glob, sep, codes = value.rpartition(":")
        if not sep or not glob or not codes.strip():
            raise ConfigError(f"--per-file-ignores {value!r}: expected GLOB:CODE[,CODE...]")
        table.setdefault(glob, []).extend(code.strip() for code in codes.split(",") if code.strip())
    return table


# set by the command line for the length of one run: discovery is shared by `check` and `fix`,
# which build their own ConfigFinder, so the overrides reach it through the context
_DISCOVERY_OVERRIDES: ContextVar[DiscoveryOverrides | None] = ContextVar("offlint_discovery", default=None)


@contextlib.contextmanager
def discovery_overrides(overrides: DiscoveryOverrides) -> Iterator[None]:
    token = _DISCOVERY_OVERRIDES.set(overrides)
    try:
        yield
    finally:
        _DISCOVERY_OVERRIDES.reset(token)


# the files a folder's configuration may be in, first found wins (ruff's order: `.ruff.toml`,
# `ruff.toml`, `pyproject.toml`); a pyproject.toml counts only when it has a [tool.offlint] table
CONFIG_FILE_NAMES = (".offlint.toml", "offlint.toml", "pyproject.toml")


class ConfigFinder:
    """The configuration of each path: the closest folder at or above it holding one of
    `CONFIG_FILE_NAMES` (cached per folder); the files of one folder are not merged."""

    def __init__(self, explicit: Path | None = None, fallback_root: Path | None = None) -> None:
        root = (fallback_root or Path.cwd()).resolve()
        self.overrides = _DISCOVERY_OVERRIDES.get() or DiscoveryOverrides()
        if self.overrides.isolated and explicit is not None:
            raise ConfigError("--isolated and --config FILE cannot be combined (--isolated reads no config file)")
        # as ruff does: globs of a `--config FILE` are relative to the working directory
        self.explicit = (
            self.overrides.apply(dataclasses.replace(load_config_file(explicit), root=root))
            if explicit is not None
            else None
        )
        self.fallback = self.overrides.apply(Config(root=root))
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
        config: Config | None = None
        parent = os.path.dirname(folder)
        found = None if self.overrides.isolated else _config_file_in(folder)
        if found is not None:
            config = self.overrides.apply(load_config_file(found))
        elif parent != folder:
            config = self._for_dir(parent)
        else:
            config = self.fallback
        self._by_dir[folder] = config
        return config


    def project_root(self, path: Path) -> Path:
        """Where a run on `path` keeps its cache: the folder of the config file that applies to
        it, else the top of its git repository, else the working directory (`fallback_root`). The same tree checked from anywhere has the same root."""
        if self.explicit is not None and self.explicit.source is not None:
            return self.explicit.source.parent
        # os.path.realpath, unlike Path.resolve on 3.10/3.11, never raises on a symlink loop
        real = os.path.realpath(path)
        folder = Path(real if os.path.isdir(real) else os.path.dirname(real))
        config = self.for_real_folder(str(folder))
        if config.source is not None:
            return config.root
        for candidate in (folder, *folder.parents):
            if os.path.lexists(candidate / ".git"):
                return candidate
        return self.fallback.root


def _config_file_in(folder: str) -> Path | None:
    for name in CONFIG_FILE_NAMES:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and (name != "pyproject.toml" or _has_offlint_table(Path(candidate))):
            return Path(candidate)
    return None


def _has_offlint_table(path: Path) -> bool:
    text = _read_config_text(path)
    if "offlint" not in text:
        return False
    data = parse_toml(text, path)
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


def unfixable_codes(config: Config, all_codes: Sequence[str]) -> frozenset[str]:
    """The codes whose fixes `check --fix` must not apply (nor mark `[*]`): those outside
    `fixable` (when set) and those in `unfixable`, as ruff's settings say."""
    fixable = set(all_codes) if config.fixable is None else expand_selectors(config.fixable, all_codes, config.where("fixable"))
    return frozenset((set(all_codes) - fixable) | expand_selectors(config.unfixable, all_codes, config.where("unfixable")))


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
    config_select = (
        expand_selectors(config.select, all_codes, config.where("select"))
        if config.select is not None
        else set(default_codes)
    )
    config_select |= expand_selectors(config.extend_select, all_codes, config.where("extend-select"))
    if overrides.select is not None:
        chosen = expand_selectors(overrides.select, all_codes, "--select")
    else:
        chosen = config_select
    chosen -= expand_selectors(config.ignore, all_codes, config.where("ignore"))
    chosen |= expand_selectors(overrides.extend_select, all_codes, "--extend-select")
    chosen -= expand_selectors(overrides.ignore, all_codes, "--ignore")
    if path is not None:
        chosen -= expand_selectors(config.ignores_for(path), all_codes, config.where("per-file-ignores"))
    return frozenset(chosen)
