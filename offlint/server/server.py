"""`offlint server`: the findings of `offlint check` in the editor, over the Language Server
Protocol (stdio), built on pygls.

Two passes, both through `offlint/pipeline/` (`pipeline/editor.py`), none of its own:

- on every edit (after `debounceMs`, default 10), the edited buffer alone, on a thread of this
  process, with the settings the last project run analysed its file with (the seeds other
  modules give it included): `check`'s diagnostics for that text, their fixes not yet confirmed;
- when a buffer is opened or saved, when the configuration changes and when typing pauses
  (`idleMs`, default 1000), the project run: `offlint check FOLDER` over the workspace folder,
  the open buffers in place of their files (cache, cross-module rounds, fix confirmation), in a
  worker process. Its reports replace the fast ones where the buffer has not changed since, and
  its fixes are the quick fixes.

A result for a text the buffer no longer holds is never published.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from offlint import __version__
from offlint.config import ConfigError
from offlint.diagnostics import Diagnostic, FileError, FileReport, FixSafety
from offlint.pipeline import editor
from offlint.server import convert
from offlint.server.protocol import OfflintProtocol

logger = logging.getLogger(__name__)
T = TypeVar("T")

CONFIG_FILE_NAMES = frozenset({".offlint.toml", "offlint.toml", "pyproject.toml"})
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.offlint"
DEFAULT_DEBOUNCE_MS = 10
DEFAULT_IDLE_MS = 1000
# how long a code action waits for the project run that confirms the buffer's fixes
FIX_WAIT_S = 60.0


@dataclass
class Buffer:
    """An open document: a text file, or a notebook (its cells, in order)."""

    uri: str
    path: Path | None  # None: not a file (an untitled buffer)
    display: str
    project: str | None  # the key of its Project; None for an untitled buffer
    revision: int = 0  # bumped on every change: results for an older text are dropped
    cells: list[tuple[str, bool]] | None = None  # a notebook's (cell uri, is code)
    quick: tuple[int, FileReport] | None = None
    full: tuple[int, FileReport] | None = None
    settings: Any = None  # FileSettings the last project run analysed its file with
    excluded: bool = False
    published: dict[str, list[Diagnostic]] = field(default_factory=dict)  # uri -> shown findings
    debounce: asyncio.Task[None] | None = None
    idle: asyncio.Handle | None = None


@dataclass
class Project:
    """A workspace folder (or a file outside every folder): one `check` run covers it."""

    root: Path
    settings: editor.BufferSettings
    running: asyncio.Task[None] | None = None
    again: bool = False
    started: int = 0  # runs begun (numbered from 1)
    finished: int = 0  # the number of the last run over, for those waiting on one
    generation: int = 0  # bumped when the configuration is read anew: older runs' results are void


class OfflintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "offlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
            protocol_cls=OfflintProtocol,
        )
        self.buffers: dict[str, Buffer] = {}
        self.cell_owner: dict[str, str] = {}  # cell uri -> notebook uri
        self.projects: dict[str, Project] = {}
        self.debounce_s = DEFAULT_DEBOUNCE_MS / 1000
        self.idle_s = DEFAULT_IDLE_MS / 1000
        self.project_runs = True
        # the fast pass: one thread, one buffer at a time (the newest text wins)
        self.fast = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="offlint-fast")
        self._worker: concurrent.futures.ProcessPoolExecutor | None = None
        self.changed: asyncio.Condition | None = None  # made on the loop, in `initialized`
        self.related_supported = True
        self.stopping = False
        self.problems_shown: set[str] = set()
        self.resolve_edits = False

    # ------------------------------------------------------------------ the worker process

    @property
    def worker(self) -> concurrent.futures.ProcessPoolExecutor:
        """The process that runs project runs and "fix all": spawned, not forked (this process
        holds threads), and ended with this one (`watch_parent`)."""
        if self.stopping:
            raise RuntimeError("the server is shutting down")
        if self._worker is None:
            from offlint.pipeline.processes import watch_parent

            self._worker = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=watch_parent
            )
        return self._worker

    async def in_worker(self, function: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.worker, function, *args)
        except concurrent.futures.process.BrokenProcessPool:
            self._worker = None  # the next call starts a new one
            raise

    def stop_worker(self) -> None:
        """End the worker now: a project run in progress is of no use to a server that stops,
        and the interpreter's exit would otherwise wait for it."""
        self.stopping = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        processes = list(getattr(worker, "_processes", {}).values())
        worker.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()

    def shutdown(self) -> None:
        """The connection ended (after `exit`, or the client went away): workers first."""
        self.stop_worker()
        self.fast.shutdown(wait=False, cancel_futures=True)
        super().shutdown()

    # ------------------------------------------------------------------ buffers and projects

    def project_for(self, path: Path | None) -> str | None:
        """The workspace folder holding `path` (the deepest), else the file itself."""
        if path is None:
            return None
        real = Path(os.path.realpath(path))
        best: Path | None = None
        for folder in self.workspace.folders.values():
            root_path = to_fs_path(folder.uri)
            if root_path is None:
                continue
            root = Path(os.path.realpath(root_path))
            if (real == root or root in real.parents) and (best is None or len(root.parts) > len(best.parts)):
                best = root
        if best is None and self.workspace.root_path:
            root = Path(os.path.realpath(self.workspace.root_path))
            if root in real.parents:
                best = root
        key = str(best if best is not None else real)
        if key not in self.projects:
            base = best if best is not None else real.parent
            self.projects[key] = Project(root=Path(key), settings=editor.BufferSettings(base))
        return key

    def open_buffer(self, uri: str, cells: list[tuple[str, bool]] | None = None) -> Buffer:
        path_text = to_fs_path(uri) if uri.startswith("file:") else None
        path = Path(path_text) if path_text else None
        project = self.project_for(path)
        if path is not None and project is not None:
            base = self.projects[project].root
            base = base if base.is_dir() else base.parent
            try:
                display = os.path.relpath(os.path.realpath(path), base)
            except ValueError:
                display = str(path)
        else:
            display = "untitled.ipynb" if cells is not None else "untitled.py"
        buffer = Buffer(uri=uri, path=path, display=display, project=project, cells=cells)
        self.buffers[uri] = buffer
        return buffer

    def text_of(self, buffer: Buffer) -> str:
        """What `check` reads: the text, or for a notebook the `.ipynb` built from its cells."""
        if buffer.cells is None:
            return self.workspace.get_text_document(buffer.uri).source
        cells = [(code, self.workspace.get_text_document(uri).source) for uri, code in buffer.cells]
        return editor.notebook_bytes(cells).decode("utf-8")

    @staticmethod
    def in_project_runs(buffer: Buffer) -> bool:
        """A project run discovers files on disk: a buffer not saved yet is checked alone."""
        return buffer.project is not None and buffer.path is not None and buffer.path.is_file()

    def buffer_of(self, uri: str) -> Buffer | None:
        return self.buffers.get(self.cell_owner.get(uri, uri))

    # ------------------------------------------------------------------ scheduling

    def edited(self, buffer: Buffer, *, now: bool) -> None:
        """The buffer's text changed (or was opened): a fast pass after the debounce (at once
        with `now`), and a project run once typing pauses."""
        buffer.revision += 1
        if buffer.debounce is not None:
            buffer.debounce.cancel()
        buffer.debounce = asyncio.ensure_future(self.fast_pass(buffer, 0 if now else self.debounce_s))
        if buffer.idle is not None:
            buffer.idle.cancel()
        if buffer.project is not None and self.project_runs:
            loop = asyncio.get_running_loop()
            delay = 0 if now else self.idle_s
            buffer.idle = loop.call_later(delay, self.request_project_run, buffer.project)

    async def fast_pass(self, buffer: Buffer, delay: float) -> None:
        try:
            await self._fast_pass(buffer, delay)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here costs this buffer's diagnostics, never the server
            logger.exception("checking %s failed", buffer.uri)

    async def _fast_pass(self, buffer: Buffer, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        revision = buffer.revision
        text = self.text_of(buffer)
        try:
            settings = buffer.settings
            if settings is None:
                if buffer.path is not None and buffer.project is not None:
                    project = self.projects[buffer.project]
                    if project.settings.excluded(buffer.path):
                        buffer.excluded = True
                        self.publish(buffer)
                        return
                    settings = project.settings.settings(buffer.path)
                else:
                    settings = editor.BufferSettings(Path.cwd()).settings(Path.cwd() / buffer.display)
        except ConfigError as exc:
            self.config_problem(str(exc))
            return
        loop = asyncio.get_running_loop()

        def run() -> FileReport | None:
            if buffer.revision != revision:
                return None  # a newer text is on its way: analysing this one is wasted
            return editor.check_buffer(text, buffer.display, settings)

        report = await loop.run_in_executor(self.fast, run)
        if report is None or buffer.revision != revision or self.buffers.get(buffer.uri) is not buffer:
            return
        buffer.quick = (revision, report)
        self.publish(buffer)
        if not self.in_project_runs(buffer):
            # no project run reads a buffer that is no file on disk: its fixes are confirmed here
            with contextlib.suppress(Exception):
                confirmed = await self.in_worker(confirmed_buffer, text, buffer.display, settings)
                if buffer.revision == revision:
                    buffer.full = (revision, confirmed)
                    self.publish(buffer)
            await self.notify_changed()

    def request_project_run(self, key: str) -> None:
        project = self.projects.get(key)
        if project is None:
            return
        if project.running is not None and not project.running.done():
            project.again = True
            return
        project.running = asyncio.ensure_future(self.project_run(project))

    async def project_run(self, project: Project) -> None:
        key = str(project.root)
        while True:
            project.again = False
            project.started += 1
            number = project.started
            generation = project.generation
            members = [b for b in self.buffers.values() if b.project == key and self.in_project_runs(b)]
            snapshot = {b.uri: b.revision for b in members}
            overlays: dict[str, bytes] = {}
            for b in members:
                assert b.path is not None
                overlays[os.path.realpath(b.path)] = self.text_of(b).encode("utf-8")
            if self.stopping:
                return
            try:
                result = await self.in_worker(editor.check_project, key, overlays)
            except ConfigError as exc:
                self.config_problem(str(exc))
                result = None
            except Exception as exc:  # the worker died, or a bug: said once, the server goes on
                if self.stopping:
                    return
                logger.exception("project run failed")
                self.show(types.MessageType.Error, f"offlint: checking {key} failed: {exc}")
                result = None
            if result is not None and generation == project.generation:
                for b in members:
                    if self.buffers.get(b.uri) is not b:
                        continue
                    assert b.path is not None
                    real = os.path.realpath(b.path)
                    report = result.reports.get(real)
                    b.settings = result.settings.get(real, b.settings)
                    b.excluded = report is None
                    if report is not None and b.revision == snapshot[b.uri]:
                        b.full = (b.revision, report)
                    self.publish(b)
            project.finished = number
            await self.notify_changed()
            if not project.again:
                return

    async def notify_changed(self) -> None:
        if self.changed is None:
            return
        async with self.changed:
            self.changed.notify_all()

    async def confirmed_report(self, buffer: Buffer) -> FileReport | None:
        """The buffer's report with its fixes confirmed (waiting for the project run that does
        it, starting one if none is due); None when it is not analysed (excluded)."""
        if buffer.full is not None and buffer.full[0] == buffer.revision:
            return buffer.full[1]
        project = self.projects.get(buffer.project) if buffer.project is not None else None
        # the run that reads this text: the next to begin (a run under way read an older one)
        wanted = project.started + 1 if project is not None else 0
        if project is not None and self.in_project_runs(buffer):
            if buffer.idle is not None:
                buffer.idle.cancel()
            self.request_project_run(str(project.root))
        revision = buffer.revision
        assert self.changed is not None

        def ready() -> bool:
            if buffer.revision != revision or buffer.excluded:
                return True
            if buffer.full is not None and buffer.full[0] == revision:
                return True
            # the run that read this text is over, without a report for it (a configuration error)
            return project is not None and project.finished >= wanted

        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(ready), FIX_WAIT_S)
            except asyncio.TimeoutError:
                return None
        if buffer.full is not None and buffer.full[0] == buffer.revision:
            return buffer.full[1]
        return None

    # ------------------------------------------------------------------ publishing

    def current(self, buffer: Buffer) -> tuple[FileReport, bool] | None:
        """The newest report for the buffer's text: the project run's (fixes confirmed) or the
        fast pass's."""
        if buffer.full is not None and buffer.full[0] == buffer.revision:
            return buffer.full[1], True
        if buffer.quick is not None and buffer.quick[0] == buffer.revision:
            return buffer.quick[1], False
        return None

    def publish(self, buffer: Buffer) -> None:
        if buffer.excluded:
            shown: tuple[list[Diagnostic], list[FileError], bool] = ([], [], True)
        else:
            found = self.current(buffer)
            if found is None:
                return
            report, fix_known = found
            shown = (report.diagnostics, report.errors, fix_known)
        diagnostics, errors, fix_known = shown
        targets = [uri for uri, _ in buffer.cells] if buffer.cells is not None else [buffer.uri]
        by_uri: dict[str, list[Diagnostic]] = {uri: [] for uri in targets}
        errors_by_uri: dict[str, list[FileError]] = {uri: [] for uri in targets}
        for d in diagnostics:
            uri = self.cell_uri(buffer, d.cell)
            if uri is not None:
                by_uri[uri].append(d)
        for e in errors:
            uri = self.cell_uri(buffer, e.cell)
            if uri is not None:
                errors_by_uri[uri].append(e)
        for uri in targets:
            document = self.workspace.get_text_document(uri)
            lines = document.lines
            codec = self.workspace.position_codec
            root = self.projects[buffer.project].root if buffer.project else None
            root = root if root is None or root.is_dir() else (root.parent if root else None)
            items = []
            for d in by_uri[uri]:
                related = (
                    convert.related_information(codec, lines, document.source, uri, d, root, from_fs_path)
                    if self.related_supported
                    else None
                )
                items.append(
                    convert.to_lsp_diagnostic(
                        codec, lines, d, uri, fix_known=fix_known, related=related, related_supported=self.related_supported
                    )
                )
            items.extend(self.error_diagnostic(codec, lines, e) for e in errors_by_uri[uri])
            buffer.published[uri] = by_uri[uri]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=document.version)
            )

    def cell_uri(self, buffer: Buffer, cell: int | None) -> str | None:
        if buffer.cells is None:
            return buffer.uri
        if cell is None or not 0 < cell <= len(buffer.cells):
            return buffer.cells[0][0] if buffer.cells else None
        return buffer.cells[cell - 1][0]

    @staticmethod
    def error_diagnostic(codec: Any, lines: Any, error: FileError) -> types.Diagnostic:
        """A file `check` could not analyse (a syntax error while typing): a hint, not a finding."""
        line = error.line or 1
        return types.Diagnostic(
            range=convert.to_range(codec, lines, line, 1, line + 1, 1),
            message=f"offlint could not analyse this file: {error.message}",
            severity=types.DiagnosticSeverity.Hint,
            code=error.kind.value,
            source=convert.SOURCE,
        )

    def clear(self, buffer: Buffer) -> None:
        targets = [uri for uri, _ in buffer.cells] if buffer.cells is not None else [buffer.uri]
        for uri in targets:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # ------------------------------------------------------------------ configuration

    def reload_configuration(self) -> None:
        """A configuration file changed: settings found anew, every buffer checked again."""
        self.problems_shown.clear()
        for project in self.projects.values():
            base = project.root if project.root.is_dir() else project.root.parent
            project.settings = editor.BufferSettings(base)
            project.generation += 1
        for buffer in self.buffers.values():
            buffer.settings = None
            buffer.excluded = False
            buffer.full = None
            self.edited(buffer, now=True)
        self.log(types.MessageType.Info, "offlint: configuration reloaded")

    def config_problem(self, message: str) -> None:
        """Said once (the fast pass and the project run both meet it), again after a reload."""
        if message in self.problems_shown:
            return
        self.problems_shown.add(message)
        self.show(types.MessageType.Error, f"offlint: {message}")

    def show(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def log(self, kind: types.MessageType, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        import json

        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)):
            assert isinstance(self.protocol, OfflintProtocol)
            self.protocol.answer_parse_error(error)
            return
        logger.error("%s", error)


