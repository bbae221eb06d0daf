"""The official ``mcp`` client driving ``threadline mcp``, on mcp 1.x and 2.x alike.

The two majors name a result's attributes differently (``isError`` / ``is_error``) and the HTTP
client differently (``streamablehttp_client`` yields three values, ``streamable_http_client``
two), so the tests read what went over the wire instead: a result dumped with the protocol's
own (camelCase) field names, which both majors produce.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp.client.streamable_http as _http
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

T = TypeVar("T")
CLI = [sys.executable, "-c", "from threadline.cli.main import main; main()"]


@dataclasses.dataclass(frozen=True)
class Called:
    """A tool call's result as the client received it."""

    is_error: bool
    structured_content: Any
    content: list[Any]  # the content blocks (each text block has .text on either major)


class Client:
    """A connected ``ClientSession`` whose answers are read by their wire names."""

    def __init__(self, session: ClientSession, initialized: dict[str, Any]) -> None:
        self.session = session
        #: the server's answer to ``initialize`` (``serverInfo``, ``instructions`` …)
        self.initialized = initialized

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Called:
        result = await self.session.call_tool(name, arguments)
        wire = result.model_dump(mode="json", by_alias=True)
        return Called(
            is_error=wire["isError"],
            structured_content=wire.get("structuredContent"),
            content=list(result.content),
        )

    async def list_tools(self) -> dict[str, dict[str, Any]]:
        """Every tool's listing as sent (``inputSchema``, ``outputSchema``, ``annotations`` …)."""
        listed = await self.session.list_tools()
        return {t.name: t.model_dump(mode="json", by_alias=True) for t in listed.tools}


async def _connected(session: ClientSession) -> Client:
    initialized = await session.initialize()
    return Client(session, initialized.model_dump(mode="json", by_alias=True))


def over_stdio(
    store_dir: Path,
    errlog: Path,
    fn: Callable[[Client], Awaitable[T]],
    *,
    command: list[str] | None = None,
) -> T:
    """Run ``fn`` against ``threadline --store STORE_DIR mcp`` (or ``command``) started as a
    subprocess; the server's stderr goes to ``errlog``."""
    argv = command or [*CLI, "--store", str(store_dir), "mcp"]

    async def main() -> T:
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as cs:
                return await fn(await _connected(cs))

    return anyio.run(main)


@asynccontextmanager
async def over_http(url: str) -> AsyncIterator[Client]:
    """An initialized client of the streamable HTTP server at ``url``."""
    connect: Any = getattr(_http, "streamable_http_client", None) or _http.streamablehttp_client
    async with connect(url) as streams, ClientSession(streams[0], streams[1]) as cs:
        yield await _connected(cs)
