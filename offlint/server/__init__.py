"""`offlint server`: the Language Server Protocol over stdio (the `server` extra: pygls and
lsprotocol). `server.py` holds the features, `convert.py` turns offlint's diagnostic model into
the protocol's, `protocol.py` answers malformed messages with LSP errors. Every finding comes from
`offlint/pipeline/` (`pipeline/editor.py`): the server has no analysis of its own."""
