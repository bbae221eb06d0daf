"""Context operations: reversible edits of the view (DESIGN §6).

An operation is requested by *position* in the view the model sees and stored by *entry id* in a
``context_op`` tree entry, so it stays correct while the conversation grows. The op entry's id is
the op id. When a context is built, the active ops on the path are applied in creation order, each
on the view left by the ones before it:

=========== ===================== ==========================================================
kind        stored as             effect on the view
=========== ===================== ==========================================================
digest      start_id, end_id,     the range becomes one ``system`` message holding the summary
            summary
revise      start_id, end_id,     the range becomes the given messages
            messages
snip        start_id, end_id      the range is removed
resequence  order (ids)           those messages, which must be contiguous, take this order
insert      after_id, messages    the messages are inserted after ``after_id`` (None: at front)
=========== ===================== ==========================================================

Messages an op synthesizes get view ids ``<op_id>:<n>``, so later ops (and tags) can target them.
An op whose entries are no longer in the view (compacted away, purged, on a branch without them,
produced by an op that was switched off) is *inapplicable*: it is skipped and listed as such.

``toggle`` and ``revert`` append ``op_state`` meta records; the latest record for an op wins on
every branch. Nothing is ever deleted: every op can be switched back on.

``tag_messages`` is not an op: it appends a ``message_tags`` record and the tags show in
``Context.view``.

An op that would separate a tool call from its result, leave a result without its call, or point
outside the view is refused with a :class:`~threadline.errors.UserError` that says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from threadline.errors import NotFoundError, UserError
from threadline.model.content import ROLES, Message, coerce_content, text, unknown_role
from threadline.model.entries import ContextOp, ContextOpEntry, MessageTags, OpState

if TYPE_CHECKING:
    from threadline.state import SessionState

__all__ = [
    "OPERATION_KINDS",
    "OperationInfo",
    "apply_operations",
    "collapse",
    "digest",
    "expand",
    "insert",
    "is_marker",
    "marker_message",
    "operations",
    "resequence",
    "revert",
    "revise",
    "snip",
    "synthetic_message",
    "tag_messages",
    "toggle",
]

OPERATION_KINDS = ("digest", "revise", "snip", "resequence", "insert")
_PENDING = "\x00pending"  # stands for the op id while a new op is checked before it is written
MAX_TAG_LEN = 128

State = Literal["active", "inactive", "reverted"]
Standing = Literal["applied", "inapplicable", "not_applied", "not_on_branch"]


class OperationInfo(msgspec.Struct, kw_only=True):
    """One row of :func:`operations`.

    ``state`` is the op's switch (``active``, ``inactive`` or ``reverted``); ``standing`` says what
    it does to the current view: ``applied``; ``inapplicable`` (its entries left the view);
    ``not_applied`` (switched off, or conditional on tags that are not active); ``not_on_branch``
    (the op entry is not on the current path). ``reason`` explains every standing but ``applied``.
    """

    id: str
    kind: str
    state: State
    standing: Standing
    timestamp: str
    reason: str | None = None
    tags: list[str] | None = None
    start_id: str | None = None
    end_id: str | None = None
    after_id: str | None = None
    order: list[str] | None = None
    summary: str | None = None
    message_count: int = 0
    expanded: bool = False  # a revise/snip showing its originals between its markers


# -- applying --------------------------------------------------------------------------------


def _op_payload(session: SessionState, op_id: str) -> ContextOp | None:
    rec = session.record(op_id)
    return rec.context_op if isinstance(rec, ContextOpEntry) else None  # purged: None


class Marker(msgspec.Struct, frozen=True, kw_only=True):
    """What a marker view item stands for (DESIGN §6, markers)."""

    op_id: str
    op_kind: str  # "revise" | "snip"
    place: str  # "expand" (before a revise), "collapse" (after it), "snip" (where a snip was)
    hidden: int  # how many originals the op replaces or removes
    replacements: int
    expanded: bool


MARKER_PLACES = ("expand", "collapse", "snip")


def is_marker(session: SessionState, view_id: str) -> bool:
    """Whether ``view_id`` is a revise/snip marker (``<op_id>:expand|collapse|snip``)."""
    return view_id in session.markers


def _expanded(session: SessionState, op_id: str) -> bool:
    st = session.op_states.get(op_id)
    return bool(st is not None and st.expanded)


def marker_message(m: Marker) -> Message:
    """A marker as the model sees it: a ``custom`` message holding one line of text, which every
    provider format carries (wrapped as user text where the provider has no slot for it)."""
    n = f"{m.hidden} message{'s' if m.hidden != 1 else ''}"
    if m.place == "snip":
        body = (
            f"snip {m.op_id} expanded: the {n} it removed follow; "
            f'collapse_operation("{m.op_id}") removes them again'
            if m.expanded
            else f'snip {m.op_id} removed {n} here; expand_operation("{m.op_id}") shows them'
        )
    elif m.place == "expand":
        body = (
            f"revise {m.op_id} expanded: the {n} it replaced follow; "
            f'collapse_operation("{m.op_id}") shows its {m.replacements} replacement(s) again'
            if m.expanded
            else f"revise {m.op_id} replaced {n} with the {m.replacements} below; "
            f'expand_operation("{m.op_id}") shows the originals'
        )
    else:
        body = (
            f"end of the originals of revise {m.op_id}"
            if m.expanded
            else f"end of revise {m.op_id}"
        )
    return Message(role="custom", content=[text(f"[threadline marker: {body}]")])


def _state(session: SessionState, op_id: str) -> State:
    st = session.op_states.get(op_id)
    if st is None or st.active:
        return "active"
    return "reverted" if st.reverted else "inactive"


def _synthetic_ids(op_id: str, n: int) -> list[str]:
    return [f"{op_id}:{i}" for i in range(n)]


def _apply_one(
    ids: list[str],
    op_id: str,
    op: ContextOp,
    *,
    expanded: bool = False,
    markers: dict[str, Marker] | None = None,
    members: dict[str, str] | None = None,
) -> tuple[list[str] | None, str]:
    """The view after ``op``, or ``(None, why)`` when the op's entries are not in ``ids``.

    A revise puts an ``expand`` marker before and a ``collapse`` marker after its replacements;
    a snip leaves one ``snip`` marker. ``expanded`` shows the originals between the markers
    instead. Markers and the originals an expanded op shows are recorded in ``markers`` and
    ``members``."""
    kind = op.kind
    if kind in ("digest", "revise", "snip"):
        try:
            s = ids.index(op.start_id or "")
            e = ids.index(op.end_id or "", s)
        except ValueError:
            missing = op.start_id if op.start_id not in ids else op.end_id
            return None, f"entry '{missing}' is no longer in the view"
        if kind == "digest":
            return [*ids[:s], f"{op_id}:0", *ids[e + 1 :]], ""
        originals = ids[s : e + 1]
        replaced = len(op.messages or ()) if kind == "revise" else 0
        inner = originals if expanded else _synthetic_ids(op_id, replaced)
        spots = ["expand", "collapse"] if kind == "revise" else ["snip"]
        marks = [f"{op_id}:{p}" for p in spots]
        if markers is not None:
            for p, vid in zip(spots, marks, strict=True):
                markers[vid] = Marker(
                    op_id=op_id,
                    op_kind=kind,
                    place=p,
                    hidden=len(originals),
                    replacements=replaced,
                    expanded=expanded,
                )
        if members is not None and expanded:
            for vid in originals:
                members[vid] = op_id
        middle = [marks[0], *inner, *marks[1:]]
        return ids[:s] + middle + ids[e + 1 :], ""
    if kind == "resequence":
        order = op.order or []
        pos = {vid: i for i, vid in enumerate(ids)}
        gone = [vid for vid in order if vid not in pos]
        if gone:
            return None, f"entry '{gone[0]}' is no longer in the view"
        places = sorted(pos[vid] for vid in order)
        if not order or places[-1] - places[0] + 1 != len(order):
            return None, "its messages are no longer next to each other in the view"
        return ids[: places[0]] + list(order) + ids[places[-1] + 1 :], ""
    if kind == "insert":
        new = _synthetic_ids(op_id, len(op.messages or ()))
        if op.after_id is None:
            return new + ids, ""
        try:
            a = ids.index(op.after_id)
        except ValueError:
            return None, f"entry '{op.after_id}' is no longer in the view"
        return ids[: a + 1] + new + ids[a + 1 :], ""
    return None, f"unknown operation kind {kind!r} (written by a newer threadline?)"


def _run(
    session: SessionState,
    ids: list[str],
    op_ids: Sequence[str],
    active_tags: frozenset[str],
    report: dict[str, tuple[Standing, str | None]] | None = None,
) -> list[str]:
    if report is None:
        session.members.clear()  # the originals shown are those of the latest view built
    for op_id in op_ids:
        op = _op_payload(session, op_id)
        if op is None:
            if report is not None:
                report[op_id] = ("inapplicable", "the operation was purged")
            continue
        state = _state(session, op_id)
        if state != "active":
            if report is not None:
                report[op_id] = ("not_applied", f"the operation is {state}")
            continue
        if op.tags and not active_tags.intersection(op.tags):
            if report is not None:
                report[op_id] = (
                    "not_applied",
                    f"conditional on tags {', '.join(op.tags)}; none is active",
                )
            continue
        new, why = _apply_one(
            ids,
            op_id,
            op,
            expanded=_expanded(session, op_id),
            markers=session.markers,
            members=session.members,
        )
        if new is None:
            if report is not None:
                report[op_id] = ("inapplicable", why)
            continue
        ids = new
        if report is not None:
            report[op_id] = ("applied", None)
    return ids


def apply_operations(
    session: SessionState, ids: list[str], op_ids: list[str], active_tags: frozenset[str]
) -> list[str]:
    """Apply the active operations on the path, in creation order, to the view ids.

    ``op_ids`` are the ``context_op`` entries on the path (path order is creation order);
    inactive, reverted, inapplicable and unmatched conditional ops are skipped.
    """
    return _run(session, ids, op_ids, active_tags)


def synthetic_message(session: SessionState, view_id: str) -> Message:
    """The message behind a synthetic view id ``<op_id>:<n>``."""
    mark = session.markers.get(view_id)
    if mark is not None:
        return marker_message(mark)
    op_id, _, n_text = view_id.rpartition(":")
    op = _op_payload(session, op_id) if session.types.get(op_id) == "context_op" else None
    if op is not None and n_text.isdigit():
        n = int(n_text)
        if op.kind == "digest" and n == 0:
            return Message(role="system", content=[text(op.summary or "")])
        msgs = op.messages or []
        if op.kind in ("revise", "insert") and n < len(msgs):
            return msgs[n]
    raise NotFoundError(f"No message with view id '{view_id}' in session '{session.id}'")


# -- validation ------------------------------------------------------------------------------


def _is_result_message(msg: Message) -> bool:
    return bool(msg.tool_results)


def _pair_problems(
    msgs: Sequence[Message], where: Sequence[str], *, open_end: bool
) -> dict[tuple[str, str], str]:
    """Tool pairing problems of a stretch of the view, keyed by (kind, tool call id).

    ``orphan``: a result with no earlier call; ``separated``: a result whose call is earlier but
    with a message between them that is not itself a tool result (the assistant messages right
    after the call's are not: a turn's parallel calls may be written as several consecutive
    assistant messages, as Claude Code does, and their results follow the last one, the shape
    ``model.pairing`` and the send policy take as one turn); ``unanswered``: a call without a
    result (a call in the last message of the view is pending, not a problem: ``open_end`` says
    whether the stretch ends the view). ``where`` names each message in refusals.
    """
    at = where
    problems: dict[tuple[str, str], str] = {}
    calls: dict[str, int] = {}
    answered: set[str] = set()
    non_results = [0]  # non_results[k]: messages before position k that hold no tool result
    for i, m in enumerate(msgs):
        for r in m.tool_results:
            cid = r.tool_use_id
            j = calls.get(cid)
            if j is None:
                problems[("orphan", cid)] = (
                    f"leave the tool_result for call '{cid}' ({at[i]}) without its tool_use"
                )
            elif non_results[i] - non_results[j + 1] > 0:
                problems[("separated", cid)] = (
                    f"separate the tool_use '{cid}' ({at[j]}) from its tool_result ({at[i]})"
                )
            answered.add(cid)
        for u in m.tool_uses:
            calls[u.id] = i
        same_turn = m.role == "assistant" and i > 0 and msgs[i - 1].role == "assistant"
        separates = not (_is_result_message(m) or same_turn)
        non_results.append(non_results[-1] + (1 if separates else 0))
    last = len(msgs) - 1 if open_end else -1
    for cid, j in calls.items():
        if cid not in answered and j != last:
            problems[("unanswered", cid)] = (
                f"leave the tool_use '{cid}' ({at[j]}) without its tool_result"
            )
    return problems


def _view(session: SessionState, active_tags: Iterable[str] | None) -> list[str]:
    return session.context(active_tags=active_tags).view.ids()


def _check_range(start: int, end: int, n: int, what: str) -> None:
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise UserError(f"{what}: {name} must be an integer position, got {v!r}")
    if n == 0:
        raise UserError(f"{what}: the view is empty; there are no positions to refer to")
    if start > end:
        raise UserError(
            f"{what}: start {start} is after end {end}; positions are inclusive, "
            "so give the first position, then the last"
        )
    if start < 0 or end >= n:
        raise UserError(
            f"{what}: positions {start}-{end} are out of range (0-{n - 1}); "
            "list the context to see the current positions"
        )


def _check_tags(tags: Iterable[str] | None, what: str) -> list[str] | None:
    if tags is None:
        return None
    if isinstance(tags, str):
        tags = [tags]
    out: list[str] = []
    for t in tags:
        if not isinstance(t, str) or not t.strip() or len(t) > MAX_TAG_LEN:
            raise UserError(
                f"{what}: tag {t!r} is not valid; use a non-empty string of at most "
                f"{MAX_TAG_LEN} characters"
            )
        if t not in out:
            out.append(t)
    return out or None


def coerce_message(value: Any) -> Message:
    """A message from a :class:`Message` or a dict ``{"role", "content", ...}`` where content is
    a string, blocks or file-shaped block dicts."""
    if isinstance(value, Message):
        msg = value
    elif isinstance(value, dict):
        if "role" not in value or "content" not in value:
            raise UserError(f"Message {value!r:.80} needs a 'role' and a 'content'")
        extra = {k: v for k, v in value.items() if k not in ("role", "content")}
        try:
            msg = msgspec.convert({"role": value["role"], "content": [], **extra}, Message)
        except msgspec.ValidationError as exc:
            raise UserError(f"Message {value!r:.80} is not valid: {exc}") from None
        msg = msgspec.structs.replace(msg, content=coerce_content(value["content"]))
    else:
        raise UserError(
            f"A message must be a dict with 'role' and 'content', got {type(value).__name__}"
        )
    if msg.role not in ROLES:
        raise unknown_role(msg.role)
    return msg


def _messages(values: Iterable[Any] | None, what: str, *, allow_empty: bool) -> list[Message]:
    if values is None or isinstance(values, (str, dict, Message)):
        raise UserError(f"{what}: give a list of messages")
    msgs = [coerce_message(v) for v in values]
    if not msgs and not allow_empty:
        raise UserError(f"{what}: give at least one message")
    return msgs


def _create(
    session: SessionState, op: ContextOp, ids: list[str], span: tuple[int, int], what: str
) -> str:
    """Check that ``op`` applies to ``ids`` without breaking tool pairs, then write it.

    ``span`` is the stretch of ``ids`` the op touches (``(a, a)`` for an insert after ``a``,
    ``(0, -1)`` at the front). Only that stretch is checked, widened to the tool call before it
    and the tool results after it: a pair the op can break has no other message between its call
    and its results, so it lies within that window. This keeps a request O(window), not O(view).
    """
    pending_marks: dict[str, Marker] = {}
    new, why = _apply_one(ids, _PENDING, op, markers=pending_marks)
    if new is None:  # positions were resolved from ``ids``, so this is an internal error
        raise UserError(f"{what}: {why}")
    synthetic: dict[str, Message] = {k: marker_message(m) for k, m in pending_marks.items()}
    if op.kind == "digest":
        synthetic[f"{_PENDING}:0"] = Message(role="system", content=[text(op.summary or "")])
    for i, m in enumerate(op.messages or ()):
        synthetic[f"{_PENDING}:{i}"] = m

    def resolve(vid: str) -> Message:
        return synthetic[vid] if vid in synthetic else session.message_for_view_id(vid)

    n = len(ids)
    lo, hi = span
    while 0 < lo <= hi and resolve(ids[lo]).tool_results:
        lo -= 1  # back to the call whose results start the stretch
    while (
        0 < lo <= hi
        and resolve(ids[lo]).role == "assistant"
        and resolve(ids[lo - 1]).role == "assistant"
    ):
        lo -= 1  # and back over the turn's earlier assistant messages (split parallel calls)
    while hi + 1 < n and resolve(ids[hi + 1]).tool_results:
        hi += 1  # on over the results that follow the stretch
    lo = max(lo, 0)
    open_end = hi >= n - 1
    before_ids = ids[lo : hi + 1]
    after_ids = new[lo : len(new) - (n - 1 - hi)]
    before = _pair_problems(
        [resolve(v) for v in before_ids],
        [f"position {lo + i}" for i in range(len(before_ids))],
        open_end=open_end,
    )
    # name the messages by their position in the view the caller sees
    old = {vid: lo + i for i, vid in enumerate(before_ids)}
    where = [
        f"position {old[v]}" if v in old else f"new message {v.rpartition(':')[2]}"
        for v in after_ids
    ]
    after = _pair_problems([resolve(v) for v in after_ids], where, open_end=open_end)
    fresh = [msg for key, msg in after.items() if key not in before]
    if fresh:
        raise UserError(
            f"Refused: {what} would {fresh[0]}; choose positions that keep each tool "
            "call together with its result (both inside or both outside)"
        )
    return session.write("context_op", op)


# -- the operations --------------------------------------------------------------------------


def digest(
    session: SessionState,
    start: int,
    end: int,
    summary: str,
    *,
    tags: Iterable[str] | None = None,
    active_tags: Iterable[str] | None = None,
) -> str:
    """Replace positions ``start``..``end`` (inclusive) with one ``system`` message holding
    ``summary``. Returns the op id."""
    what = f"digest of positions {start}-{end}"
    if not isinstance(summary, str) or not summary.strip():
        raise UserError(f"{what}: the summary is empty; give the text that replaces the range")
    ids = _view(session, active_tags)
    _check_range(start, end, len(ids), what)
    op = ContextOp(
        kind="digest",
        start_id=ids[start],
        end_id=ids[end],
        summary=summary,
        tags=_check_tags(tags, what),
    )
    return _create(session, op, ids, (start, end), what)


def revise(
    session: SessionState,
    start: int,
    end: int,
    replacements: Iterable[Any],
    *,
    tags: Iterable[str] | None = None,
    active_tags: Iterable[str] | None = None,
) -> str:
    """Replace positions ``start``..``end`` with ``replacements`` (messages or dicts with
    ``role`` and ``content``; an empty list removes the range). Returns the op id."""
    what = f"revise of positions {start}-{end}"
    msgs = _messages(replacements, what, allow_empty=True)
    ids = _view(session, active_tags)
    _check_range(start, end, len(ids), what)
    op = ContextOp(
        kind="revise",
        start_id=ids[start],
        end_id=ids[end],
        messages=msgs,
        tags=_check_tags(tags, what),
    )
    return _create(session, op, ids, (start, end), what)


def snip(
    session: SessionState,
    start: int,
    end: int,
    *,
    tags: Iterable[str] | None = None,
    active_tags: Iterable[str] | None = None,
) -> str:
    """Remove positions ``start``..``end`` from the view (the op stays listed). Returns the op
    id."""
    what = f"snip of positions {start}-{end}"
    ids = _view(session, active_tags)
    _check_range(start, end, len(ids), what)
    op = ContextOp(kind="snip", start_id=ids[start], end_id=ids[end], tags=_check_tags(tags, what))
    return _create(session, op, ids, (start, end), what)


def resequence(
    session: SessionState,
    new_order: Sequence[int],
    *,
    tags: Iterable[str] | None = None,
    active_tags: Iterable[str] | None = None,
) -> str:
    """Reorder messages: ``new_order`` is a permutation of a contiguous range of positions, the
    new order of those positions (``[8, 9, 5, 6, 7]`` moves 8 and 9 before 5). Returns the op
    id."""
    what = "resequence"
    order = list(new_order) if not isinstance(new_order, (str, bytes)) else None
    if not order or any(isinstance(p, bool) or not isinstance(p, int) for p in order):
        raise UserError(f"{what}: new_order must be a non-empty list of integer positions")
    what = f"resequence {order}"
    lo, hi = min(order), max(order)
    if len(set(order)) != len(order) or sorted(order) != list(range(lo, hi + 1)):
        raise UserError(
            f"{what}: new_order must list every position from {lo} to {hi} exactly "
            "once (a permutation of a contiguous range)"
        )
    if order == sorted(order):
        raise UserError(f"{what}: the order is unchanged; nothing to resequence")
    ids = _view(session, active_tags)
    _check_range(lo, hi, len(ids), what)
    op = ContextOp(kind="resequence", order=[ids[p] for p in order], tags=_check_tags(tags, what))
    return _create(session, op, ids, (lo, hi), what)


def insert(
    session: SessionState,
    after: int,
    messages: Iterable[Any],
    *,
    tags: Iterable[str] | None = None,
    active_tags: Iterable[str] | None = None,
) -> str:
    """Insert synthetic ``messages`` after position ``after`` (``-1``: at the front). Returns the
    op id."""
    what = f"insert after position {after}"
    if isinstance(after, bool) or not isinstance(after, int):
        raise UserError(f"insert: after must be an integer position, got {after!r}")
    msgs = _messages(messages, what, allow_empty=False)
    ids = _view(session, active_tags)
    if not -1 <= after < len(ids):
        raise UserError(f"{what}: out of range (-1-{len(ids) - 1}); -1 inserts at the front")
    op = ContextOp(
        kind="insert",
        after_id=ids[after] if after >= 0 else None,
        messages=msgs,
        tags=_check_tags(tags, what),
    )
    return _create(session, op, ids, (after, after) if after >= 0 else (0, -1), what)


def tag_messages(
    session: SessionState,
    start: int,
    end: int,
    tags: Iterable[str],
    *,
    remove: bool = False,
    active_tags: Iterable[str] | None = None,
) -> int:
    """Add ``tags`` to (or, with ``remove=True``, remove them from) the messages at positions
    ``start``..``end``; they show in ``Context.view``. Returns how many messages were tagged."""
    what = f"tag_messages of positions {start}-{end}"
    clean = _check_tags(tags, what)
    if not clean:
        raise UserError(f"{what}: give at least one tag")
    ids = _view(session, active_tags)
    _check_range(start, end, len(ids), what)
    targets = ids[start : end + 1]
    payload = (
        MessageTags(target_ids=targets, remove=clean)
        if remove
        else MessageTags(target_ids=targets, add=clean)
    )
    session.write("message_tags", payload, tree=False)
    return len(targets)


# -- listing and switching -------------------------------------------------------------------


def _require_op(session: SessionState, op_id: str) -> None:
    if session.types.get(op_id) != "context_op":
        raise NotFoundError(
            f"Operation '{op_id}' not found in session '{session.id}'; "
            "list the operations to see their ids"
        )


def operations(
    session: SessionState, active_only: bool = False, active_tags: Iterable[str] | None = None
) -> list[OperationInfo]:
    """Every op of the session in creation order, with its state and standing relative to the
    current leaf and ``active_tags``. ``active_only`` keeps the ops whose state is active."""
    tags = frozenset(active_tags or ())
    path = session.path_ids()
    on_path = [e for e in path if session.types.get(e) == "context_op"]
    report: dict[str, tuple[Standing, str | None]] = {}
    if on_path:
        # replay what the context builder does, recording where each op stands
        without_ops = [e for e in path if session.types.get(e) != "context_op"]
        _run(session, session.build_view(without_ops, tags).ids.tolist(), on_path, tags, report)
    out = []
    for op_id in session.ops:
        state = _state(session, op_id)
        if active_only and state != "active":
            continue
        rec = session.record(op_id)
        op = rec.context_op if isinstance(rec, ContextOpEntry) else None
        standing, reason = report.get(
            op_id, ("not_on_branch", "the operation is not on the current branch")
        )
        if op is None:
            out.append(
                OperationInfo(
                    id=op_id,
                    kind="purged",
                    state=state,
                    standing="inapplicable",
                    reason="the operation was purged",
                    timestamp=rec.timestamp or "",
                )
            )
            continue
        out.append(
            OperationInfo(
                id=op_id,
                kind=op.kind,
                state=state,
                standing=standing,
                reason=reason,
                timestamp=rec.timestamp or "",
                tags=op.tags,
                start_id=op.start_id,
                end_id=op.end_id,
                after_id=op.after_id,
                order=op.order,
                summary=op.summary,
                message_count=len(op.messages or ()) + (1 if op.kind == "digest" else 0),
                expanded=_expanded(session, op_id),
            )
        )
    return out


def _info(session: SessionState, op_id: str) -> OperationInfo:
    return next(i for i in operations(session) if i.id == op_id)


def toggle(session: SessionState, op_id: str, active: bool) -> OperationInfo:
    """Switch an op on or off (session-wide); ``toggle(op_id, True)`` also brings a reverted op
    back. Returns the op's row as :func:`operations` lists it."""
    _require_op(session, op_id)
    if not isinstance(active, bool):
        raise UserError(f"toggle: active must be true or false, got {active!r}")
    session.write(
        "op_state",
        OpState(op_id=op_id, active=active, expanded=_expanded(session, op_id)),
        tree=False,
    )
    return _info(session, op_id)


