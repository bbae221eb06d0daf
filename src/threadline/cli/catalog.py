"""Catalog commands: search, manage-tags, catalog (sessions, tags, tag, untag, rebuild), db upgrade.

``threadline tags SESSION`` lists a session's bookmarks (cli/bookmarks.py), so session tags live
under ``threadline catalog tags`` / ``catalog tag`` / ``catalog untag``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from threadline.catalog import TagPlan, TagResult
from threadline.cli.main import get_store
from threadline.errors import UserError


def register(cli: click.Group) -> None:
    for cmd in (search, manage_tags, catalog, db):
        cli.add_command(cmd)


def _echo_json(value: object) -> None:
    from threadline.cli.sessions import echo_json

    echo_json(value)


class IndexProgress:
    """Prints "indexing 1,240 / 28,000 messages" on stderr while the catalog embeds: rewritten
    in place on a terminal, one line every few seconds otherwise."""

    def __init__(self, every: float = 2.0) -> None:
        self.tty = sys.stderr.isatty()
        self.every = every
        self.last = 0.0
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < (0.1 if self.tty else self.every):
            return
        self.last = now
        line = f"indexing {done:,} / {total:,} messages for semantic search"
        click.echo(("\r" + line) if self.tty else line, err=True, nl=not self.tty)
        self.shown = True

    def finish(self) -> None:
        if self.shown and self.tty:
            click.echo(err=True)


def index_catalog(store: Any) -> None:
    """Index every message of ``store`` now, with visible progress (import and search call it,
    so no search waits silently on a backlog)."""
    progress = IndexProgress()
    try:
        store.catalog.index(progress)
    finally:
        progress.finish()


def _one_line(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@click.command()
@click.argument("query")
@click.option("-k", "k", default=10, show_default=True, help="How many hits.")
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "keyword", "semantic"]),
    default="hybrid",
    show_default=True,
)
@click.option("--role", default=None, help="Only messages of this role (user, assistant, …).")
@click.option("--session", default=None, help="Only this session.")
@click.option("--tag", default=None, help="Only sessions with this tag.")
@click.option("--since", default=None, help="Only messages at or after this date/time.")
@click.option("--until", default=None, help="Only messages at or before this date/time.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    k: int,
    mode: str,
    role: str | None,
    session: str | None,
    tag: str | None,
    since: str | None,
    until: str | None,
    as_json: bool,
) -> None:
    """Search every session's messages for QUERY (keyword + semantic, fused by rank).

    Messages below the relevance floor are not returned, so a query about something no session
    discusses answers "No session matches". Messages that are not indexed yet (written without
    'threadline import') are indexed first, with the progress on stderr."""
    store = get_store(ctx)
    if mode != "keyword":
        index_catalog(store)
    hits = store.catalog.search(
        query, k=k, mode=mode, role=role, session=session, tag=tag, since=since, until=until
    )
    if as_json:
        _echo_json(hits)
        return
    if not hits:
        click.echo(f"No session matches '{query}'.")
        return
    for h in hits:
        click.echo(f"{h.score:.4g}  {h.session_id}  {h.entry_id}  {h.role}  {h.timestamp}")
        click.echo(f"        {_one_line(h.snippet)}")


def _report(out: TagPlan | TagResult, yes: bool, as_json: bool) -> None:
    if as_json:
        _echo_json(out)
        return
    click.echo(out.message)
    if isinstance(out, TagPlan) and not yes:
        click.echo(f"To apply it, run the same command with --execute --token {out.token}")


def _run(
    ctx: click.Context,
    op: str,
    args: tuple[str, ...],
    execute: bool,
    token: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    cat = get_store(ctx).catalog
    fn = {
        "find_and_tag": cat.find_and_tag,
        "delete_tag": cat.delete_tag,
        "merge_tags": cat.merge_tags,
    }[op]
    if execute and not token:
        raise UserError("--execute needs the --token a preview printed (or use --yes)")
    if yes:
        plan = fn(*args)
        assert isinstance(plan, TagPlan)
        if not as_json:
            click.echo(plan.message)
        _report(fn(*args, dry_run=False, token=plan.token), True, as_json)
        return
    _report(fn(*args, dry_run=not execute, token=token), False, as_json)


_execute = click.option(
    "--execute", is_flag=True, help="Apply the previewed change (with --token)."
)
_token = click.option("--token", default=None, help="The token the preview printed.")
_yes = click.option("--yes", is_flag=True, help="Preview and apply in one go.")
_json = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group(name="manage-tags")
def manage_tags() -> None:
    """Tag many sessions at once: preview first, then apply exactly the previewed set."""


@manage_tags.command(name="find-and-tag")
@click.argument("query")
@click.argument("tag")
@_execute
@_token
@_yes
@_json
@click.pass_context
def find_and_tag(
    ctx: click.Context,
    query: str,
    tag: str,
    execute: bool,
    token: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Tag every session with a message matching QUERY with TAG."""
    _run(ctx, "find_and_tag", (query, tag), execute, token, yes, as_json)


