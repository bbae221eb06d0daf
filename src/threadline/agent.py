"""AgentSession: a session driven by an agent loop (persist turns, compact, branch with summary).

    agent = AgentSession(session, context_window=200_000)
    agent.record(Message(role="user", content=[text("Fix the tests")]))
    while True:
        reply = provider.complete(agent.messages())      # or agent.context_for_request("anthropic")
        agent.record(reply)                              # persisted now; compacts when needed
        if not reply.tool_uses:
            break
        agent.record(run_tools(reply))

Every recorded message is appended at once (durable before ``record`` returns). When the context
passes ``context_window - reserve_tokens``, the next :meth:`AgentSession.record` or
:meth:`AgentSession.context_for_request` compacts it, keeping about ``keep_recent_tokens`` of the
newest messages verbatim. A summarizer that fails or is interrupted leaves the session unchanged.

Before a model call (:meth:`AgentSession.messages`, :meth:`AgentSession.context_for_request`)
the loop also repairs the log (``auto_repair``, on by default): tool calls of an earlier turn that
no result answers (the agent was killed, the user interrupted) get a synthetic "interrupted"
result written as a reversible insert operation (``threadline.repair``), so the history shows
what happened and every later payload is valid as it is. Calls of the last message are left
alone (their tools may be running); a payload built then still answers them (the send policy).
"""

from __future__ import annotations

from typing import Any

from threadline.compaction import (
    DEFAULT_KEEP_RECENT_TOKENS,
    CompactionPlan,
    CompactionResult,
    ExtractiveSummarizer,
    Summarizer,
    compact,
    prepare_branch_summary,
    prepare_compaction,
    session_tokens,
    should_compact,
    summarize_branch,
)
from threadline.errors import UserError
from threadline.model.content import Message
from threadline.repair import Repair
from threadline.session import Session
from threadline.tokens import ContextTokens


