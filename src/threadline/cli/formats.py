"""Commands that cross the store's edge: ``import FORMAT PATH...`` and ``export ID --format``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import msgspec

from threadline.cli.main import get_store
from threadline.cli.sessions import echo_adjustments, send_options
from threadline.errors import UserError
from threadline.formats import PROVIDER_FORMATS

#: what ``export`` writes: every provider format, and the wrapped chat history
EXPORT_FORMATS = (*PROVIDER_FORMATS, "chat_history")


@click.command(name="import")
@click.argument("fmt", metavar="FORMAT")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--session-id",
    default=None,
    help="Id of the new session (one file holding one conversation only).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per created session.")
@click.option(
    "--again",
    is_flag=True,
    help="Import a file even if the store already holds a session imported from it.",
)
@click.pass_context
def import_(
    ctx: click.Context,
    fmt: str,
    paths: tuple[str, ...],
    session_id: str | None,
    as_json: bool,
    again: bool,
) -> None:
    """Import transcripts as new sessions.

    FORMAT is one of pi, claude_code, chatgpt_export, codex, google_adk, chat_history, or auto
    (detected from each file's content). Every file is checked before anything is written, so
    one bad file imports nothing. A file whose content was imported before (same SHA-256) is
    refused, naming the session that holds it, unless --again is given. Prints one line per
    created session: id, entries, messages, warnings; then the warnings themselves on stderr;
    then indexes the new messages for search (progress on stderr).
    """
    from threadline import importing

    if fmt != "auto":
        importing.module(fmt)  # an unknown format fails before any file is read
    if session_id is not None and len(paths) > 1:
        raise UserError("--session-id names one session; import one file at a time with it")
    store = get_store(ctx)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    # every file is read and checked before anything is written: one bad file imports nothing
    drafts = [(path, d) for path in paths for d in importing.prepare(fmt, path)]
    if not again:
        for path in paths:
            held = importing.imported_from(store, importing.content_sha256(path))
            if held:
                raise UserError(
                    f"{path} was already imported as session {', '.join(held)}; "
                    "nothing was imported (add --again to import it anyway)"
                )
    if session_id is not None and len(drafts) > 1:
        raise UserError(
            f"{paths[0]} holds {len(drafts)} conversations; --session-id names one "
            "session, so leave it out"
        )
    # written without opening the new sessions: a draft counts its entries and messages, so a
    # million-entry import never loads the session it wrote
    created = importing.create(
        store, [d for _, d in drafts], [session_id] * len(drafts) if session_id else None
    )
    for (path, draft), sid in zip(drafts, created, strict=True):
        report = draft.report
        row: dict[str, Any] = {
            "session_id": sid,
            "source": path,
            "format": report.format,
            "source_id": report.source_id,
            "entries": draft.entries,
            "messages": draft.messages,
        }
        if as_json:  # the context is built from the session, so only --json opens it
            s = store.open(sid, read_only=True)
            try:
                row["context_messages"] = len(s.context().messages)
            finally:
                s.close()
        row["warnings"] = report.problems
        row["report"] = msgspec.to_builtins(report)
        rows.append(row)
        notes.extend(report.lines())
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        for row in rows:
            click.echo(
                f"{row['session_id']}  {row['entries']} entries  {row['messages']} "
                f"messages  {row['warnings']} warnings  ({row['format']}: {row['source']})"
            )
    for note in notes:
        click.echo(note, err=True)
    # index now, with visible progress, so the first search answers at once
    from threadline.cli.catalog import index_catalog

    index_catalog(store)


@click.command()
@click.argument("session_id")
@click.option(
    "--format",
    "fmt",
    required=True,
    type=click.Choice(EXPORT_FORMATS),
    help="Payload format: a provider's message list or chat_history (wrapped).",
)
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write to this file instead of stdout.",
)
@click.option("--leaf", default=None, help="Export the context at this entry.")
@click.option(
    "--no-validate", is_flag=True, help="Write the dump even when it breaks the provider's rules."
)
@send_options
@click.pass_context
def export(
    ctx: click.Context,
    session_id: str,
    fmt: str,
    output: str | None,
    leaf: str | None,
    no_validate: bool,
    explain: bool,
    strict: bool,
    dangling: str,
) -> None:
    """Write a session's context (what the model sees) in another format."""
    from threadline.cli.sessions import open_session, resolve_entry

    s = open_session(ctx, session_id, read_only=True)
    context = s.context(resolve_entry(s, leaf) if leaf else None)
    messages = list(context.messages)
    if fmt == "chat_history":
        from threadline.formats import chat_history

        # entry ids and timestamps carry over, so an imported history exports as it came
        ids = context.view.ids()
        stamps = [(s.entry(i).timestamp or "") if s.has_entry(i) else "" for i in ids]
        payload: Any = chat_history.dump(messages, ids=ids, timestamps=stamps)
    else:
        from threadline import formats

        module = formats.get(fmt)
        dumped = module.dump(messages, strict=strict, report=True, dangling=dangling)
        payload = dumped.payload
        if explain:
            echo_adjustments(dumped.adjustments, fmt)
        if not no_validate:
            try:
                module.validate(payload)
            except UserError as exc:
                raise UserError(
                    f"Session '{session_id}' does not make a valid {fmt} payload: "
                    f"{exc}; pass --no-validate to write it anyway"
                ) from None
    data = json.dumps(payload, ensure_ascii=False, indent=2) + "\n"
    if output is None:
        sys.stdout.write(data)
    else:
        Path(output).write_text(data, encoding="utf-8")
        click.echo(f"wrote {output} ({len(messages)} messages, {fmt})", err=True)


@click.command(name="migrate-chat-history")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def migrate_chat_history(path: str, as_json: bool) -> None:
    """Migrate a chat_history.json to the wrapped format (backup first) and report statistics.

    An old-layout file (a plain list of OpenAI Responses items) gets a timestamped backup beside
    it, then every item is wrapped with id, ts, type and size; a wrapped file is left as it is.
    Either way the statistics of the history are printed."""
    from threadline.formats import chat_history

    report = chat_history.migrate_report(path)
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    if report["migrated"]:
        click.echo(f"Migrated {path} to the wrapped format")
        click.echo(f"Backup: {report['backup']}")
    else:
        click.echo(f"{path} is already in the wrapped format; nothing to migrate")
    click.echo(f"Total entries: {report['total_entries']}")
    click.echo(f"Total size: {report['total_size_kb']} KB")
    click.echo("By type:")
    for kind, row in report["stats_by_type"].items():
        click.echo(f"  {kind:<22}{row['count']:>6} entries {row['size']:>10,} bytes")
    click.echo(f"Oldest: {report['oldest'] or '-'}")
    click.echo(f"Newest: {report['newest'] or '-'}")
    sizes = ", ".join(f"{k}: {v}" for k, v in report["size_distribution"].items())
    click.echo(f"Sizes: {sizes}")


def register(cli: click.Group) -> None:
    cli.add_command(import_)
    cli.add_command(export)
    cli.add_command(migrate_chat_history)