def confirmed_buffer(text: str, display: str, settings: Any) -> FileReport:
    """In the worker: one buffer's report with its fixes confirmed (an untitled buffer)."""
    return editor.check_buffer(text, display, settings, confirm_fixes=True)


def fix_all(text: str, display: str, path: str | None, root: str, settings: Any) -> str | None:
    """In the worker: the buffer after its safe fixes (`check --fix -`)."""
    where = Path(path) if path else Path(root) / display
    return editor.fixed_text(text, display, where, Path(root), settings)


# ---------------------------------------------------------------------- features

server = OfflintServer()


def _option(options: Any, name: str, default: float) -> float:
    if isinstance(options, dict):
        value = options.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return default


@server.feature(types.INITIALIZE)
def initialize(ls: OfflintServer, params: types.InitializeParams) -> None:
    options = params.initialization_options
    ls.debounce_s = _option(options, "debounceMs", DEFAULT_DEBOUNCE_MS) / 1000
    ls.idle_s = _option(options, "idleMs", DEFAULT_IDLE_MS) / 1000
    if isinstance(options, dict) and options.get("projectRuns") is False:
        ls.project_runs = False
    text = params.capabilities.text_document
    diagnostics = text.publish_diagnostics if text else None
    ls.related_supported = bool(diagnostics and diagnostics.related_information) if diagnostics else False
    code_action = text.code_action if text else None
    resolve = code_action.resolve_support if code_action else None
    ls.resolve_edits = bool(resolve and "edit" in resolve.properties)