class AgentSession:
    """A :class:`~threadline.session.Session` with token accounting and automatic compaction.

    ``summarizer`` defaults to :class:`~threadline.compaction.ExtractiveSummarizer`; pass an
    :class:`~threadline.compaction.LLMSummarizer` for model-written summaries.
    ``summary_max_tokens`` (default ``reserve_tokens // 2``) bounds each summary.
    ``infer_tags`` makes each request's context follow the objective of the latest user turns
    (see :meth:`active_tags`).
    """

    def __init__(
        self,
        session: Session,
        *,
        context_window: int,
        reserve_tokens: int = 16384,
        keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS,
        summarizer: Summarizer | None = None,
        summary_max_tokens: int | None = None,
        auto_compact: bool = True,
        infer_tags: bool = False,
        auto_repair: bool = True,
    ) -> None:
        if context_window <= 0 or reserve_tokens < 0 or reserve_tokens >= context_window:
            raise UserError(
                f"context_window={context_window} and reserve_tokens={reserve_tokens} leave no "
                "room for the conversation; the reserve must be smaller than the window"
            )
        threshold = context_window - reserve_tokens
        if keep_recent_tokens >= threshold:
            raise UserError(
                f"keep_recent_tokens={keep_recent_tokens} is not below the compaction threshold "
                f"({threshold} = context_window - reserve_tokens), so compaction could never "
                "bring the context under it; lower keep_recent_tokens"
            )
        self.session = session
        self.context_window = context_window
        self.reserve_tokens = reserve_tokens
        self.keep_recent_tokens = keep_recent_tokens
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.summary_max_tokens = (
            summary_max_tokens if summary_max_tokens is not None else max(256, reserve_tokens // 2)
        )
        self.auto_compact = auto_compact
        #: with ``infer_tags``, each request's context activates the tags the latest user turns
        #: point at (``threadline.relevance.infer_active_tags``), so conditional operations
        #: follow the conversation's objective
        self.infer_tags = infer_tags
        self.auto_repair = auto_repair
        self.compactions: list[CompactionResult] = []
        self.repairs: list[Repair] = []

    def __repr__(self) -> str:
        return (
            f"<AgentSession {self.session.id} window={self.context_window} "
            f"reserve={self.reserve_tokens} compactions={len(self.compactions)}>"
        )

    # -- recording ---------------------------------------------------------------------------

    def record(self, message: Message | str, content: Any = None, **fields: Any) -> str:
        """Append one message (a :class:`Message`, or ``role, content`` like
        :meth:`Session.append_message`) and compact if the context passed the threshold.
        Returns the message's entry id."""
        entry_id = self.session.append_message(message, content, **fields)
        if self.auto_compact:
            self.maybe_compact()
        return entry_id

    # -- reading -----------------------------------------------------------------------------

    def active_tags(self) -> list[str]:
        """The tags a request's context uses: inferred from the latest user turns with
        ``infer_tags``, else none."""
        if not self.infer_tags:
            return []
        from threadline.relevance import infer_active_tags

        return infer_active_tags(self.session)

    def messages(self) -> list[Message]:
        """The current context's messages (what a provider client takes), after repairing
        interrupted tool calls of earlier turns when ``auto_repair`` is on."""
        if self.auto_repair:
            self.repair_interrupted()
        return list(self.session.context(active_tags=self.active_tags()).messages)

    def repair_interrupted(self) -> Repair | None:
        """Answer the tool calls of earlier turns that no result answers, in the log (not
        those of the last message); the repair, or None when there was nothing to do."""
        result = self.session.repair(apply=True, keep_pending=True)
        if not result.applied:
            return None
        self.repairs.append(result)
        return result

    def tokens(self) -> ContextTokens:
        """Tokens of the current context (reported usage plus estimate)."""
        return session_tokens(self.session)

    @property
    def threshold(self) -> int:
        """Compaction starts when the context exceeds this many tokens."""
        return self.context_window - self.reserve_tokens

    def needs_compaction(self) -> bool:
        return should_compact(self.tokens().tokens, self.context_window, self.reserve_tokens)

    def context_for_request(self, format: str = "openai_chat") -> Any:
        """The provider payload for the current context (compacting first if needed), checked
        by that format's validator (``format`` is a name from ``threadline.formats``)."""
        from threadline import formats

        if self.auto_compact:
            self.maybe_compact()
        return formats.dump_context(format, self.messages())

    # -- compaction --------------------------------------------------------------------------

    def plan_compaction(self, keep_recent_tokens: int | None = None) -> CompactionPlan:
        """What :meth:`compact` would do; nothing is written."""
        return prepare_compaction(
            self.session,
            keep_recent_tokens=(
                self.keep_recent_tokens if keep_recent_tokens is None else keep_recent_tokens
            ),
        )

    def compact(self, keep_recent_tokens: int | None = None) -> CompactionResult:
        """Compact now (raises :class:`UserError` when there is nothing to compact)."""
        plan = self.plan_compaction(keep_recent_tokens)
        result = compact(
            self.session, self.summarizer, plan=plan, max_summary_tokens=self.summary_max_tokens
        )
        self.compactions.append(result)
        return result

    def maybe_compact(self) -> CompactionResult | None:
        """Compact if the context exceeds the threshold and there is something to compact."""
        if not self.needs_compaction():
            return None
        try:
            plan = self.plan_compaction()
        except UserError:
            return None  # just compacted, or everything is inside the keep window
        result = compact(
            self.session, self.summarizer, plan=plan, max_summary_tokens=self.summary_max_tokens
        )
        self.compactions.append(result)
        return result

    # -- navigation --------------------------------------------------------------------------

    def navigate(
        self, entry_id: str | None, summarize: bool = True, *, token_budget: int | None = None
    ) -> str | None:
        """Move the leaf to ``entry_id``; with ``summarize``, append a summary of the path being
        left (entries back to the common ancestor, tool results left out) as a
        ``branch_summary`` and return its id. The summary is written before anything moves, so
        a failing summarizer leaves the session unchanged."""
        if entry_id is not None and not self.session.has_entry(entry_id):
            self.session.entry(entry_id)  # raises NotFoundError naming the session
        if summarize:
            plan = prepare_branch_summary(
                self.session,
                entry_id,
                token_budget=token_budget or max(1, self.threshold - self.keep_recent_tokens),
            )
            summary, details = summarize_branch(
                self.summarizer, plan, max_tokens=self.summary_max_tokens
            )
            if summary:
                return self.session.branch_with_summary(entry_id, summary, details)
        if entry_id is None:
            self.session.reset_leaf()
        else:
            self.session.branch(entry_id)
        return None


__all__ = ["AgentSession"]
