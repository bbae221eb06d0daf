"""``threadline web``: the viewer and editor in a browser, served on 127.0.0.1 only."""

from __future__ import annotations

import click

from threadline.cli.main import get_store
from threadline.errors import UserError


def register(cli: click.Group) -> None:
    cli.add_command(web)


@click.command()
@click.option(
    "--store",
    "store_url",
    default=None,
    help="Store URL or directory (same as the global --store).",
)
@click.option(
    "--port",
    type=int,
    default=8765,
    show_default=True,
    help="Port on 127.0.0.1 (0 picks a free one).",
)
@click.option("--no-browser", is_flag=True, help="Do not open a browser window.")
@click.pass_context
def web(ctx: click.Context, store_url: str | None, port: int, no_browser: bool) -> None:
    """Browse and edit the store's sessions in a web page on 127.0.0.1."""
    try:
        from threadline.web import serve
    except ImportError as exc:
        raise UserError(str(exc)) from None
    if not 0 <= port <= 65535:
        raise UserError(f"Port {port} is out of range; use 0-65535")
    if store_url is not None:
        root = ctx.find_root()
        root.obj = {**(root.obj or {}), "store_url": store_url}
        root.obj.pop("store", None)
    store = get_store(ctx)

    def announce(url: str) -> None:
        click.echo(f"threadline web: {store.url} at {url} (Ctrl-C stops)", err=True)

    try:
        serve(store, port=port, open_browser=not no_browser, announce=announce)
    except KeyboardInterrupt:  # Ctrl-C is how the viewer is meant to stop: exit 0, no "Aborted!"
        click.echo("threadline web: stopped", err=True)
