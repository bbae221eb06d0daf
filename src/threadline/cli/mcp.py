"""``threadline mcp``: serve the MCP tools over stdio, or over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import click

from threadline.cli.main import get_store
from threadline.errors import UserError


def register(cli: click.Group) -> None:
    cli.add_command(mcp)


@click.command()
@click.option("--http", "http", is_flag=True,
              help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True,
              help="Port for --http (the server listens on 127.0.0.1 only).")
@click.pass_context
def mcp(ctx: click.Context, http: bool, port: int) -> None:
    """Run the MCP server (tools to read and curate histories) for agents."""
    try:
        from threadline.mcp.server import run
    except ImportError as exc:
        raise UserError(str(exc)) from None
    if http:
        click.echo(f"threadline MCP server on http://127.0.0.1:{port}/mcp", err=True)
    run(get_store(ctx), http=http, port=port)
