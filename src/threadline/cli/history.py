"""History tools: ``threadline metadata ID``, ``threadline purge ID [ENTRY...] [--all] [--yes]``."""

from __future__ import annotations

import click

from threadline.cli.sessions import console, echo_json, open_session, resolve_entry
from threadline.history import PurgePlan


def register(cli: click.Group) -> None:
    for cmd in (metadata, purge):
        cli.add_command(cmd)


@click.command()
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def metadata(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Id, timestamp, type (a message's content type) and size of every entry."""
    rows = open_session(ctx, session_id, read_only=True).metadata()
    if as_json:
        echo_json(rows)
        return
    out = console()
    for m in rows:
        out.print(f"{m.id}  {m.timestamp}  {m.type:<20} {m.size:>10,} bytes")


def _print_plan(plan: PurgePlan) -> None:
    out = console()
    verb = "Purged" if plan.executed else "Would purge"
    out.print(
        f"{verb} {len(plan.entry_ids)} entries ({plan.bytes:,} bytes) from session "
        f"{plan.session_id}:"
    )
    for item in plan.items:
        note = "  (already purged)" if item.already_purged else ""
        out.print(f"  {item.id}  {item.type:<15} {item.bytes:>10,} bytes{note}")
    for eid in plan.pending:
        out.print(f"  {eid}  (left on disk by an interrupted purge)")
    if plan.also_leaving_view:
        out.print(
            "Also leaving the view (tool call or result whose partner is purged): "
            + ", ".join(plan.also_leaving_view)
        )
    if plan.summarized:
        out.print(
            "Summaries made from purged entries (their summary is removed): "
            + ", ".join(plan.summarized)
        )
    copied = [e for e in plan.derived if e not in plan.summarized]
    if copied:
        out.print(
            "Summaries that copied purged text (the copied text becomes [purged]): "
            + ", ".join(copied),
            markup=False,
        )
    if plan.files:
        out.print("Other files cleaned: " + ", ".join(plan.files))
    for note in plan.residue:
        out.print(f"Still holds the purged text: {note}")
    if not plan.executed:
        out.print(
            "Nothing was changed. Run again with --yes to purge; the content cannot be "
            "recovered afterwards."
        )


@click.command()
@click.argument("session_id")
@click.argument("entry_ids", nargs=-1)
@click.option("--all", "purge_all", is_flag=True, help="Purge every entry of the session.")
@click.option("--yes", is_flag=True, help="Really purge (without it: preview only).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_context
def purge(
    ctx: click.Context,
    session_id: str,
    entry_ids: tuple[str, ...],
    purge_all: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Remove entries' content from disk for good (preview unless --yes).

    The entries keep their id, parent and timestamp, so the tree stays whole; their payload
    becomes a purge marker, and backups, torn tails and search indexes lose the content too.
    Compactions, branch summaries and digests that copied purged text keep their summary with
    the copied text replaced by [purged].
    """
    session = open_session(ctx, session_id, read_only=not yes)
    try:
        ids = [resolve_entry(session, e) for e in entry_ids]
        plan = session.purge(ids or None, all=purge_all, dry_run=not yes)
    finally:
        session.close()
    if as_json:
        echo_json(plan)
    else:
        _print_plan(plan)
