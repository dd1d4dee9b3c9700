"""`offlint server`, driven over stdio by a real LSP client (pytest-lsp's, built on pygls's): the
server runs as `python -m offlint server` in a process of its own, as an editor starts it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "offlint", "server"]
WAIT_S = float(os.environ.get("OFFLINT_TEST_WAIT_S", "60"))  # generous: CI shares two cores; nothing here is timed

# OFL204's first bad example (a safe fix); its OFL104 is `low`, under the default floor
HAZARD = textwrap.dedent(
    """\
    import torch


    class GroupOffload:
        def __init__(self, module):
            self.module = module
            self.stream = torch.cuda.Stream()

        def onload_(self):
            with torch.cuda.stream(self.stream):
                for p in self.module.parameters():
                    p.data = p.data.to("cuda", non_blocking=True)
                    p.data.record_stream(torch.cuda.current_stream())
    """
)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["OFFLINT_CACHE_DIR"] = str(tmp_path / "cache")  # never the user's, never shared by tests
    return env


async def _start(
    tmp_path: Path, workspace: Path, capabilities: types.ClientCapabilities | None = None, **options: Any
) -> Any:
    config = pytest_lsp.ClientServerConfig(server_command=SERVER, server_env=_env(tmp_path))
    client = await config.start()
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities or pytest_lsp.client_capabilities("visual-studio-code"),
            root_uri=from_fs_path(str(workspace)),
            workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(workspace)) or "", name="ws")],
            initialization_options={"idleMs": 100, **options},
        )
    )
    return client


async def _diagnostics_until(
    client: Any, uri: str, wanted: Callable[[Sequence[types.Diagnostic]], bool]
) -> Sequence[types.Diagnostic]:
    """The first diagnostics published for `uri` that satisfy `wanted`."""

    async def wait() -> Sequence[types.Diagnostic]:
        while True:
            if uri in client.diagnostics and wanted(client.diagnostics[uri]):
                return client.diagnostics[uri]
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    return await asyncio.wait_for(wait(), WAIT_S)


def _codes(diagnostics: Sequence[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def _apply(text: str, edits: Sequence[types.TextEdit]) -> str:
    """Apply LSP edits (ASCII text: UTF-16 columns are characters), last first."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        if position.line >= len(lines):
            return len(text)
        return starts[position.line] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def _document_edits(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    assert action.edit is not None and action.edit.document_changes, action
    edits: list[types.TextEdit] = []
    for change in action.edit.document_changes:
        assert isinstance(change, types.TextDocumentEdit) and change.text_document.uri == uri
        edits.extend(e for e in change.edits if isinstance(e, types.TextEdit))
    return edits


def _open(client: Any, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def _replace(client: Any, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def _code_actions(client: Any, uri: str, diagnostic: types.Diagnostic, only: list[str] | None = None) -> list[types.CodeAction]:
    found = await asyncio.wait_for(
        client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic], only=only),
            )
        ),
        WAIT_S,
    )
    return [a for a in found or [] if isinstance(a, types.CodeAction)]


def _workspace(tmp_path: Path, config: str = "[tool.offlint]\n") -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text(config, encoding="utf-8")
    return workspace


