"""Repair in storage: answer interrupted tool calls in the log, visibly and reversibly.

A tool call that no result answers (an interrupted turn, a killed agent, a user rewind) makes
every provider refuse the context. The send policy answers such calls in each payload it builds
(``threadline.formats.policy``); :func:`repair` writes the same answers into the session, so every
later context is valid as it is (``strict=True`` accepts it) and the history shows what happened.

How it is stored: one ``insert`` context operation (DESIGN §6) per assistant turn with
unanswered calls, placed right after the turn's last assistant message (a turn's parallel calls
may be split over several, as Claude Code writes them) and holding one ``tool`` message whose
results say the call was interrupted (``model.pairing.INTERRUPTED``, flagged as errors).
The synthetic message carries ``provider_details["threadline"] = {"repair": true}`` so it can be
told apart. Nothing is deleted: :func:`undo_repair` (or ``revert`` of each listed op) switches
the ops off and the context is exactly what it was before; ``toggle(op_id, True)`` brings one
back. The ops are tree entries, so they apply on the branch they were written on.

:func:`repair` previews by default (``apply=False``): it lists the calls it would answer and
writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from threadline import operations
from threadline.errors import UserError
from threadline.model.entries import ContextOpEntry
from threadline.model.pairing import dangling_calls, interrupted_results, tool_turns

if TYPE_CHECKING:
    from threadline.state import SessionState

MARK = "threadline"
"""The ``provider_details`` key of a repair's synthetic message (no format reads it)."""


class RepairedCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call a repair answers."""

    position: int
    """Position of the assistant message holding the call, in the view before the repair."""
    answer_after: int
    """Position the answer is inserted after: the last assistant message of the call's turn."""
    entry_id: str
    """The view id of that message (an entry id, or a synthetic id)."""
    call_id: str
    name: str


class Repair(msgspec.Struct, kw_only=True):
    """What :func:`repair` found and, when ``applied`` (something was written), the op ids to
    revert to undo it."""

    calls: list[RepairedCall]
    applied: bool
    op_ids: list[str] = msgspec.field(default_factory=list)


def plan(
    session: SessionState, active_tags: Iterable[str] | None = None, *, keep_pending: bool = False
) -> list[RepairedCall]:
    """The calls of the current context that no result answers; with ``keep_pending``, not
    those of a turn that ends the context (their tools may be running now)."""
    ctx = session.context(active_tags=active_tags)
    ids = ctx.view.ids()
    ends = {p: t.last for t in tool_turns(ctx.messages) for p in range(t.first, t.last + 1)}
    last = len(ids) - 1 if keep_pending else -1
    return [
        RepairedCall(
            position=d.position,
            answer_after=ends[d.position],
            entry_id=ids[d.position],
            call_id=d.call_id,
            name=d.name,
        )
        for d in dangling_calls(ctx.messages)
        if ends[d.position] != last
    ]


def repair(
    session: SessionState,
    *,
    apply: bool = False,
    active_tags: Iterable[str] | None = None,
    keep_pending: bool = False,
) -> Repair:
    """Answer every interrupted tool call of the current context with a synthetic result.

    Preview unless ``apply=True``. ``keep_pending`` leaves the calls of a turn that ends the
    context alone (an agent loop whose tools are running). Returns the calls and, when applied,
    the op ids (one per turn with unanswered calls); :func:`undo_repair` reverts them.
    """
    if not isinstance(apply, bool):
        raise UserError(f"repair: apply must be true or false, got {apply!r}")
    tags = list(active_tags or ())
    calls = plan(session, tags, keep_pending=keep_pending)
    if not apply or not calls:
        return Repair(calls=calls, applied=False)
    by_position: dict[int, list[str]] = {}
    for c in calls:
        by_position.setdefault(c.answer_after, []).append(c.call_id)
    op_ids = []
    # last position first, so the positions of the earlier ones still hold
    for position in sorted(by_position, reverse=True):
        answer = interrupted_results(by_position[position])
        answer.provider_details = {MARK: {"repair": True}}
        op_ids.append(operations.insert(session, position, [answer], active_tags=tags))
    op_ids.reverse()
    return Repair(calls=calls, applied=True, op_ids=op_ids)


def is_repair(session: SessionState, op_id: str) -> bool:
    """Whether op ``op_id`` was written by :func:`repair`."""
    if session.types.get(op_id) != "context_op":
        return False
    rec = session.record(op_id)
    if not isinstance(rec, ContextOpEntry) or rec.context_op.kind != "insert":
        return False
    return any(
        (m.provider_details or {}).get(MARK, {}).get("repair") is True
        for m in rec.context_op.messages or ()
    )


def undo_repair(session: SessionState, op_ids: Iterable[str] | None = None) -> list[str]:
    """Revert repair ops: ``op_ids`` (each must be a repair's op), or every active repair op
    applied on the current branch. Returns the ids reverted; the context is what it was before
    those repairs."""
    if op_ids is None:
        wanted = [
            o.id
            for o in operations.operations(session, active_only=True)
            if o.kind == "insert" and o.standing == "applied" and is_repair(session, o.id)
        ]
    else:
        wanted = list(op_ids)
        for op_id in wanted:
            if not is_repair(session, op_id):
                raise UserError(
                    f"Operation '{op_id}' is not a repair; list the operations "
                    "and revert it with revert() if that is what you want"
                )
    for op_id in wanted:
        operations.revert(session, op_id)
    return wanted


__all__ = ["MARK", "Repair", "RepairedCall", "is_repair", "plan", "repair", "undo_repair"]
