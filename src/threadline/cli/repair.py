"""``threadline repair``: answer a session's interrupted tool calls in its log (preview first)."""

from __future__ import annotations

import click

from threadline.cli.sessions import console, echo_json, open_session


def register(cli: click.Group) -> None:
    cli.add_command(repair)


@click.command()
@click.argument("session_id")
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Write the synthetic results (default: preview what would be written).",
)
@click.option("--undo", is_flag=True, help="Revert every repair applied on the current branch.")
@click.option("--tags", "active_tags", default="", help="Comma-separated active tags.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def repair(
    ctx: click.Context, session_id: str, apply_: bool, undo: bool, active_tags: str, as_json: bool
) -> None:
    """Answer tool calls no result answers (interrupted turns) with a synthetic 'interrupted'
    result, so every provider accepts the context as it is. Reversible with --undo."""
    s = open_session(ctx, session_id)
    if undo:
        reverted = s.undo_repair()
        if as_json:
            echo_json({"reverted": reverted})
        else:
            click.echo(
                f"Reverted {len(reverted)} repair operation(s)"
                + "".join(f"\n  {op}" for op in reverted)
            )
        return
    tags = [t for t in active_tags.split(",") if t]
    result = s.repair(apply=apply_, active_tags=tags)
    if as_json:
        echo_json(result)
        return
    out = console()
    if not result.calls:
        out.print("Nothing to repair: every tool call has its result.")
        return
    verb = "Answered" if result.applied else "Would answer"
    out.print(f"{verb} {len(result.calls)} interrupted tool call(s):")
    for c in result.calls:
        out.print(f"  [{c.position}] {c.call_id} ({c.name}) in {c.entry_id}")
    if result.applied:
        out.print(
            f"Wrote {len(result.op_ids)} insert operation(s); undo with "
            f"`threadline repair {s.id} --undo`."
        )
    else:
        out.print(f"Preview only: run `threadline repair {s.id} --apply` to write them.")
