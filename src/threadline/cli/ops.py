"""Context operations: ``threadline ops list|digest|revise|snip|resequence|insert|tag|toggle|
revert|expand|collapse|relevance``.

Positions are 0-based indices of the view ``threadline show ID`` prints (with the same ``--tags``
as ``--active-tags`` here); ranges are inclusive.
"""

from __future__ import annotations

import json
from typing import Any

import click

from threadline.cli.sessions import console, echo_json, open_session, resolve_entry
from threadline.errors import UserError
from threadline.operations import OperationInfo


def register(cli: click.Group) -> None:
    cli.add_command(ops)


def _tags(value: str) -> list[str] | None:
    tags = [t.strip() for t in value.split(",") if t.strip()]
    return tags or None


def _json_messages(value: str) -> Any:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"MESSAGES_JSON is not valid JSON ({exc.msg} at {exc.pos}); give a "
            'list like [{"role": "user", "content": "…"}]'
        ) from None
    return data


_cond = click.option(
    "--if-tags",
    "if_tags",
    default="",
    help="Comma-separated tags: the op applies only when one is active.",
)
_active = click.option(
    "--active-tags",
    "active_tags",
    default="",
    help="Comma-separated tags the positions' view is computed with.",
)


@click.group()
def ops() -> None:
    """Reversible edits of what the model sees (digest, revise, snip, resequence, insert)."""


def _done(op_id: str) -> None:
    click.echo(op_id)


@ops.command("list")
@click.argument("session_id")
@click.option("--active-only", is_flag=True, help="Only ops whose state is active.")
@_active
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_ops(
    ctx: click.Context, session_id: str, active_only: bool, active_tags: str, as_json: bool
) -> None:
    """Every operation with its state and standing."""
    rows: list[OperationInfo] = open_session(ctx, session_id, read_only=True).operations(
        active_only=active_only, active_tags=_tags(active_tags)
    )
    if as_json:
        echo_json(rows)
        return
    out = console()
    if not rows:
        out.print("No operations.")
    for r in rows:
        cond = f" if {','.join(r.tags)}" if r.tags else ""
        why = f" ({r.reason})" if r.reason else ""
        out.print(f"{r.id}  {r.kind:<10} {r.state:<8} {r.standing}{why}{cond}")


@ops.command()
@click.argument("session_id")
@click.argument("start", type=int)
@click.argument("end", type=int)
@click.argument("summary")
@_cond
@_active
@click.pass_context
def digest(
    ctx: click.Context,
    session_id: str,
    start: int,
    end: int,
    summary: str,
    if_tags: str,
    active_tags: str,
) -> None:
    """Replace positions START..END with one system message holding SUMMARY."""
    with open_session(ctx, session_id) as s:
        _done(s.digest(start, end, summary, tags=_tags(if_tags), active_tags=_tags(active_tags)))


@ops.command()
@click.argument("session_id")
@click.argument("start", type=int)
@click.argument("end", type=int)
@click.argument("messages_json")
@_cond
@_active
@click.pass_context
def revise(
    ctx: click.Context,
    session_id: str,
    start: int,
    end: int,
    messages_json: str,
    if_tags: str,
    active_tags: str,
) -> None:
    """Replace positions START..END with MESSAGES_JSON (a JSON list of {role, content})."""
    with open_session(ctx, session_id) as s:
        _done(
            s.revise(
                start,
                end,
                _json_messages(messages_json),
                tags=_tags(if_tags),
                active_tags=_tags(active_tags),
            )
        )


@ops.command()
@click.argument("session_id")
@click.argument("start", type=int)
@click.argument("end", type=int)
@_cond
@_active
@click.pass_context
def snip(
    ctx: click.Context, session_id: str, start: int, end: int, if_tags: str, active_tags: str
) -> None:
    """Remove positions START..END from the view."""
    with open_session(ctx, session_id) as s:
        _done(s.snip(start, end, tags=_tags(if_tags), active_tags=_tags(active_tags)))


@ops.command()
@click.argument("session_id")
@click.argument("new_order", nargs=-1, type=int, required=True)
@_cond
@_active
@click.pass_context
def resequence(
    ctx: click.Context, session_id: str, new_order: tuple[int, ...], if_tags: str, active_tags: str
) -> None:
    """Reorder a contiguous range: NEW_ORDER lists its positions in their new order."""
    with open_session(ctx, session_id) as s:
        _done(s.resequence(list(new_order), tags=_tags(if_tags), active_tags=_tags(active_tags)))