@manage_tags.command(name="delete-tag")
@click.argument("tag")
@_execute
@_token
@_yes
@_json
@click.pass_context
def delete_tag(
    ctx: click.Context, tag: str, execute: bool, token: str | None, yes: bool, as_json: bool
) -> None:
    """Remove TAG from every session."""
    _run(ctx, "delete_tag", (tag,), execute, token, yes, as_json)


@manage_tags.command(name="merge-tags")
@click.argument("tag_from")
@click.argument("tag_to")
@_execute
@_token
@_yes
@_json
@click.pass_context
def merge_tags(
    ctx: click.Context,
    tag_from: str,
    tag_to: str,
    execute: bool,
    token: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Rename TAG_FROM to TAG_TO on every session."""
    _run(ctx, "merge_tags", (tag_from, tag_to), execute, token, yes, as_json)


@click.group()
def catalog() -> None:
    """The cross-session index: sessions with tags, tag counts, rebuild."""


@catalog.command(name="sessions")
@click.option("--tag", default=None, help="Only sessions with this tag.")
@_json
@click.pass_context
def catalog_sessions(ctx: click.Context, tag: str | None, as_json: bool) -> None:
    """Every session with its name, message count and tags, newest first."""
    rows = get_store(ctx).catalog.sessions(tag=tag)
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        tags = f"  [{', '.join(r.tags)}]" if r.tags else ""
        title = r.name or _one_line(r.first_message or "", 60)
        click.echo(f"{r.id}  {r.modified}  {r.message_count:>5}  {title}{tags}")


@catalog.command(name="tags")
@_json
@click.pass_context
def catalog_tags(ctx: click.Context, as_json: bool) -> None:
    """Every session tag with how many sessions carry it."""
    counts = get_store(ctx).catalog.tags()
    if as_json:
        _echo_json(counts)
        return
    if not counts:
        click.echo("No session tags yet.")
    for tag, n in counts.items():
        click.echo(f"{n:>6}  {tag}")


@catalog.command(name="tag")
@click.argument("session_id")
@click.argument("tags", nargs=-1, required=True)
@click.pass_context
def catalog_tag(ctx: click.Context, session_id: str, tags: tuple[str, ...]) -> None:
    """Add TAGS to one session."""
    store = get_store(ctx)
    if not store.exists(session_id):
        from threadline.store.base import not_found

        raise not_found(session_id)
    store.catalog.add_tags(session_id, list(tags))
    click.echo(f"{session_id}: {', '.join(store.catalog.session_tags(session_id))}")


@catalog.command(name="untag")
@click.argument("session_id")
@click.argument("tags", nargs=-1, required=True)
@click.pass_context
def catalog_untag(ctx: click.Context, session_id: str, tags: tuple[str, ...]) -> None:
    """Remove TAGS from one session."""
    store = get_store(ctx)
    store.catalog.remove_tags(session_id, list(tags))
    left = store.catalog.session_tags(session_id)
    click.echo(f"{session_id}: {', '.join(left) if left else '(no tags)'}")


@catalog.command(name="rebuild")
@click.pass_context
def catalog_rebuild(ctx: click.Context) -> None:
    """Re-index every session from the store (session tags are kept)."""
    cat = get_store(ctx).catalog
    cat.rebuild()
    click.echo("Catalog rebuilt.")


@catalog.command(name="index")
@click.pass_context
def catalog_index(ctx: click.Context) -> None:
    """Index every message now (keyword and semantic), showing the progress on stderr."""
    store = get_store(ctx)
    index_catalog(store)
    st = store.catalog.index_status()
    semantic = (
        f"{st.embedded:,} / {st.total:,} with a vector for semantic search"
        if st.semantic
        else "semantic search not installed"
    )
    click.echo(f"{st.messages:,} messages indexed; {semantic}")


@click.group()
def db() -> None:
    """Database stores: schema migrations, packing, scrubbing deleted text."""


@db.command(name="upgrade")
@click.argument("url")
@click.option(
    "--schema", default="public", show_default=True, help="PostgreSQL schema to create or upgrade."
)
def db_upgrade(url: str, schema: str) -> None:
    """Apply the schema migrations a database store (sqlite:///… or postgresql://…) lacks.
    Safe to run again: it applies nothing when the schema is current."""
    if url.startswith(("postgresql:", "postgres:")):
        try:
            from threadline.store.postgres import upgrade
        except ImportError as exc:
            raise UserError(str(exc)) from None
        applied = [f"postgres {v}" for v in upgrade(url, schema)]
    elif url.startswith("sqlite:"):
        from threadline.store.sqlite import connect, sqlite_path
        from threadline.store.sqlite import upgrade as sqlite_upgrade

        conn = connect(sqlite_path(url))
        try:
            applied = [
                f"{track} {v}"
                for track in ("sqlite", "catalog")
                for v in sqlite_upgrade(conn, track)
            ]
        finally:
            conn.close()
    else:
        raise UserError(f"db upgrade takes a sqlite:/// or postgresql:// URL, not {url!r}")
    if applied:
        click.echo(f"Applied migrations: {', '.join(applied)}")
    else:
        click.echo("The schema is up to date; nothing to apply.")


@db.command(name="pack")
@click.argument("url")
@click.option("--no-vacuum", is_flag=True, help="Leave the freed pages in the file (no VACUUM).")
def db_pack(url: str, no_vacuum: bool) -> None:
    """Pack a SQLite store's records written before schema version 4 (or with pack=False) in
    place, as new ones are written, then VACUUM the file. Safe to run again and while
    sessions are written."""
    if not url.startswith("sqlite:"):
        raise UserError(f"db pack takes a sqlite:/// URL, not {url!r}")
    from threadline.store.sqlite import pack_rows, sqlite_path

    rows, before, after = pack_rows(sqlite_path(url), vacuum=not no_vacuum)
    if rows:
        click.echo(f"Packed {rows:,} records: {before:,} bytes of JSON now take {after:,}.")
    else:
        click.echo("Every record is packed already; nothing to do.")


@db.command(name="scrub")
@click.argument("url")
@click.option(
    "--schema",
    default="public",
    show_default=True,
    help="PostgreSQL schema whose tables to rewrite.",
)
def db_scrub(url: str, schema: str) -> None:
    """Rewrite a PostgreSQL store's tables (VACUUM FULL, as their owner) so that text deleted
    or purged leaves the table files; each table is locked while it is rewritten."""
    if not url.startswith(("postgresql:", "postgres:")):
        raise UserError(
            f"db scrub takes a postgresql:// URL, not {url!r}; the JSONL and SQLite "
            "stores scrub during the purge itself"
        )
    try:
        from threadline.store.postgres import scrub
    except ImportError as exc:
        raise UserError(str(exc)) from None
    for line in scrub(url, schema):
        click.echo(f"Still holds deleted text: {line}")


@db.command(name="tenant-role")
@click.argument("url")
@click.argument("tenant")
@click.argument("role")
@click.option(
    "--password",
    default=None,
    help="Password of the role (servers that do not trust local connections).",
)
@click.option("--schema", default="public", show_default=True, help="PostgreSQL schema.")
def db_tenant_role(url: str, tenant: str, role: str, password: str | None, schema: str) -> None:
    """Create the login ROLE of TENANT (role isolation: it reaches that tenant's rows only,
    whatever SQL it runs). Run as the schema's owner; then connect as ROLE with
    open_store(URL, isolation="role")."""
    if not url.startswith(("postgresql:", "postgres:")):
        raise UserError(f"db tenant-role takes a postgresql:// URL, not {url!r}")
    try:
        from threadline.store.postgres import create_tenant_role
    except ImportError as exc:
        raise UserError(str(exc)) from None
    create_tenant_role(url, tenant, role, password=password, schema=schema)
    click.echo(f"Role {role} reaches tenant {tenant!r} only.")