@server.feature(types.INITIALIZED)
async def initialized(ls: OfflintServer, params: types.InitializedParams) -> None:
    ls.changed = asyncio.Condition()
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace else None
    if watched and watched.dynamic_registration:
        watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in sorted(CONFIG_FILE_NAMES)]
        with contextlib.suppress(Exception):
            await ls.client_register_capability_async(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="offlint-config",
                            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
                        )
                    ]
                )
            )
    # pay for the imports now, not on the first keystroke
    loop = asyncio.get_running_loop()
    loop.run_in_executor(ls.fast, _warm_up)


def _warm_up() -> None:
    from offlint.pipeline.check import settings_for

    with contextlib.suppress(Exception):
        from offlint.config import Config, SelectionOverrides

        settings = settings_for(Config(root=Path.cwd()), SelectionOverrides(), None)
        editor.check_buffer("import torch\ns = torch.cuda.Stream()\n", "warm_up.py", settings)


@server.feature(types.SHUTDOWN)
def shutdown(ls: OfflintServer, params: None) -> None:
    ls.stop_worker()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: OfflintServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri in ls.cell_owner:
        return  # a notebook's cell: its notebook is the buffer
    if params.text_document.language_id != "python" and not uri.endswith((".py", ".pyi")):
        return  # a configuration file, a README: not what `check` reads
    buffer = ls.open_buffer(uri)
    ls.edited(buffer, now=True)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: OfflintServer, params: types.DidChangeTextDocumentParams) -> None:
    buffer = ls.buffer_of(params.text_document.uri)
    if buffer is not None:
        ls.edited(buffer, now=False)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: OfflintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is not None and os.path.basename(path) in CONFIG_FILE_NAMES:
        ls.reload_configuration()
        return
    buffer = ls.buffer_of(uri)
    if buffer is not None and buffer.project is not None:
        if buffer.idle is not None:
            buffer.idle.cancel()
        ls.request_project_run(buffer.project)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: OfflintServer, params: types.DidCloseTextDocumentParams) -> None:
    buffer = ls.buffers.pop(params.text_document.uri, None)
    if buffer is not None:
        for task in (buffer.debounce, buffer.idle):
            if task is not None:
                task.cancel()
        ls.clear(buffer)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_open(ls: OfflintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    notebook = params.notebook_document
    cells = [(cell.document, cell.kind == types.NotebookCellKind.Code) for cell in notebook.cells]
    buffer = ls.open_buffer(notebook.uri, cells)
    for uri, _ in cells:
        ls.cell_owner[uri] = notebook.uri
    ls.edited(buffer, now=True)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_change(ls: OfflintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    buffer = ls.buffers.get(params.notebook_document.uri)
    notebook = ls.workspace.get_notebook_document(notebook_uri=params.notebook_document.uri)
    if buffer is None or notebook is None:
        return
    old = {uri for uri, _ in buffer.cells or []}
    buffer.cells = [(cell.document, cell.kind == types.NotebookCellKind.Code) for cell in notebook.cells]
    for uri in old - {uri for uri, _ in buffer.cells}:
        ls.cell_owner.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
    for uri, _ in buffer.cells:
        ls.cell_owner[uri] = notebook.uri
    ls.edited(buffer, now=False)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def notebook_save(ls: OfflintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    buffer = ls.buffers.get(params.notebook_document.uri)
    if buffer is not None and buffer.project is not None:
        ls.request_project_run(buffer.project)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_close(ls: OfflintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    buffer = ls.buffers.pop(params.notebook_document.uri, None)
    if buffer is not None:
        ls.clear(buffer)
        for uri, _ in buffer.cells or []:
            ls.cell_owner.pop(uri, None)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def watched_files(ls: OfflintServer, params: types.DidChangeWatchedFilesParams) -> None:
    changed = [change.uri for change in params.changes]
    if any(os.path.basename(to_fs_path(uri) or "") in CONFIG_FILE_NAMES for uri in changed):
        ls.reload_configuration()
        return
    for key in {b.project for b in ls.buffers.values() if b.project is not None}:
        ls.request_project_run(key)  # another module changed: what reaches the open ones may too


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def configuration_changed(ls: OfflintServer, params: types.DidChangeConfigurationParams) -> None:
    ls.reload_configuration()


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def folders_changed(ls: OfflintServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    for buffer in list(ls.buffers.values()):
        buffer.project = ls.project_for(buffer.path)
        buffer.settings = None
        ls.edited(buffer, now=True)


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: OfflintServer, params: types.HoverParams) -> types.Hover | None:
    from offlint.catalogue import load_catalogue

    buffer = ls.buffer_of(params.text_document.uri)
    if buffer is None:
        return None
    document = ls.workspace.get_text_document(params.text_document.uri)
    codec = ls.workspace.position_codec
    catalogue = load_catalogue()
    parts = []
    for d in buffer.published.get(params.text_document.uri, []):
        span = convert.diagnostic_range(codec, document.lines, d)
        if not _inside(params.position, span):
            continue
        spec = catalogue.get(d.code)
        if spec is None:
            continue
        what = spec.docs.get("what", "").strip()
        fix = {"safe": "safe fix", "unsafe": "unsafe fix (review it)", "none": "no automatic fix"}[spec.fix_safety.value]
        lines = [f"**{spec.code}** `{spec.name}`: {spec.summary}", ""]
        if what:
            lines += [what, ""]
        lines.append(f"Confidence: {d.confidence.value}; {fix}. [Rule documentation]({convert.RULE_DOCS_URL.format(code=spec.code)})")
        if d.note:
            lines += ["", f"_{d.note}_"]
        parts.append("\n".join(lines))
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)))


def _inside(position: types.Position, span: types.Range) -> bool:
    after_start = (position.line, position.character) >= (span.start.line, span.start.character)
    before_end = (position.line, position.character) <= (span.end.line, span.end.character)
    return after_start and before_end


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (
        b.start.line,
        b.start.character,
    ) <= (a.end.line, a.end.character)


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
        resolve_provider=True,
    ),
)
async def code_action(ls: OfflintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    buffer = ls.buffer_of(uri)
    if buffer is None or buffer.excluded:
        return None
    wanted = params.context.only
    quick = wanted is None or any(k.startswith(types.CodeActionKind.QuickFix) for k in wanted)
    fix_all_wanted = wanted is None or any(
        FIX_ALL_KIND.startswith(k) or k.startswith(types.CodeActionKind.SourceFixAll) for k in wanted
    )
    revision = buffer.revision
    report = await ls.confirmed_report(buffer)
    if report is None or buffer.revision != revision or ls.buffers.get(buffer.uri) is not buffer:
        return None
    document = ls.workspace.get_text_document(uri)
    codec = ls.workspace.position_codec
    lines = document.lines
    version = document.version
    actions: list[types.CodeAction] = []
    in_cell = buffer.cells is not None
    here = [d for d in report.diagnostics if ls.cell_uri(buffer, d.cell) == uri]
    if quick:
        for d in here:
            span = convert.diagnostic_range(codec, lines, d)
            if not _overlaps(span, params.range):
                continue
            shown = convert.to_lsp_diagnostic(codec, lines, d, uri, fix_known=True, related_supported=False)
            if d.fix is not None and not in_cell:
                safe = d.fix.safety is FixSafety.SAFE
                actions.append(
                    types.CodeAction(
                        title=f"{d.code}: {d.fix.title} ({'safe' if safe else 'unsafe'} fix)",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[shown],
                        is_preferred=safe,
                        edit=_document_edit(uri, version, convert.text_edits(codec, lines, d.fix.edits)),
                        data={"safety": d.fix.safety.value},
                    )
                )
            suppressed = editor.suppressed_text(document.source, {d.location.line: {d.code}})
            if suppressed is not None:
                actions.append(
                    types.CodeAction(
                        title=f"{d.code}: suppress with `# offlint: ignore[{d.code}]`",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[shown],
                        edit=_document_edit(uri, version, convert.edits_between(codec, document.source, suppressed)),
                    )
                )
    if fix_all_wanted and not in_cell and any(d.fix is not None and d.fix.safety is FixSafety.SAFE for d in here):
        action = types.CodeAction(
            title="offlint: fix all safe fixes",
            kind=FIX_ALL_KIND,
            data={"uri": uri, "revision": revision},
        )
        if not ls.resolve_edits:
            action = await _resolve_fix_all(ls, action)
        actions.append(action)
    return actions


def _document_edit(uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=list(edits),
            )
        ]
    )


