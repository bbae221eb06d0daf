"""Core commands: sessions, new, show, tree, context, say, branch, label, fork, stats."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.markup import escape

from threadline.cli.main import get_store
from threadline.errors import UserError
from threadline.render import block_text, message_text, one_line
from threadline.session import FlatNode, Session
from threadline.stores import open_path, open_store


def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def echo_json(value: Any) -> None:
    sys.stdout.write(json.dumps(msgspec.to_builtins(value), ensure_ascii=False, indent=2) + "\n")


def open_session(ctx: click.Context, session_id: str, *, read_only: bool = False) -> Session:
    """Open a session for a command, by id in the store or by a session file's path
    (``threadline show runs/abc.jsonl``, opened where it lives); a damaged file's load report
    goes to stderr, as the viewer shows it, so no command silently shows less than the file
    holds."""
    s: Session
    if session_id.endswith(".jsonl"):
        s = open_path(session_id, read_only=read_only)
    else:
        s = get_store(ctx).open(session_id, read_only=read_only)
    for line in load_report_lines(s):
        click.echo(line, err=True)
    return s


def load_report_lines(s: Session) -> list[str]:
    """What loading skipped or repaired, one line each (empty for a clean file)."""
    rep = s.load_report
    if rep.clean:
        return []
    out = [f"Warning: session '{s.id}' is damaged; what could be read is shown:"]
    for line_no, why in rep.corrupt_lines[:10]:
        where = f"line {line_no}" if line_no >= 0 else "record"
        out.append(f"  corrupt {where} skipped: {one_line(why, 100)}")
    if len(rep.corrupt_lines) > 10:
        out.append(f"  … and {len(rep.corrupt_lines) - 10} more corrupt lines")
    for label, ids in (
        ("duplicate id kept once", rep.duplicate_ids),
        ("orphan (unknown parent) made a root", rep.orphans),
        ("parent cycle broken at", rep.cycles),
        ("leaf record with unknown target ignored", rep.unknown_leaf),
    ):
        if ids:
            more = f" (+{len(ids) - 5} more)" if len(ids) > 5 else ""
            out.append(f"  {label}: {', '.join(ids[:5])}{more}")
    if rep.torn_bytes:
        out.append(f"  torn tail: {rep.torn_bytes} bytes after the last complete line")
    return out


def resolve_entry(s: Session, ref: str) -> str:
    """An entry id from an id, a unique id prefix or a label (what every command taking an
    entry accepts, as the REPL does)."""
    if s.has_entry(ref):
        return ref
    by_label = [eid for eid, lab in s.labels().items() if lab == ref]
    if len(by_label) == 1:
        return by_label[0]
    if len(by_label) > 1:
        raise UserError(f"Label '{ref}' is on {len(by_label)} entries; give an id instead")
    matches = [eid for eid in s.entry_ids() if eid.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(
            f"No entry '{ref}' (id, unique id prefix or label) in session "
            f"'{s.id}'; 'threadline tree {s.id}' shows the entry ids"
        )
    raise UserError(
        f"Entry prefix '{ref}' matches {len(matches)} entries in session '{s.id}'; "
        "give more of the id"
    )


__all__ = [
    "block_text",
    "console",
    "echo_adjustments",
    "echo_json",
    "entry_summary",
    "load_report_lines",
    "message_text",
    "one_line",
    "open_session",
    "register",
    "resolve_entry",
    "send_options",
    "tree_lines",
]


def entry_summary(entry: Any) -> str:
    """One line describing a tree entry (tree views, listings)."""
    kind = entry.type
    p = entry.payload
    if kind == "message":
        return f"{p.role}: {one_line(message_text(p))}"
    if kind == "compaction":
        return f"[compaction] {one_line(p.summary, 60)} (kept from {p.first_kept_entry_id})"
    if kind == "branch_summary":
        return f"[branch summary] {one_line(p.summary, 60)}"
    if kind == "model_change":
        return f"[model] {p.provider}/{p.model_id}"
    if kind == "thinking_level":
        return f"[thinking] {p.thinking_level}"
    if kind == "label":
        return f"[label] {p.target_id} = {p.label or '(cleared)'}"
    if kind == "session_info":
        return f"[name] {p.name}"
    if kind == "custom":
        return f"[custom] {p.custom_type}"
    if kind == "context_op":
        return f"[op] {p.kind}"
    if isinstance(p, dict) and p.get("purged"):
        return f"[{kind}, purged]"
    return f"[{kind}]"


def register(cli: click.Group) -> None:
    for cmd in (sessions, new, show, tree, context, say, branch, label, fork, stats):
        cli.add_command(cmd)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def sessions(ctx: click.Context, as_json: bool) -> None:
    """List sessions, most recently modified first."""
    rows = get_store(ctx).list()
    # unreadable sessions are named on stderr (stdout stays the listing, JSON or not)
    for sid, reason in rows.skipped:
        click.echo(f"Skipped unreadable session '{sid}': {reason}", err=True)
    if as_json:
        echo_json(list(rows))
        return
    out = console()
    if not rows:
        out.print("No sessions. Create one with: threadline new")
        return
    for r in rows:
        name = f" {escape(r.name)}" if r.name else ""
        first = escape(one_line(r.first_message or "", 50))
        flag = f"  [red]DAMAGED: {escape(r.damaged)}[/red]" if r.damaged else ""
        out.print(
            f"{r.id}{name}  {r.modified}  {r.message_count} messages in the file  {first}{flag}"
        )


@click.command()
@click.option("--name", default=None, help="A display name for the session.")
@click.option("--id", "session_id", default=None, help="Use this session id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def new(ctx: click.Context, name: str | None, session_id: str | None, as_json: bool) -> None:
    """Create a session and print its id."""
    with get_store(ctx).create(session_id=session_id) as s:
        if name:
            s.append_session_info(name)
        if as_json:
            echo_json({"id": s.id, "name": name})
        else:
            click.echo(s.id)


@click.command()
@click.argument("session_id")
@click.option("--leaf", default=None, help="Show the context at this entry instead of the leaf.")
@click.option("--tags", "active_tags", default="", help="Comma-separated active tags.")
@click.option(
    "--infer-tags", is_flag=True, help="Also activate the tags the latest user turns point at."
)
@click.pass_context
def show(
    ctx: click.Context, session_id: str, leaf: str | None, active_tags: str, infer_tags: bool
) -> None:
    """Print the context (what the model sees) as readable text."""
    s = open_session(ctx, session_id, read_only=True)
    tags = [t for t in active_tags.split(",") if t]
    if infer_tags:
        from threadline.relevance import infer_active_tags

        inferred = infer_active_tags(s)
        tags = sorted({*tags, *inferred})
        click.echo(f"Inferred tags: {', '.join(inferred) or '-'}")
    c = s.context(resolve_entry(s, leaf) if leaf else None, active_tags=tags)
    out = console()
    title = f" ({escape(s.name)})" if s.name else ""
    model = f"{c.model.provider}/{c.model.model_id}" if c.model else "-"
    # the three counts differ for good reasons (compaction, branches, non-message entries);
    # each is named, as in 'sessions' and 'stats'
    out.print(
        f"Session {s.id}{title}: {len(s.entry_ids())} entries, {s.message_count()} "
        f"messages in the file, {len(c.messages)} in context; model {model}, "
        f"thinking {c.thinking_level}"
    )
    for line_no, problem in s.load_report.corrupt_lines[:20]:
        click.echo(f"warning: line {line_no} skipped: {problem}", err=True)
    for i, (msg, item) in enumerate(zip(c.messages, c.view, strict=True)):
        marks = f" #{' #'.join(item.tags)}" if item.tags else ""
        out.print(f"[bold][{i}] {msg.role}[/bold] {escape(item.id)}{escape(marks)}")
        for line in message_text(msg).splitlines() or [""]:
            out.print("    " + escape(line))


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the flat tree as JSON.")
@click.option(
    "--bookkeeping",
    is_flag=True,
    help="Show bookkeeping entries (custom records such as progress lines, labels) "
    "instead of one line per run of them.",
)
@click.pass_context
def tree(ctx: click.Context, session_id: str, as_json: bool, bookkeeping: bool) -> None:
    """Print the session tree with its branches drawn as lanes (like git log --graph):
    '●' an entry, '│' a branch waiting below, '╮' where a branch starts; '•' marks the current
    path, '*' the leaf. Runs of bookkeeping entries are one line unless --bookkeeping."""
    s = open_session(ctx, session_id, read_only=True)
    if as_json:
        echo_json([n for n in s.tree(flat=True) if isinstance(n, FlatNode)])
        return
    out = console()
    for line in tree_lines(s, bookkeeping=bookkeeping):
        out.print(escape(line))


def tree_lines(s: Session, *, bookkeeping: bool = False) -> list[str]:
    """The session tree as text lines with lanes (the CLI's ``tree`` and the REPL's /tree)."""
    from threadline.treeview import TreeShape, graph_prefix, lane_width, layout

    labels = s.labels()
    leaf = s.leaf_id
    keep = set(labels) | ({leaf} if leaf else set())
    rows = layout(
        TreeShape(s.metadata(content_types=False)), keep=keep, hide_bookkeeping=not bookkeeping
    )
    on_path = set(s.path_ids())
    width = lane_width(rows)
    lines = []
    for r in rows:
        mark = "*" if r.id == leaf else ("•" if r.id in on_path else " ")
        graph = graph_prefix(r, width)
        if r.run:
            kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(r.run_types.items()))
            lines.append(f"{mark} {graph} … {r.run} bookkeeping entries ({kinds})")
            continue
        lab = f" [{labels[r.id]}]" if r.id in labels else ""
        lines.append(f"{mark} {graph} {r.id}{lab} {entry_summary(s.entry(r.id))}")
    return lines


SEND_OPTIONS = (
    click.option(
        "--explain",
        is_flag=True,
        help="With --format: list on stderr each adjustment the send policy made.",
    ),
    click.option(
        "--strict",
        is_flag=True,
        help="With --format: refuse a history the send policy would adjust.",
    ),
    click.option(
        "--dangling",
        type=click.Choice(["answer", "drop"]),
        default="answer",
        show_default=True,
        help="With --format: answer an interrupted tool call with a synthetic result, "
        "or drop the call.",
    ),
)


def send_options(fn: Any) -> Any:
    """The send-policy options of every command that builds a provider payload."""
    for option in reversed(SEND_OPTIONS):
        fn = option(fn)
    return fn


def echo_adjustments(adjustments: Sequence[Any], fmt: str) -> None:
    """The send policy's adjustments, one per line on stderr (stdout keeps the payload)."""
    for a in adjustments:
        click.echo(f"adjusted {a}", err=True)
    click.echo(f"{len(adjustments)} adjustment(s) for {fmt}", err=True)


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="JSON in the file format's shape.")
@click.option(
    "--format",
    "fmt",
    default=None,
    help="Dump in a provider format (openai_chat, openai_responses, anthropic, "
    "gemini, bedrock), adjusted by the send policy.",
)
@click.option("--leaf", default=None, help="Build the context at this entry.")
@click.option("--tags", "active_tags", default="", help="Comma-separated active tags.")
@send_options
@click.pass_context
def context(
    ctx: click.Context,
    session_id: str,
    as_json: bool,
    fmt: str | None,
    leaf: str | None,
    active_tags: str,
    explain: bool,
    strict: bool,
    dangling: str,
) -> None:
    """Print the context messages (default and --json: the file format's shape)."""
    s = open_session(ctx, session_id, read_only=True)
    c = s.context(
        resolve_entry(s, leaf) if leaf else None,
        active_tags=[t for t in active_tags.split(",") if t],
    )
    if fmt:
        from threadline import formats

        dumped = formats.dump_context(
            fmt,
            list(c.messages),
            strict=strict,
            report=True,
            dangling="drop" if dangling == "drop" else "answer",
        )
        echo_json(dumped.payload)
        if explain:
            echo_adjustments(dumped.adjustments, fmt)
        return
    if explain or strict:
        raise UserError("--explain and --strict apply to a provider payload; add --format NAME")
    echo_json(
        {
            "session_id": s.id,
            "leaf_id": c.leaf_id,
            "model": c.model,
            "thinking_level": c.thinking_level,
            "messages": list(c.messages),
            "view": list(c.view),
        }
        if as_json
        else list(c.messages)
    )


