"""The JSON-RPC side: every malformed message gets an LSP error, never a crash or silence.

pygls answers an unknown method (-32601) and a handler's exception (-32603) itself; a request
whose params do not match the protocol's types it only logs, leaving the client waiting for ever,
and a body that is not JSON it drops. Here the first is answered with -32602 (InvalidParams), the
second with -32700 (ParseError, id null, as JSON-RPC 2.0 says), a message that is JSON
but no JSON-RPC message with -32600 (InvalidRequest), and a request before `initialize` with
-32002 (ServerNotInitialized).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.protocol import LanguageServerProtocol

logger = logging.getLogger(__name__)
SERVER_NOT_INITIALIZED = -32002


@attrs.define
class Malformed:
    """A message whose params did not fit its method's types."""

    id: Any
    method: str
    reason: str
    jsonrpc: str = "2.0"


class OfflintProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "method" in data:
                cause = exc.__cause__ or exc
                reason = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
                return Malformed(id=data.get("id"), method=str(data.get("method")), reason=reason)
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, Malformed):
            logger.warning("malformed %s: %s", message.method, message.reason)
            if message.id is not None:
                reason = f"invalid params for {message.method}: {message.reason}"
                self.send_error(message.id, JsonRpcInvalidParams.CODE, reason)
            return
        if not hasattr(message, "jsonrpc"):
            # valid JSON, but no JSON-RPC message (no "jsonrpc", or not an object at all)
            message_id = message.get("id") if isinstance(message, dict) else None
            valid_id = message_id if isinstance(message_id, (int, str)) else None
            self.send_error(valid_id, JsonRpcInvalidRequest.CODE, "not a JSON-RPC 2.0 message")
            return
        method = getattr(message, "method", None)
        message_id = getattr(message, "id", None)
        if (
            method is not None
            and message_id is not None
            and method != types.INITIALIZE
            and self._workspace is None
        ):
            self.send_error(message_id, SERVER_NOT_INITIALIZED, "the server is not initialized")
            return
        super().handle_message(message)

    def answer_parse_error(self, error: Exception) -> None:
        """A body that is not JSON: JSON-RPC's -32700, with a null id (there is none to read)."""
        self.send_error(None, JsonRpcParseError.CODE, f"Parse error: {error}")

    def send_error(self, message_id: Any, code: int, message: str) -> None:
        """An error response; `id` is always written (null when unknown), as JSON-RPC wants."""
        self._send_data({"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": message}})
