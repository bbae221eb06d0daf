"""Tool calls and their results along a message list: which calls were never answered.

A provider takes a tool call only when its result follows it: after the assistant turn that
made the call and before the next assistant turn. An *assistant turn* here is a run of
consecutive assistant messages (Claude Code writes one turn's parallel calls as several
assistant records); the messages after it, up to the next assistant message, are the turn's
*answer side*. A call is **dangling** when no result for it is on its turn's answer side: the
turn was interrupted (a killed agent, a user rewind, a crash mid-tool).

Both the send policy (``threadline.formats.policy``, which answers dangling calls in a payload)
and ``Session.repair()`` (which writes the answers into the log) use these functions, so they
agree on what needs answering. Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from threadline.model.content import Message, ToolUse, tool_result

INTERRUPTED = (
    "[interrupted] This tool call was never answered: the turn was interrupted "
    "before a result was recorded, so its outcome is unknown."
)
"""The text of the synthetic result that answers a dangling tool call."""


class ToolTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One assistant turn: messages ``first``..``last`` (inclusive) are assistant messages, and
    ``last + 1``..``end - 1`` its answer side."""

    first: int
    last: int
    end: int
    calls: tuple[tuple[int, ToolUse], ...]
    """(position of the message holding the call, the call), in order."""


class DanglingCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call with no result on its turn's answer side."""

    position: int
    """Index of the assistant message holding the call."""
    call_id: str
    name: str


def tool_turns(messages: Sequence[Message]) -> list[ToolTurn]:
    """Every assistant turn of ``messages``, in order."""
    turns: list[ToolTurn] = []
    n = len(messages)
    i = 0
    while i < n:
        if messages[i].role != "assistant":
            i += 1
            continue
        first = i
        while i + 1 < n and messages[i + 1].role == "assistant":
            i += 1
        last = i
        end = last + 1
        while end < n and messages[end].role != "assistant":
            end += 1
        calls = tuple((p, u) for p in range(first, last + 1) for u in messages[p].tool_uses)
        turns.append(ToolTurn(first=first, last=last, end=end, calls=calls))
        i = end
    return turns


def answered_ids(messages: Sequence[Message], turn: ToolTurn) -> set[str]:
    """The call ids of ``turn`` that a result on its answer side answers."""
    wanted = {u.id for _, u in turn.calls}
    return {
        r.tool_use_id
        for m in messages[turn.last + 1 : turn.end]
        for r in m.tool_results
        if r.tool_use_id in wanted
    }


def dangling_calls(messages: Sequence[Message]) -> list[DanglingCall]:
    """The tool calls of ``messages`` that no result answers on their turn's answer side (a
    call at the very end of the list counts too: a payload cannot end on one)."""
    found: list[DanglingCall] = []
    for turn in tool_turns(messages):
        if not turn.calls:
            continue
        answered = answered_ids(messages, turn)
        found.extend(
            DanglingCall(position=p, call_id=u.id, name=u.name)
            for p, u in turn.calls
            if u.id not in answered
        )
    return found


def interrupted_results(call_ids: Sequence[str]) -> Message:
    """A ``tool`` message answering each of ``call_ids`` with the :data:`INTERRUPTED` text,
    flagged as an error."""
    return Message(
        role="tool", content=[tool_result(cid, INTERRUPTED, is_error=True) for cid in call_ids]
    )