@click.command()
@click.argument("session_id")
@click.argument("role")
@click.argument("text", required=False)
@click.option(
    "--json-content",
    default=None,
    help="Content as JSON (a list of blocks in the file format's shape).",
)
@click.pass_context
def say(
    ctx: click.Context, session_id: str, role: str, text: str | None, json_content: str | None
) -> None:
    """Append a message (TEXT, or '-' to read stdin) and print its entry id."""
    if json_content is not None:
        try:
            content: Any = json.loads(json_content)
        except json.JSONDecodeError as exc:
            raise UserError(f"--json-content is not valid JSON: {exc}") from None
    elif text == "-":
        content = sys.stdin.read()
    elif text is None:
        raise UserError("Give the message text, '-' for stdin, or --json-content")
    else:
        content = text
    with open_session(ctx, session_id) as s:
        click.echo(s.append_message(role, content))


@click.command()
@click.argument("session_id")
@click.argument("entry_id")
@click.option("--summary", default=None, help="Append a summary of the abandoned branch.")
@click.pass_context
def branch(ctx: click.Context, session_id: str, entry_id: str, summary: str | None) -> None:
    """Move the leaf to ENTRY_ID ('root' for before the first entry)."""
    with open_session(ctx, session_id) as s:
        if entry_id != "root":
            entry_id = resolve_entry(s, entry_id)
        if summary is not None:
            sid = s.branch_with_summary(None if entry_id == "root" else entry_id, summary)
            click.echo(f"Branched to {entry_id} with summary {sid}")
        elif entry_id == "root":
            s.reset_leaf()
            click.echo("Leaf reset: the next message starts a new root")
        else:
            s.branch(entry_id)
            click.echo(f"Leaf moved to {entry_id}")