@pytest.mark.asyncio
async def test_the_editor_round_trip(tmp_path: Path) -> None:
    """initialize, open a file with a hazard, receive the diagnostic, request and apply the code
    action, see the diagnostic go, edit the configuration and see it reloaded, shut down."""
    workspace = _workspace(tmp_path)
    path = workspace / "offload.py"
    path.write_text(HAZARD, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, HAZARD)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL204" in _codes(ds))
        assert _codes(shown) == ["OFL204"]
        ofl204 = next(d for d in shown if d.code == "OFL204")
        assert ofl204.source == "offlint" and ofl204.range.start.line == 12
        assert ofl204.code_description is not None and ofl204.code_description.href.endswith("/OFL204.md")
        assert isinstance(ofl204.data, dict) and ofl204.data["confidence"] == "high"
        assert ofl204.severity == types.DiagnosticSeverity.Error  # high confidence

        actions = await _code_actions(client, uri, ofl204)
        fixes = [a for a in actions if a.title.startswith("OFL204") and "safe fix" in a.title]
        assert len(fixes) == 1 and fixes[0].is_preferred and "unsafe" not in fixes[0].title, [a.title for a in actions]
        assert any(a.title.startswith("OFL204: suppress") for a in actions)
        fixed = _apply(HAZARD, _document_edits(fixes[0], uri))
        assert "record_stream(consumer_stream)" in fixed
        _replace(client, uri, fixed, 2)  # the editor applied the edit to its buffer
        assert _codes(await _diagnostics_until(client, uri, lambda ds: "OFL204" not in _codes(ds))) == []

        # the configuration changes on disk; the editor's file watcher says so (the editor has it
        # open too: a TOML buffer is no Python to check)
        config_uri = from_fs_path(str(workspace / "pyproject.toml")) or ""
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=config_uri, language_id="toml", version=1, text="[tool.offlint]\n")
            )
        )
        (workspace / "pyproject.toml").write_text('[tool.offlint]\nmin-confidence = "low"\n', encoding="utf-8")
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[
                    types.FileEvent(
                        uri=from_fs_path(str(workspace / "pyproject.toml")) or "", type=types.FileChangeType.Changed
                    )
                ]
            )
        )
        shown = await _diagnostics_until(client, uri, lambda ds: bool(ds))
        assert _codes(shown) == ["OFL104"] and shown[0].severity == types.DiagnosticSeverity.Information
        assert any("configuration reloaded" in m.message for m in client.log_messages)
        assert config_uri not in client.diagnostics
    finally:
        await client.shutdown_session()
    assert client._server.returncode == 0  # exit after shutdown: 0, as the protocol says
    await client.stop()


