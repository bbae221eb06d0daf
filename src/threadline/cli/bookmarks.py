"""Bookmark commands: ``tag``, ``tags``, ``undo``, ``clear`` (DESIGN §7).

The ``format_*`` functions build the exact lines both these commands and the chat REPL print
(``Tag 'x' created at position 15``, ``Removed last 2 user messages (5 total messages)``, …).
"""

from __future__ import annotations

from datetime import datetime

import click

from threadline.bookmarks import (
    INVALID,
    OTHER_BRANCH,
    TagEvent,
    TagListing,
    TagStatus,
    UndoResult,
)
from threadline.errors import UserError
from threadline.session import Session

SPECIAL_MARK = "[SPECIAL] "
NAME_WIDTH = 27  # "[SPECIAL] __session_start__"


def clock(timestamp: str) -> str:
    """``HH:MM:SS`` in local time for an RFC 3339 timestamp ('' when it cannot be read)."""
    try:
        stamp = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return ""
    return stamp.astimezone().strftime("%H:%M:%S")


def format_tag_line(t: TagStatus, width: int = NAME_WIDTH) -> str:
    label = (SPECIAL_MARK + t.name) if t.special else t.name
    head = f"  {label:<{width}} → position {t.position:>4}"
    if t.status == INVALID:
        return f"{head} INVALIDATED: {t.reason}"
    when = f" ({clock(t.timestamp)})" if t.timestamp else ""
    if t.status == OTHER_BRANCH:
        return f"{head}{when} on another branch"
    return head + when


def format_listing(listing: TagListing) -> list[str]:
    """The ``Current tags:`` block, then which invalid tags were removed (or only reported)."""
    width = max(
        [NAME_WIDTH] + [len(t.name) + (len(SPECIAL_MARK) if t.special else 0) for t in listing]
    )
    lines = ["Current tags:"] + [format_tag_line(t, width) for t in listing]
    invalid = [t.name for t in listing if t.status == INVALID]
    if listing.removed:
        lines += [
            "",
            f"Removed {len(listing.removed)} invalid tag(s): {', '.join(listing.removed)}",
        ]
    elif invalid:
        lines += [
            "",
            f"Found {len(invalid)} invalid tag(s): {', '.join(invalid)} (not removed: "
            "another process is writing this session)",
        ]
    return lines


def format_tag_created(t: TagStatus, moved: bool) -> str:
    verb = "moved to" if moved else "created at"
    return f"Tag '{t.name}' {verb} position {t.position}"


def _left_behind(r: UndoResult) -> list[str]:
    out = []
    if r.messages_added and not r.switched_branch:
        out.append(
            f"{r.messages_added} earlier messages are back in view (the history before "
            "a compaction)"
        )
    if r.tags_left_behind:
        out.append(f"Tags left behind: {', '.join(r.tags_left_behind)}")
    return out


def format_undo(r: UndoResult, n: int) -> list[str]:
    users = r.user_messages_removed
    noun = "message" if users == 1 else "messages"
    if r.cleared and users == 0:
        head = (
            f"Cleared the view ({r.messages_removed} total messages); it held no user "
            "messages to undo"
        )
    elif r.cleared and n > users:
        head = f"Removed all {users} user {noun} ({r.messages_removed} total messages)"
    else:
        head = f"Removed last {users} user {noun} ({r.messages_removed} total messages)"
    return [head, *_left_behind(r)]


def format_undo_to(r: UndoResult) -> list[str]:
    if r.already_there:
        return [f"Already at tag '{r.tag}' (position {r.position})"]
    if r.switched_branch:
        head = (
            f"Restored to tag '{r.tag}' on another branch (removed {r.messages_removed} "
            f"messages, added {r.messages_added})"
        )
    else:
        head = f"Restored to tag '{r.tag}' (removed {r.messages_removed} messages)"
    return [head, *_left_behind(r)]


def format_clear(r: UndoResult) -> list[str]:
    lines = [
        f"Conversation cleared (removed {r.messages_removed} messages); "
        "the old messages stay in the tree"
    ]
    if r.tags_left_behind:
        lines.append(f"Tags left behind: {', '.join(r.tags_left_behind)}")
    return lines