@click.command()
@click.argument("session_id")
@click.argument("entry_id")
@click.argument("text", required=False, default="")
@click.pass_context
def label(ctx: click.Context, session_id: str, entry_id: str, text: str) -> None:
    """Label ENTRY_ID with TEXT (no TEXT clears the label)."""
    with open_session(ctx, session_id) as s:
        entry_id = resolve_entry(s, entry_id)
        s.set_label(entry_id, text or None)
        click.echo(f"Label on {entry_id}: {text}" if text else f"Label on {entry_id} cleared")


@click.command()
@click.argument("session_id")
@click.option(
    "--at", "leaf", default=None, help="Copy only the path to this entry (a branched session)."
)
@click.option(
    "--from-store",
    "from_store",
    default=None,
    help="Fork SESSION_ID of this other store (a URL) into --store.",
)
@click.pass_context
def fork(ctx: click.Context, session_id: str, leaf: str | None, from_store: str | None) -> None:
    """Copy a session into a new one and print the new id. SESSION_ID may be a session file's
    path (fork_from: the copy goes into --store)."""
    store = get_store(ctx)
    if from_store is not None or session_id.endswith(".jsonl"):
        if leaf:
            raise UserError("--at works within one store; fork first, then branch the copy")
        if session_id.endswith(".jsonl"):
            source = open_path(session_id, read_only=True)
        else:
            source = open_store(from_store).open(session_id, read_only=True)
        click.echo(store.fork_from(source).id)
        return
    if leaf:
        with open_session(ctx, session_id, read_only=True) as src:
            new_session = src.create_branched_session(resolve_entry(src, leaf))
    else:
        new_session = store.fork(session_id)
    click.echo(new_session.id)


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def stats(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Entry counts and sizes by type, time range, size distribution, largest entries."""
    st = open_session(ctx, session_id, read_only=True).stats()
    if as_json:
        echo_json(st)
        return
    out = console()
    out.print(f"Session {st['session_id']}" + (f" ({escape(st['name'])})" if st["name"] else ""))
    out.print(
        f"  entries: {st['entries']:,}   bytes: {st['bytes']:,}   file: {st['file_bytes']:,} bytes"
    )
    out.print(f"  oldest: {st['oldest']}   newest: {st['newest']}")
    out.print(
        f"  messages in context: {st['context_messages']}   branch points: {st['branches']}"
        f"   labels: {st['labels']}"
    )
    for kind, row in st["by_type"].items():
        out.print(f"  {kind:<15} {row['count']:>8,} entries {row['bytes']:>12,} bytes")
    dist = ", ".join(f"{k}: {v}" for k, v in st["size_distribution"].items())
    out.print(f"  sizes: {dist}")
    for big in st["largest"]:
        out.print(f"  largest: {big['id']} {big['type']} {big['size']:,} bytes")
