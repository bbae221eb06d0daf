"""Entry point: ``threadline [--store URL] COMMAND``.

Command modules register themselves: each module listed in ``COMMAND_MODULES`` defines
``register(cli: click.Group)``, called the first time the group looks a command up. Bad input
exits with code 2 and a one-line message.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import click

from threadline.errors import ProviderError, StoreError, UserError

COMMAND_MODULES = (
    "sessions",  # sessions, new, show, tree, context, say, branch, label, fork, stats
    "formats",  # import, export
    "history",  # metadata, purge
    "ops",  # context operations
    "repair",  # repair
    "bookmarks",  # tag, tags, undo
    "chat",  # chat REPL
    "compact",  # compact
    "catalog",  # search, tags, manage-tags, catalog rebuild, db upgrade
    "mcp",  # mcp server
    "web",  # web viewer
)


#: How an error's next step is worded on the command line (see threadline.errors.Hint).
CLI_HINTS = {
    "list_sessions": "run 'threadline sessions' to list the sessions",
    "list_entries": "run 'threadline tree {session}' to see the entry ids",
    "list_tags": "run 'threadline tags {session}' to list the tags",
    "rebuild_catalog": "run 'threadline catalog rebuild'",
}


class _Group(click.Group):
    """Registers the command modules on first use, so any import order works (the modules
    import this one for ``get_store``)."""

    _registered = False

    def _ensure(self) -> None:
        if not _Group._registered:
            _Group._registered = True
            _register_commands()

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._ensure()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._ensure()
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            click.echo(f"Error: {exc.message_for(CLI_HINTS)}", err=True)
            sys.exit(2)
        except (StoreError, ProviderError) as exc:
            click.echo(f"Error: {exc.message_for(CLI_HINTS)}", err=True)
            sys.exit(1)


@click.group(cls=_Group)
@click.option(
    "--store",
    "store_url",
    envvar="THREADLINE_STORE",
    default=None,
    help="Store URL or directory (default: $THREADLINE_HOME or ~/.threadline).",
)
@click.version_option(package_name="threadline")
@click.pass_context
def cli(ctx: click.Context, store_url: str | None) -> None:
    """threadline: conversation histories as crash-safe trees."""
    ctx.obj = {"store_url": store_url}


#: Commands that may bring a store into being; the others refuse a ``--store`` that does not
#: exist, so a typo is not silently created as an empty store.
CREATING_COMMANDS = frozenset({"new", "import", "fork", "chat", "web", "mcp"})


def get_store(ctx: click.Context) -> Any:
    """The store named by ``--store`` (opened once per invocation)."""
    from threadline.stores import open_store

    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if "store" not in obj:
        url = obj.get("store_url")
        if url is not None and root.invoked_subcommand not in CREATING_COMMANDS:
            _require_existing(url)
        obj["store"] = open_store(url)
        root.obj = obj
    return obj["store"]


def _require_existing(url: str) -> None:
    """A store given by path (a directory or a SQLite file) must exist for a command that only
    reads or changes what is there."""
    if url.startswith("sqlite:"):
        from threadline.store.sqlite import sqlite_path

        path = sqlite_path(url)
        if path != ":memory:" and not Path(path).expanduser().exists():
            raise UserError(
                f"No SQLite store at {path}; check --store (a command that creates "
                "sessions, such as new or import, creates it)"
            )
    elif "://" not in url or url.startswith("file://"):
        path = url.removeprefix("file://")
        if not Path(path).expanduser().is_dir():
            raise UserError(
                f"No store at {path} (no such directory); check --store (a command "
                "that creates sessions, such as new or import, creates it)"
            )


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"threadline.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"threadline.cli.{name}":
                raise
            continue
        mod.register(cli)


def main() -> None:
    cli(prog_name="threadline")


if __name__ == "__main__":
    # Run as a script (python -m threadline.cli.main): hand over to the module proper, so the
    # command modules, which import threadline.cli.main, do not see a second, half-built copy.
    from threadline.cli.main import main as _main

    _main()