def parse_position(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise UserError(f"Position must be a whole number, got {value!r}") from None


def _open(ctx: click.Context, session_id: str) -> Session:
    from threadline.cli.main import get_store  # cli.main imports this module

    return get_store(ctx).open(session_id)  # type: ignore[no-any-return]


def _echo(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


def register(cli: click.Group) -> None:
    for cmd in (tag, tags, untag, undo, clear, tag_rename, tag_history, tag_export, tag_import):
        cli.add_command(cmd)


ANONYMOUS = "+"
"""``/tag +`` (``threadline tag ID +``): a new anonymous tag; ``/tag`` alone lists the tags."""


@click.command()
@click.argument("session_id")
@click.argument("name", required=False)
@click.argument("position", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the tag as JSON.")
@click.pass_context
def tag(
    ctx: click.Context, session_id: str, name: str | None, position: str | None, as_json: bool
) -> None:
    """Tag POSITION (default: the end of the conversation) as NAME; NAME '+' makes an anonymous
    tag (tag_1, tag_2, …). Without NAME, list the tags (as 'threadline tags')."""
    from threadline.cli.sessions import echo_json

    with _open(ctx, session_id) as s:
        if name is None:
            listing = s.tags()
            if as_json:
                echo_json(listing)
            else:
                _echo(format_listing(listing))
            return
        wanted = None if name == ANONYMOUS else name
        moved = wanted is not None and wanted in s.state.bookmarks
        t = s.tag(wanted, parse_position(position))
        if as_json:
            echo_json(t)
        else:
            click.echo(format_tag_created(t, moved))


@click.command(name="tag-rename")
@click.argument("session_id")
@click.argument("old")
@click.argument("new")
@click.pass_context
def tag_rename(ctx: click.Context, session_id: str, old: str, new: str) -> None:
    """Rename tag OLD to NEW (it keeps its message and position)."""
    with _open(ctx, session_id) as s:
        t = s.rename_tag(old, new)
    click.echo(f"Tag '{old}' renamed to '{new}' (position {t.position})")


def format_history(events: list[TagEvent]) -> list[str]:
    """One line per step of a tag's history."""
    lines = []
    for e in events:
        when = clock(e.timestamp)
        if e.action == "renamed":
            what = f"renamed from '{e.renamed_from}' to '{e.name}'"
        elif e.action == "removed":
            what = f"'{e.name}' removed"
        else:
            what = (
                f"'{e.name}' {'set at' if e.action == 'set' else 'moved to'} position {e.position}"
            )
        lines.append(f"  {when}  {what}")
    return lines


@click.command(name="tag-history")
@click.argument("session_id")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@click.pass_context
def tag_history(ctx: click.Context, session_id: str, name: str, as_json: bool) -> None:
    """Every move of tag NAME: set, moved, renamed, removed (oldest first)."""
    from threadline.cli.main import get_store
    from threadline.cli.sessions import echo_json

    s = get_store(ctx).open(session_id, read_only=True)
    events = s.tag_history(name)
    if as_json:
        echo_json(events)
    else:
        _echo([f"History of tag '{name}':", *format_history(events)])


@click.command(name="tag-export")
@click.argument("session_id")
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write to this file instead of stdout.",
)
@click.pass_context
def tag_export(ctx: click.Context, session_id: str, output: str | None) -> None:
    """Write the session's tags as JSON (name, position, entry id, hash, timestamp)."""
    import json

    from threadline.cli.main import get_store

    data = (
        json.dumps(
            get_store(ctx).open(session_id, read_only=True).export_tags(),
            ensure_ascii=False,
            indent=2,
        )
        + "\n"
    )
    if output is None:
        click.echo(data, nl=False)
    else:
        with open(output, "w", encoding="utf-8") as f:
            f.write(data)


@click.command(name="tag-import")
@click.argument("session_id")
@click.argument("path", type=click.Path(dir_okay=False, exists=True))
@click.option("--replace", is_flag=True, help="Overwrite tags that exist with the same name.")
@click.pass_context
def tag_import(ctx: click.Context, session_id: str, path: str, replace: bool) -> None:
    """Set the tags of a tag-export file on SESSION_ID (the same session, a fork or a copy)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not JSON ({exc.msg}); give a file tag-export wrote") from None
    with _open(ctx, session_id) as s:
        result = s.import_tags(data, replace=replace)
    click.echo(
        f"Imported {len(result.imported)} tag(s)"
        + (f": {', '.join(result.imported)}" if result.imported else "")
    )
    for name, why in result.skipped.items():
        click.echo(f"Skipped '{name}': {why}")


@click.command()
@click.argument("session_id")
@click.argument("name")
@click.pass_context
def untag(ctx: click.Context, session_id: str, name: str) -> None:
    """Remove the tag NAME (the conversation is not touched)."""
    with _open(ctx, session_id) as s:
        s.untag(name)
        click.echo(f"Tag '{name}' removed")


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def tags(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """List the session's bookmarks with their status; invalid ones are removed."""
    from threadline.cli.sessions import echo_json

    with _open(ctx, session_id) as s:
        listing = s.tags()
        if as_json:
            echo_json(listing)
        else:
            _echo(format_listing(listing))


@click.command()
@click.argument("session_id")
@click.argument("count", required=False, default=None)
@click.option("--to", "to_tag", default=None, metavar="TAG", help="Restore to this tag instead.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def undo(
    ctx: click.Context, session_id: str, count: str | None, to_tag: str | None, as_json: bool
) -> None:
    """Undo the last COUNT user messages (default 1), or go back to a tag with --to TAG
    (a COUNT that is not a number is taken as a tag name)."""
    from threadline.cli.sessions import echo_json

    if count is not None and to_tag is not None:
        raise UserError("Give either a count or --to TAG, not both")
    if count is not None and not count.lstrip("-").isdigit():
        count, to_tag = None, count
    with _open(ctx, session_id) as s:
        if to_tag is not None:
            r = s.undo_to(to_tag)
            lines = format_undo_to(r)
        else:
            n = 1 if count is None else int(count)
            r = s.undo(n)
            lines = format_undo(r, n)
        if as_json:
            echo_json(r)
        else:
            _echo(lines)


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def clear(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Start the conversation over (nothing is deleted; 'threadline tree' still shows it)."""
    from threadline.cli.sessions import echo_json

    with _open(ctx, session_id) as s:
        r = s.clear()
        if as_json:
            echo_json(r)
        else:
            _echo(format_clear(r))


__all__ = [
    "format_clear",
    "format_listing",
    "format_tag_created",
    "format_undo",
    "format_undo_to",
    "register",
]