@pytest.mark.asyncio
async def test_unsaved_text_is_analysed_and_suppression_is_offered(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = workspace / "offload.py"
    path.write_text("import torch\n", encoding="utf-8")  # on disk: nothing to find
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, "import torch\n")
        assert _codes(await _diagnostics_until(client, uri, lambda ds: True)) == []
        _replace(client, uri, HAZARD, 2)  # typed, not saved
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL204" in _codes(ds))
        ofl204 = next(d for d in shown if d.code == "OFL204")

        hover = await asyncio.wait_for(
            client.text_document_hover_async(
                types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=ofl204.range.start)
            ),
            WAIT_S,
        )
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert "**OFL204** `record-stream-on-allocating-stream`" in hover.contents.value
        assert "docs/rules/OFL204.md" in hover.contents.value

        actions = await _code_actions(client, uri, ofl204)
        suppress = next(a for a in actions if a.title == "OFL204: suppress with `# offlint: ignore[OFL204]`")
        text = _apply(HAZARD, _document_edits(suppress, uri))
        assert "record_stream(torch.cuda.current_stream())  # offlint: ignore[OFL204]" in text
        _replace(client, uri, text, 3)
        assert _codes(await _diagnostics_until(client, uri, lambda ds: "OFL204" not in _codes(ds))) == []
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_fix_all_safe_fixes_through_resolve(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = workspace / "offload.py"
    path.write_text(HAZARD, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, HAZARD)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL204" in _codes(ds))
        actions = await _code_actions(client, uri, shown[0], only=[types.CodeActionKind.SourceFixAll])
        assert [a.title for a in actions] == ["offlint: fix all safe fixes"]
        assert actions[0].kind == "source.fixAll.offlint" and actions[0].edit is None  # resolved on demand
        resolved = await asyncio.wait_for(client.code_action_resolve_async(actions[0]), WAIT_S)
        text = _apply(HAZARD, _document_edits(resolved, uri))
        # what `offlint check --fix -` makes of the same text
        cli = subprocess.run(
            [sys.executable, "-m", "offlint", "check", "--fix", "--stdin-filename", str(path), "-"],
            input=HAZARD, capture_output=True, text=True, cwd=workspace, env=_env(tmp_path), check=False,
        )
        assert text == cli.stdout and "record_stream(consumer_stream)" in text
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_fix_all_comes_with_its_edit_where_the_client_cannot_resolve(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    path = workspace / "offload.py"
    path.write_text(HAZARD, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace, capabilities=types.ClientCapabilities())
    try:
        _open(client, uri, HAZARD)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL204" in _codes(ds))
        actions = await _code_actions(client, uri, shown[0], only=["source.fixAll.offlint"])
        assert [a.title for a in actions] == ["offlint: fix all safe fixes"]
        assert "record_stream(consumer_stream)" in _apply(HAZARD, _document_edits(actions[0], uri))
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_reachability_chain_is_related_information(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """\
        import torch


        def sync_weights(x):
            return x.item()


        def helper(x):
            return sync_weights(x)


        def step(x):
            return helper(x)


        def capture(x):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step(x)
        """
    )
    workspace = _workspace(tmp_path)
    path = workspace / "runner.py"
    path.write_text(source, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, source)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL105" in _codes(ds))
        ofl105 = next(d for d in shown if d.code == "OFL105")
        related = ofl105.related_information or []
        assert [r.message for r in related] == [
            "called from helper",
            "← step (called inside a CUDA graph capture region)",
        ], related
        assert [r.location.uri for r in related] == [uri, uri]
        assert [r.location.range.start.line for r in related] == [7, 11]  # `def helper`, `def step`
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_a_notebook_gets_diagnostics_on_its_cell(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    cells = ["# notes", "import torch", HAZARD.replace("import torch\n", "")]
    (workspace / "explore.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    notebook_uri = from_fs_path(str(workspace / "explore.ipynb")) or ""
    cell_uris = [f"vscode-notebook-cell:{workspace}/explore.ipynb#cell{i}" for i in range(len(cells))]
    client = await _start(tmp_path, workspace)
    try:
        client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=notebook_uri,
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[
                        types.NotebookCell(
                            kind=types.NotebookCellKind.Markup if i == 0 else types.NotebookCellKind.Code,
                            document=cell_uris[i],
                        )
                        for i in range(len(cells))
                    ],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(
                        uri=cell_uris[i], language_id="markdown" if i == 0 else "python", version=1, text=cells[i]
                    )
                    for i in range(len(cells))
                ],
            )
        )
        shown = await _diagnostics_until(client, cell_uris[2], lambda ds: "OFL204" in _codes(ds))
        ofl204 = next(d for d in shown if d.code == "OFL204")
        assert cells[2].splitlines()[ofl204.range.start.line].strip().startswith("p.data.record_stream(")
        assert list(client.diagnostics.get(cell_uris[1], [])) == []
    finally:
        await client.shutdown_session()
        await client.stop()


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_messages(stream: bytes) -> list[dict[str, Any]]:
    messages = []
    while stream:
        header, _, rest = stream.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n") if line.lower().startswith(b"content-length"))
        messages.append(json.loads(rest[:length]))
        stream = rest[length:]
    return messages


def test_malformed_requests_get_lsp_errors_and_the_server_goes_on(tmp_path: Path) -> None:
    """Raw frames (no client library sends these on purpose): each broken message gets its
    JSON-RPC error, and the same process then initializes and shuts down cleanly."""
    workspace = _workspace(tmp_path)

    def request(message_id: int, method: str, params: Any) -> bytes:
        return _frame(json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}).encode())

    frames = [
        request(1, "textDocument/hover", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}}),
        _frame(b"{not json"),
        _frame(b"[1, 2]"),
        request(2, "initialize", {"capabilities": {}, "processId": None, "rootUri": from_fs_path(str(workspace))}),
        _frame(json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}).encode()),
        request(3, "textDocument/hover", {"textDocument": 5, "position": "here"}),
        request(4, "offlint/noSuchMethod", {}),
        request(5, "textDocument/codeAction", {"textDocument": {"uri": "file:///never/opened.py"},
                                               "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                                               "context": {"diagnostics": []}}),
        request(6, "codeAction/resolve", {"title": "offlint: fix all safe fixes", "kind": "source.fixAll.offlint",
                                          "data": {"uri": "file:///never/opened.py", "revision": 1}}),
        _frame(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": 7}}).encode()),
        _frame(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": "file:///never/opened.py", "version": 2},
            "contentChanges": [{"range": {"start": {"line": 99, "character": 0}, "end": {"line": 99, "character": 1}},
                                "text": "x"}]}}).encode()),
        request(8, "textDocument/hover", {"textDocument": {"uri": "file:///never/opened.py"},
                                          "position": {"line": 10**6, "character": 10**6}}),
        request(7, "shutdown", None),
        _frame(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()),
    ]
    done = subprocess.run(
        SERVER, input=b"".join(frames), capture_output=True, env=_env(tmp_path), timeout=WAIT_S, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = {m.get("id", "none"): m for m in _read_messages(done.stdout) if "method" not in m}
    errors = [m for m in _read_messages(done.stdout) if "error" in m]
    assert replies[1]["error"]["code"] == -32002  # before initialize
    assert sorted(m["error"]["code"] for m in errors if m["id"] is None) == [-32700, -32600]
    assert "capabilities" in replies[2]["result"]
    assert replies[3]["error"]["code"] == -32602  # params of the wrong types
    assert replies[4]["error"]["code"] == -32601
    assert replies[5]["result"] is None  # a document never opened: nothing to offer, no error
    assert replies[6]["error"]["code"] == -32602
    assert replies[8]["result"] is None and "error" not in replies[8]
    assert replies[7]["result"] is None and "error" not in replies[7]
    assert b"Traceback" not in done.stderr


def test_without_the_extra_the_command_says_so(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['pygls'] = None; from offlint.cli import main; main(['server'])"
    done = subprocess.run(
        [sys.executable, "-c", hide], capture_output=True, text=True, env=_env(tmp_path), timeout=WAIT_S, check=False
    )
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        "offlint: error: `offlint server` needs the server extra (pygls is not installed): pip install 'offlint[server]'"
    ]


@pytest.mark.asyncio
async def test_cross_module_facts_reach_the_edited_buffer(tmp_path: Path) -> None:
    """A helper module is capture-reachable only through another module's capture region: the
    fast pass alone cannot know; the project run (check's cross-module rounds) says so, and the
    edits that follow keep what it learnt."""
    workspace = _workspace(tmp_path)
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (workspace / "pkg" / "runner.py").write_text(
        textwrap.dedent(
            """\
            import torch

            from pkg.helpers import step


            def capture(x):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    step(x)
            """
        ),
        encoding="utf-8",
    )
    helpers = "import torch\n\n\ndef step(x):\n    return x.item()\n"
    path = workspace / "pkg" / "helpers.py"
    path.write_text(helpers, encoding="utf-8")
    cli = subprocess.run(
        [sys.executable, "-m", "offlint", "check", "--output-format", "concise", "."],
        capture_output=True, text=True, cwd=workspace, env=_env(tmp_path), check=False,
    )
    assert "pkg/helpers.py:5:12: OFL105" in cli.stdout  # what CI reports
    uri = from_fs_path(str(path)) or ""
    # no project run after the edit (only on open): what follows the edit is the fast pass's
    client = await _start(tmp_path, workspace, idleMs=600_000)
    try:
        _open(client, uri, helpers)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL105" in _codes(ds))
        assert shown[0].range.start.line == 4
        assert shown[0].related_information is not None
        assert "pkg.runner.capture" in shown[0].related_information[0].message
        assert shown[0].related_information[0].location.uri.endswith("/pkg/runner.py")
        edited = helpers.replace("def step(x):\n", "def step(x):\n    x = x + 1\n")
        _replace(client, uri, edited, 2)  # unsaved: the fast pass, with the project run's seeds
        after = await _diagnostics_until(
            client, uri, lambda ds: any(d.code == "OFL105" and d.range.start.line == 5 for d in ds)
        )
        assert _codes(after) == ["OFL105"]
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_a_broken_configuration_is_shown_and_the_fixed_one_reloaded(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, '[tool.offlint]\nselect = "OFL2"\n')  # a string, not a list
    path = workspace / "offload.py"
    path.write_text(HAZARD, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, HAZARD)

        async def message() -> types.ShowMessageParams:
            while not client.messages:
                await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
            return client.messages[0]

        shown = await asyncio.wait_for(message(), WAIT_S)
        assert shown.type == types.MessageType.Error
        assert "pyproject.toml:2: [tool.offlint] select must be a list of strings" in shown.message
        (workspace / "pyproject.toml").write_text('[tool.offlint]\nselect = ["OFL2"]\n', encoding="utf-8")
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=from_fs_path(str(workspace / "pyproject.toml")) or "", type=types.FileChangeType.Changed)]
            )
        )
        assert _codes(await _diagnostics_until(client, uri, lambda ds: bool(ds))) == ["OFL204"]
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_an_unsafe_fix_is_labelled_and_never_in_fix_all(tmp_path: Path) -> None:
    source = (REPO / "fixtures" / "sglang_offloader_original.py").read_text(encoding="utf-8")
    workspace = _workspace(tmp_path)
    path = workspace / "offloader.py"
    path.write_text(source, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, source)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL101" in _codes(ds))
        assert _codes(shown) == ["OFL101", "OFL103"]
        ofl101 = next(d for d in shown if d.code == "OFL101")
        assert ofl101.severity == types.DiagnosticSeverity.Warning and ofl101.message.endswith("[medium]")
        actions = await _code_actions(client, uri, ofl101)
        fixes = [a for a in actions if a.title.startswith("OFL101") and a.title.endswith("(unsafe fix)")]
        assert len(fixes) == 1 and not fixes[0].is_preferred
        fixed = _apply(source, _document_edits(fixes[0], uri))
        assert "torch.cuda.is_current_stream_capturing()" in fixed  # the primed-overlap rewrite
        assert not any(a.kind == "source.fixAll.offlint" for a in actions)  # no safe fix here
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_a_file_outside_every_workspace_folder_is_checked_as_named(tmp_path: Path) -> None:
    """No workspace folder at all (an editor opened one file): the file is its own project."""
    folder = tmp_path / "loose"
    folder.mkdir()
    path = folder / "offload.py"
    path.write_text(HAZARD, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    config = pytest_lsp.ClientServerConfig(server_command=SERVER, server_env=_env(tmp_path))
    client = await config.start()
    try:
        await client.initialize_session(
            types.InitializeParams(capabilities=pytest_lsp.client_capabilities("neovim"), root_uri=None)
        )
        _open(client, uri, HAZARD)
        shown = await _diagnostics_until(client, uri, lambda ds: "OFL204" in _codes(ds))
        actions = await _code_actions(client, uri, next(d for d in shown if d.code == "OFL204"))
        assert any(a.title.startswith("OFL204") and a.title.endswith("(safe fix)") for a in actions)
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_a_code_action_under_a_broken_configuration_answers(tmp_path: Path) -> None:
    """No report can be made while the configuration is broken: the request gets an answer
    (no actions) once the project run is over, not a wait for ever."""
    workspace = _workspace(tmp_path, '[tool.offlint]\nselect = ["OFL999"]\n')
    path = workspace / "offload.py"
    path.write_text(HAZARD, encoding="utf-8")
    uri = from_fs_path(str(path)) or ""
    client = await _start(tmp_path, workspace)
    try:
        _open(client, uri, HAZARD)
        anywhere = types.Diagnostic(
            range=types.Range(start=types.Position(12, 0), end=types.Position(12, 10)), message="", code="OFL204"
        )
        assert await _code_actions(client, uri, anywhere) == []
        assert any("OFL999" in m.message for m in client.messages)
    finally:
        await client.shutdown_session()
        await client.stop()