@ops.command()
@click.argument("session_id")
@click.argument("after", type=int)
@click.argument("messages_json")
@_cond
@_active
@click.pass_context
def insert(
    ctx: click.Context,
    session_id: str,
    after: int,
    messages_json: str,
    if_tags: str,
    active_tags: str,
) -> None:
    """Insert MESSAGES_JSON (a JSON list of {role, content}) after position AFTER (-1: front)."""
    with open_session(ctx, session_id) as s:
        _done(
            s.insert(
                after,
                _json_messages(messages_json),
                tags=_tags(if_tags),
                active_tags=_tags(active_tags),
            )
        )


@ops.command("tag")
@click.argument("session_id")
@click.argument("start", type=int)
@click.argument("end", type=int)
@click.argument("tags", nargs=-1, required=True)
@click.option("--remove", is_flag=True, help="Remove the tags instead of adding them.")
@_active
@click.pass_context
def tag(
    ctx: click.Context,
    session_id: str,
    start: int,
    end: int,
    tags: tuple[str, ...],
    remove: bool,
    active_tags: str,
) -> None:
    """Tag the messages at positions START..END (the tags show in the view)."""
    with open_session(ctx, session_id) as s:
        n = s.tag_messages(start, end, list(tags), remove=remove, active_tags=_tags(active_tags))
    click.echo(f"{'Untagged' if remove else 'Tagged'} {n} messages")


@ops.command()
@click.argument("session_id")
@click.argument("op_id")
@click.argument("switch", type=click.Choice(["on", "off"]))
@click.pass_context
def toggle(ctx: click.Context, session_id: str, op_id: str, switch: str) -> None:
    """Switch an operation on or off."""
    with open_session(ctx, session_id) as s:
        info = s.toggle(resolve_entry(s, op_id), switch == "on")
    click.echo(f"{info.id} {info.state} {info.standing}")


@ops.command()
@click.argument("session_id")
@click.argument("op_id")
@click.pass_context
def revert(ctx: click.Context, session_id: str, op_id: str) -> None:
    """Switch an operation off and mark it reverted (toggle on brings it back)."""
    with open_session(ctx, session_id) as s:
        info = s.revert(resolve_entry(s, op_id))
    click.echo(f"{info.id} {info.state} {info.standing}")


@ops.command()
@click.argument("session_id")
@click.argument("op_id")
@click.pass_context
def expand(ctx: click.Context, session_id: str, op_id: str) -> None:
    """Show the originals of a revise or snip in place, between its markers."""
    with open_session(ctx, session_id) as s:
        info = s.expand(op_id)
    click.echo(f"{info.id} expanded")


@ops.command()
@click.argument("session_id")
@click.argument("op_id")
@click.pass_context
def collapse(ctx: click.Context, session_id: str, op_id: str) -> None:
    """Hide the originals of an expanded revise or snip again."""
    with open_session(ctx, session_id) as s:
        info = s.collapse(op_id)
    click.echo(f"{info.id} collapsed")


@ops.command()
@click.argument("session_id")
@click.argument("objective")
@click.option(
    "--threshold",
    default=0.2,
    show_default=True,
    type=float,
    help="Messages scoring below this are candidates.",
)
@click.option("--snip", "use_snip", is_flag=True, help="Propose snips instead of digests.")
@click.option(
    "--keep-recent",
    default=4,
    show_default=True,
    type=int,
    help="The newest messages never proposed.",
)
@click.option("--apply", "do_apply", is_flag=True, help="Write the proposed operations.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_context
def relevance(
    ctx: click.Context,
    session_id: str,
    objective: str,
    threshold: float,
    use_snip: bool,
    keep_recent: int,
    do_apply: bool,
    as_json: bool,
) -> None:
    """Score every message against OBJECTIVE (the catalog's embedder) and propose digests (or
    snips) of the least relevant stretches; --apply writes them (reversible)."""
    from threadline import relevance as rel

    with open_session(ctx, session_id, read_only=not do_apply) as s:
        plan = rel.propose(
            s,
            objective,
            threshold=threshold,
            action="snip" if use_snip else "digest",
            keep_recent=keep_recent,
        )
        if do_apply and plan.proposals:
            plan = rel.apply(s, plan)
    if as_json:
        echo_json(plan)
        return
    out = console()
    for sc in plan.scores:
        out.print(f"[{sc.position}] {sc.score:+.3f} {sc.role:<9} {sc.preview}", markup=False)
    if not plan.proposals:
        out.print(f"Nothing scores below {threshold} for long enough; no operation proposed.")
    for k, p in enumerate(plan.proposals):
        done = f" -> {plan.applied[k]}" if plan.applied else ""
        out.print(
            f"{'Applied' if plan.applied else 'Proposed'}: {p.kind} {p.start}-{p.end} "
            f"(best score {p.score:+.3f}){done}",
            markup=False,
        )
    if plan.proposals and not plan.applied:
        out.print("Nothing was written; run again with --apply to write these operations.")
