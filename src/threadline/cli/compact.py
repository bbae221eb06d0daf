"""``threadline compact``: show the cut point and what would be summarized, then compact."""

from __future__ import annotations

from typing import Any

import click

from threadline.cli.main import get_store
from threadline.compaction import (
    DEFAULT_KEEP_RECENT_TOKENS,
    CompactionPlan,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    compact,
    first_line,
    prepare_compaction,
    session_tokens,
)
from threadline.errors import UserError
from threadline.model.content import Message
from threadline.tokens import estimate_message


def _describe(m: Message) -> str:
    if m.text.strip():
        body = first_line(m.text, 70)
    elif m.tool_uses:
        body = "→ " + ", ".join(u.name for u in m.tool_uses)
    elif m.tool_results:
        body = f"← {len(m.tool_results)} tool result(s)"
    else:
        body = "(no text)"
    return f"{m.role}: {body}"


def plan_lines(plan: CompactionPlan, show: int = 10) -> list[str]:
    """The human-readable preview of a compaction plan."""
    summarized = plan.messages_to_summarize
    sum_tokens = sum(estimate_message(m) for m in summarized)
    lines = [
        f"Context: {plan.tokens_before} tokens",
        f"Cut point: keep from entry {plan.first_kept_entry_id} "
        f"({len(plan.kept_ids)} entries, ~{plan.kept_tokens} tokens kept)",
    ]
    if plan.is_split_turn:
        lines.append(
            f"Split turn: its first {len(plan.turn_prefix)} message(s) are summarized "
            "separately (## Turn in progress)"
        )
    if plan.previous_compaction_id:
        lines.append(
            f"Previous compaction: {plan.previous_compaction_id} (its summary is carried forward)"
        )
    lines.append(f"Would summarize {len(summarized)} message(s), ~{sum_tokens} tokens:")
    head = summarized if len(summarized) <= show else summarized[: show // 2]
    lines += [f"  {_describe(m)}" for m in head]
    if len(summarized) > show:
        lines.append(f"  … {len(summarized) - show} more …")
        lines += [f"  {_describe(m)}" for m in summarized[-(show - show // 2) :]]
    if plan.turn_prefix:
        lines.append(f"Turn prefix ({len(plan.turn_prefix)} message(s)):")
        lines += [f"  {_describe(m)}" for m in plan.turn_prefix]
    lines.append("Files read: " + (", ".join(plan.files.read) or "none"))
    lines.append("Files modified: " + (", ".join(plan.files.modified) or "none"))
    return lines


def _summarizer(
    kind: str, model: str | None, base_url: str | None, provider: str | None
) -> Summarizer:
    if kind == "extractive":
        if model or base_url:
            raise UserError("--model and --base-url need --summarizer llm")
        return ExtractiveSummarizer()
    if not model:
        raise UserError("--summarizer llm needs --model (and --base-url for a local server)")
    from threadline.providers import get_provider

    return LLMSummarizer(get_provider(model, base_url=base_url, provider=provider))


def register(cli: click.Group) -> None:
    @cli.command("compact")
    @click.argument("session_id")
    @click.option("--dry-run", is_flag=True, help="Show the plan; write nothing.")
    @click.option(
        "--keep-recent",
        "keep_recent",
        type=int,
        default=DEFAULT_KEEP_RECENT_TOKENS,
        show_default=True,
        help="Tokens of the newest messages to keep verbatim.",
    )
    @click.option(
        "--summarizer",
        "kind",
        type=click.Choice(["extractive", "llm"]),
        default="extractive",
        show_default=True,
    )
    @click.option("--model", default=None, help="Model for --summarizer llm.")
    @click.option("--base-url", default=None, help="OpenAI-compatible or Anthropic base URL.")
    @click.option(
        "--provider",
        default=None,
        type=click.Choice(["openai", "anthropic", "test"]),
        help="Provider API (default: from the model name).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the plan and result as JSON.")
    @click.pass_context
    def compact_cmd(
        ctx: click.Context,
        session_id: str,
        dry_run: bool,
        keep_recent: int,
        kind: str,
        model: str | None,
        base_url: str | None,
        provider: str | None,
        as_json: bool,
    ) -> None:
        """Compact SESSION_ID: summarize the older part of its path and keep the newest
        KEEP_RECENT tokens. The cut point, what would be summarized and the token counts are
        shown before anything is written; --dry-run stops there."""
        summarizer = _summarizer(kind, model, base_url, provider)
        session = get_store(ctx).open(session_id, read_only=dry_run)
        try:
            plan = prepare_compaction(session, keep_recent_tokens=keep_recent)
            out: dict[str, Any] = {
                "session_id": session.id,
                "tokens_before": plan.tokens_before,
                "first_kept_entry_id": plan.first_kept_entry_id,
                "split_turn": plan.is_split_turn,
                "turn_prefix_ids": plan.turn_prefix_ids,
                "summarize_ids": plan.summarize_ids,
                "kept_entries": len(plan.kept_ids),
                "kept_tokens": plan.kept_tokens,
                "read_files": plan.files.read,
                "modified_files": plan.files.modified,
                "dry_run": dry_run,
            }
            if not as_json:
                for line in plan_lines(plan):
                    click.echo(line)
            if dry_run:
                if as_json:
                    click.echo(_dumps(out))
                else:
                    click.echo("Dry run: nothing written.")
                return
            result = compact(session, summarizer, plan=plan)
            after = session_tokens(session).tokens
            if as_json:
                click.echo(
                    _dumps(
                        {
                            **out,
                            "entry_id": result.entry_id,
                            "tokens_after": after,
                            "summary": result.summary,
                        }
                    )
                )
            else:
                click.echo(
                    f"Compacted: entry {result.entry_id}; context {plan.tokens_before} "
                    f"-> {after} tokens."
                )
        finally:
            session.close()


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, indent=2)
