"""The one place that knows which ``mcp`` release is installed.

threadline serves its tools on every ``mcp`` the agent frameworks accept beside it, 1.23 to 2.x
(strands-agents requires ``mcp<2.2``, google-adk ``>=1.24``, openai-agents ``>=1.19``). The two
majors name the same server differently:

- mcp 2.x: ``mcp.server.mcpserver.MCPServer`` takes ``version``; ``run("streamable-http",
  host=…, port=…)``; an unexpected exception in a tool is logged by the server and reaches the
  client as the bare ``Error executing tool NAME``; ``ToolAnnotations`` fields are snake_case.
- mcp 1.x: ``mcp.server.fastmcp.FastMCP`` has no ``version`` (the low-level server reports the
  ``mcp`` package's version unless told otherwise); host and port are settings read by
  ``run("streamable-http")``; any exception's text reaches the client; ``ToolAnnotations``
  fields are camelCase (a snake_case keyword would be kept as an unknown extra field).

Everything else threadline uses (the ``tool`` decorator, structured output from the return
annotation, the ``Error executing tool NAME: reason`` text of a ``ToolError``) is common to both.
The functions below even out the differences, so a client sees the same server on either major.
"""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any, Literal

try:
    from mcp.types import ToolAnnotations
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        f"The MCP server needs the 'mcp' package ({exc}); run: pip install -e '.[mcp]' in the "
        "threadline clone"
    ) from exc

__all__ = [
    "MCP_MAJOR",
    "ToolAnnotations",
    "ToolError",
    "new_server",
    "serve",
    "tool_annotations",
]

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

_server_module: Any
ToolError: type[Exception]
try:
    _server_module = importlib.import_module("mcp.server.mcpserver")
    ToolError = importlib.import_module("mcp.server.mcpserver.exceptions").ToolError
    MCP_MAJOR = 2
except ModuleNotFoundError:
    # mcp 1.x (2.x keeps a mcp.server.fastmcp stub whose import raises, so 2.x is tried first)
    _server_module = importlib.import_module("mcp.server.fastmcp")
    ToolError = importlib.import_module("mcp.server.fastmcp.exceptions").ToolError
    MCP_MAJOR = 1

_log = logging.getLogger("threadline.mcp")


def new_server(name: str, *, version: str, instructions: str, log_level: LogLevel) -> Any:
    """The installed release's server object (``MCPServer`` or ``FastMCP``) announcing ``name``
    and threadline's ``version``. Both constructors call ``logging.basicConfig``; a library must
    leave the host's root logger alone, so its level and handlers are put back."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        if MCP_MAJOR == 2:
            return _server_module.MCPServer(
                name, version=version, instructions=instructions, log_level=log_level
            )
        # FastMCP's settings model refers to FastMCP before the class exists; recent
        # pydantic-settings warn about that unresolved annotation on every construction
        # unless the model is rebuilt once it can be resolved (it can now)
        importlib.import_module("mcp.server.fastmcp.server").Settings.model_rebuild()
        server = _fastmcp_class()(name, instructions=instructions, log_level=log_level)
        server._mcp_server.version = version  # else initialize reports mcp's own version
        return server
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


def tool_annotations(*, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """Tool annotations built from their wire names, which both majors accept."""
    return ToolAnnotations.model_validate(
        {
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": False,
        }
    )


@functools.cache
def _fastmcp_class() -> Any:
    """FastMCP reporting a tool's unexpected exception the way MCPServer does: logged with its
    traceback, and to the client only ``Error executing tool NAME`` (its text may hold paths or
    data the model has no business seeing). A tool's ``ToolError`` and invalid arguments (a
    pydantic ``ValidationError``) still reach the client with their reason, as on 2.x."""
    from pydantic import ValidationError

    class ThreadlineFastMCP(_server_module.FastMCP):  # type: ignore[misc]
        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            try:
                return await super().call_tool(name, arguments)
            except ToolError as exc:
                cause = exc.__cause__
                if cause is None or isinstance(cause, (ToolError, ValidationError)):
                    raise
                _log.error("Tool %r raised an unexpected exception", name, exc_info=cause)
                raise ToolError(f"Error executing tool {name}") from cause

    return ThreadlineFastMCP


def serve(server: Any, *, http: bool, host: str, port: int) -> None:
    """Serve over stdio, or over streamable HTTP at ``http://host:port/mcp``."""
    if not http:
        server.run("stdio")
    elif MCP_MAJOR == 2:
        server.run("streamable-http", host=host, port=port)
    else:
        server.settings.host = host
        server.settings.port = port
        server.run("streamable-http")