def revert(session: SessionState, op_id: str) -> OperationInfo:
    """Switch an op off and mark it reverted; ``toggle(op_id, True)`` brings it back.
    Reverting an op that is already reverted is refused (nothing would change)."""
    _require_op(session, op_id)
    if _info(session, op_id).state == "reverted":
        raise UserError(
            f"Operation '{op_id}' is already reverted; nothing changed "
            "(switching it on again brings it back)"
        )
    session.write(
        "op_state",
        OpState(op_id=op_id, active=False, reverted=True, expanded=_expanded(session, op_id)),
        tree=False,
    )
    return _info(session, op_id)


def _set_expanded(session: SessionState, op_id: str, expanded: bool) -> OperationInfo:
    _require_op(session, op_id)
    op = _op_payload(session, op_id)
    if op is None or op.kind not in ("revise", "snip"):
        kind = "purged" if op is None else op.kind
        raise UserError(
            f"Operation '{op_id}' is a {kind}; only a revise or a snip has markers "
            "to expand and collapse"
        )
    st = session.op_states.get(op_id)
    session.write(
        "op_state",
        OpState(
            op_id=op_id,
            active=st is None or st.active,
            reverted=bool(st and st.reverted),
            expanded=expanded,
        ),
        tree=False,
    )
    return _info(session, op_id)


def expand(session: SessionState, op_id: str) -> OperationInfo:
    """Show the originals of a revise or snip in place, between its markers (the op stays
    active; the originals' view items carry the op id). Recorded like :func:`toggle`."""
    return _set_expanded(session, op_id, True)


def collapse(session: SessionState, op_id: str) -> OperationInfo:
    """Hide the originals of an expanded revise or snip again (the replacements, for a revise,
    come back between the markers)."""
    return _set_expanded(session, op_id, False)