@server.feature(types.CODE_ACTION_RESOLVE)
async def code_action_resolve(ls: OfflintServer, action: types.CodeAction) -> types.CodeAction:
    if action.kind == FIX_ALL_KIND and action.edit is None:
        return await _resolve_fix_all(ls, action)
    return action


async def _resolve_fix_all(ls: OfflintServer, action: types.CodeAction) -> types.CodeAction:
    from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams

    data = action.data if isinstance(action.data, dict) else {}
    uri = data.get("uri")
    buffer = ls.buffer_of(uri) if isinstance(uri, str) else None
    if buffer is None or buffer.cells is not None:
        raise JsonRpcInvalidParams("fix all: no such document open")
    if data.get("revision") != buffer.revision:
        raise JsonRpcContentModified("the document changed since this action was offered")
    document = ls.workspace.get_text_document(buffer.uri)
    text = document.source
    root = ls.projects[buffer.project].root if buffer.project else Path.cwd()
    base = root if root.is_dir() else root.parent
    fixed = await ls.in_worker(
        fix_all, text, buffer.display, str(buffer.path) if buffer.path else None, str(base), buffer.settings
    )
    if fixed is None or buffer.revision != data.get("revision"):
        action.edit = types.WorkspaceEdit(changes={})
        return action
    action.edit = _document_edit(
        buffer.uri, document.version, convert.edits_between(ls.workspace.position_codec, text, fixed)
    )
    return action


def start() -> None:
    """Serve on stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="offlint server: %(levelname)s: %(message)s")
    # pygls logs each malformed message with a traceback; the client gets its error, and
    # `report_server_error` / the handlers here log one line
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    server.start_io()
