"""``threadline mcp``: serve the MCP tools over stdio, or over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import socket

import click

from threadline.cli.main import get_store
from threadline.errors import UserError

DEFAULT_PORT = 8766


def register(cli: click.Group) -> None:
    cli.add_command(mcp)


@click.command()
@click.option(
    "--http", "http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio."
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port for --http (the server listens on 127.0.0.1 only; the viewer's "
    "default is 8765, so both can run at once).",
)
@click.pass_context
def mcp(ctx: click.Context, http: bool, port: int) -> None:
    """Run the MCP server (tools to read and curate histories) for agents."""
    try:
        from threadline.mcp.server import run
    except ImportError as exc:
        raise UserError(str(exc)) from None
    store = get_store(ctx)
    if http:
        _check_port(port)  # fail before announcing a URL nobody can reach
        click.echo(f"threadline MCP server on http://127.0.0.1:{port}/mcp (Ctrl-C stops)", err=True)
    try:
        run(store, http=http, port=port)
    except KeyboardInterrupt:
        if http:
            click.echo("threadline MCP server stopped", err=True)


def _check_port(port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        raise UserError(
            f"Cannot listen on 127.0.0.1:{port} ({exc.strerror}); pick another port with --port"
        ) from None
    finally:
        sock.close()
