"""``threadline chat``: the prompt_toolkit REPL (see :mod:`threadline.repl`)."""

from __future__ import annotations

from typing import Any

import click


def register(cli: click.Group) -> None:
    cli.add_command(chat)


@click.command()
@click.argument("session_id", required=False)
@click.option(
    "--model",
    "-m",
    envvar="THREADLINE_MODEL",
    default="test",
    show_default=True,
    help="Model name ($THREADLINE_MODEL); 'test' is the offline echo model.",
)
@click.option(
    "--base-url",
    default=None,
    help="OpenAI-compatible or Anthropic endpoint (default: the provider's own).",
)
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic", "test"]),
    default=None,
    help="Provider API (default: 'anthropic' for claude* models, else 'openai').",
)
@click.option("--system", default=None, help="A system prompt sent with every request.")
@click.option("--no-tools", is_flag=True, help="Do not offer the built-in tools to the model.")
@click.option(
    "--llm-summaries",
    is_flag=True,
    help="Write /compact and /branch --summarize summaries with the chat model "
    "(default: the offline extractive summarizer).",
)
@click.option(
    "--context-window",
    type=int,
    default=128_000,
    show_default=True,
    help="The model's context window in tokens; the session is compacted "
    "automatically when its context passes the window minus --reserve-tokens "
    "(0: never).",
)
@click.option(
    "--reserve-tokens",
    type=int,
    default=16_384,
    show_default=True,
    help="Tokens kept free for the reply.",
)
@click.option(
    "--continue",
    "-c",
    "resume_recent",
    is_flag=True,
    help="Continue the most recently modified session.",
)
@click.pass_context
def chat(
    ctx: click.Context,
    session_id: str | None,
    model: str,
    base_url: str | None,
    provider: str | None,
    system: str | None,
    no_tools: bool,
    llm_summaries: bool,
    context_window: int,
    reserve_tokens: int,
    resume_recent: bool,
) -> None:
    """Chat with a model in SESSION (default: a new session); /help lists the commands.

    Keys come from the environment ($OPENAI_API_KEY, $ANTHROPIC_API_KEY). Every message, reply
    and tool call is recorded in the session as it happens.
    """
    from threadline.cli.main import get_store
    from threadline.errors import UserError
    from threadline.providers import get_provider, provider_kind
    from threadline.repl import Chat

    if session_id and resume_recent:
        raise UserError("Give either SESSION or --continue, not both")
    if context_window and not 0 <= reserve_tokens < context_window:
        raise UserError(
            f"--reserve-tokens {reserve_tokens} leaves no room in a context window of "
            f"{context_window} tokens; lower it or raise --context-window"
        )
    store = get_store(ctx)
    llm = get_provider(model, base_url=base_url, provider=provider)
    if session_id:
        session = store.open(session_id)
    elif resume_recent:
        session = store.continue_recent()
    else:
        session = store.create()
    created = None if session_id or resume_recent else session.id
    summarizer = None
    if llm_summaries:
        from threadline.compaction import LLMSummarizer

        summarizer = LLMSummarizer(llm)
    repl = Chat(
        store,
        session,
        llm,
        provider_name=provider_kind(model, provider),
        tools={} if no_tools else None,
        system=system,
        summarizer=summarizer,
        context_window=context_window or None,
        reserve_tokens=reserve_tokens,
    )
    repl.run()
    if created is not None:
        _drop_if_unused(store, created)


def _drop_if_unused(store: Any, session_id: str) -> None:
    """Delete the session this run created when nothing was ever written to it, so quitting
    at once leaves no empty session behind."""
    with store.open(session_id, read_only=True) as s:
        unused = not s.entry_ids() and not s.state.bookmarks
    if unused:
        store.delete(session_id)
