"""The send policy: any history, adjusted into a payload the target provider accepts.

Real histories break provider rules in a handful of ways: Claude Code writes one turn's
parallel tool calls as several assistant records, an interrupted turn leaves tool calls that
were never answered, a Codex rollout keeps reasoning without the ids the Responses API wants,
an import leaves empty messages or blank text. Every provider format's ``dump`` runs the
messages through :func:`prepare` first, which adjusts exactly what the target cannot take and
reports each adjustment:

==========================  =====================================================================
kind                        what was done
==========================  =====================================================================
``merged_turn``             consecutive assistant messages holding parallel tool calls sent as
                            one assistant turn (OpenAI Chat needs the calls in one message)
``answered_dangling_call``  a tool call that no result answers gets a synthetic error result
                            saying it was interrupted (``model.pairing.INTERRUPTED``)
``dropped_dangling_call``   the same call left out instead (``dangling="drop"``)
``dropped_duplicate_call``  a call repeating an earlier identical call (same id) left out
``renamed_duplicate_call``  a different call reusing an earlier call's id sent as ``<id>_<n>``
``moved_tool_result``       results moved in front of the other messages of their turn's answer
``orphan_result_as_text``   a tool result with no call right before it sent as user text
``reasoning_as_text``       reasoning that the target cannot replay (a Responses reasoning item
                            without an id) sent as ``<think>`` text
``tool_input_wrapped``      tool call input that is not an object sent as ``{"input": value}``
``arguments_reencoded``     kept call arguments that are not a JSON string re-encoded
``misplaced_block_as_text``  a tool call, tool result or thinking block in a message of a role
                            that cannot hold it, sent as text
``image_as_text``           an image in a system message (or an assistant message, for OpenAI
                            and Anthropic) sent as ``[image: URL]`` text
``dropped_blank_text``      a blank text block left out (Anthropic and Bedrock refuse them;
                            Responses refuses empty ones)
``dropped_provider_items``  items another provider sent that only it takes back (built-in tool
                            calls, server-side compaction…) left out, as the shaping always did
``dropped_redacted_thinking``  redacted thinking left out where the provider has no slot for
                            it (all but Anthropic and Bedrock)
``dropped_empty_thinking``  a thinking block with no text, signature or replay data left out
``dropped_empty_message``   an assistant or system message with no content left out
``filled_empty_message``    a user message with no text sent as ``(empty message)`` (the turn
                            stays; Gemini takes empty text and keeps it)
``leading_user_turn``       a user turn inserted before a history that starts with the assistant
                            (Anthropic, Gemini and Bedrock want a user turn first)
==========================  =====================================================================

User and assistant text is never dropped (only blank text is). ``strict=True`` refuses instead
of adjusting: the ``UserError`` lists what the policy would have done. The same rules decide what
``Session.repair()`` writes into the log (``threadline.repair``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

import msgspec

from threadline.errors import UserError
from threadline.formats._common import details
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text,
)
from threadline.model.pairing import answered_ids, interrupted_results, tool_turns

P = TypeVar("P")
Dangling = Literal["answer", "drop"]

LEADING_USER_TEXT = "(The conversation continues from an earlier assistant turn.)"
"""The user turn put before a history that starts with the assistant, for providers that want a
user turn first."""

EMPTY_USER_TEXT = "(empty message)"
"""The text of a user message that had none, for providers that refuse empty messages."""


class Adjustment(msgspec.Struct, frozen=True, kw_only=True):
    """One change the send policy made to a history so the target provider accepts it."""

    kind: str
    position: int
    """Index, in the messages given to ``dump``, of the message the change is about."""
    detail: str

    def __str__(self) -> str:
        return f"[{self.position}] {self.kind}: {self.detail}"


@dataclass(frozen=True)
class Dumped(Generic[P]):
    """A payload and the adjustments the send policy made to produce it."""

    payload: P
    adjustments: list[Adjustment]


@dataclass(frozen=True)
class Rules:
    """What one provider cannot take, so the policy adjusts it."""

    merge_split_turns: bool = False
    user_first: bool = False
    no_blank_text: bool = False
    no_empty_message: bool = False
    object_input: bool = False
    json_arguments: bool = False
    reasoning_needs_id: bool = False
    no_assistant_images: bool = False
    redacted_thinking: bool = False
    no_empty_text: bool = False


RULES: dict[str, Rules] = {
    "openai_chat": Rules(
        merge_split_turns=True, json_arguments=True, no_empty_message=True, no_assistant_images=True
    ),
    "openai_responses": Rules(
        json_arguments=True,
        reasoning_needs_id=True,
        no_empty_message=True,
        no_assistant_images=True,
        no_empty_text=True,
    ),
    "anthropic": Rules(
        user_first=True,
        no_blank_text=True,
        object_input=True,
        no_empty_message=True,
        no_assistant_images=True,
        redacted_thinking=True,
    ),
    "gemini": Rules(user_first=True, object_input=True),
    "bedrock": Rules(
        user_first=True,
        no_blank_text=True,
        object_input=True,
        no_empty_message=True,
        redacted_thinking=True,
    ),
}


def prepare(
    messages: Sequence[Message], fmt: str, *, dangling: Dangling = "answer"
) -> tuple[list[Message], list[Adjustment]]:
    """``messages`` adjusted for provider ``fmt``, and the adjustments made (none for a history
    the provider takes as it is; the input is never modified)."""
    if dangling not in ("answer", "drop"):
        raise UserError(
            f"dangling={dangling!r} is not a choice; use 'answer' (a synthetic "
            "interrupted result) or 'drop' (leave the call out)"
        )
    rules = RULES[fmt]
    adj: list[Adjustment] = []
    msgs: list[Message] = []
    where: list[int] = []  # input position of each message of ``msgs``
    for i, m in enumerate(messages):
        cleaned = _clean(m, i, fmt, rules, adj)
        if cleaned is not None:
            msgs.append(cleaned)
            where.append(i)
    msgs, where = _dedupe_calls(msgs, where, fmt, adj)
    msgs, where = _pair(msgs, where, fmt, rules, dangling, adj)
    if rules.user_first:
        _user_first(msgs, where, fmt, adj)
    adj.sort(key=lambda a: a.position)
    return msgs, adj


def refuse(adjustments: Sequence[Adjustment], fmt: str) -> UserError:
    """The error ``strict=True`` raises: every adjustment the history would need."""
    listed = "; ".join(f"({n}) {a}" for n, a in enumerate(adjustments, 1))
    return UserError(
        f"{fmt}: the history needs {len(adjustments)} adjustment(s) before it can "
        f"be sent: {listed}; dump without strict=True to let the send policy make "
        "them, or run Session.repair() to answer interrupted tool calls in the log"
    )


class Sender(Generic[P]):
    """A provider format's ``dump``: the send policy, then the format's shaping."""

    def __init__(
        self, fmt: str, shape: Callable[[Sequence[Message]], P], validate: Callable[[Any], None]
    ) -> None:
        self.fmt = fmt
        self.shape = shape
        self.validate = validate
        self.__doc__ = (
            f"The {fmt} payload for ``messages``, adjusted by the send policy.\n\n"
            "``strict=True`` refuses (``UserError``) a history the policy would adjust, and "
            "checks the payload with ``validate``; ``report=True`` returns a ``Dumped`` "
            "(payload, adjustments); ``dangling`` says what happens to tool calls no result "
            "answers: ``'answer'`` (a synthetic interrupted result) or ``'drop'``.\n\n"
            f"Shaping: {shape.__doc__ or ''}"
        )

    @overload
    def __call__(
        self,
        messages: Sequence[Message],
        *,
        strict: bool = ...,
        report: Literal[False] = ...,
        dangling: Dangling = ...,
    ) -> P: ...

    @overload
    def __call__(
        self,
        messages: Sequence[Message],
        *,
        strict: bool = ...,
        report: Literal[True],
        dangling: Dangling = ...,
    ) -> Dumped[P]: ...

    @overload
    def __call__(
        self,
        messages: Sequence[Message],
        *,
        strict: bool = ...,
        report: bool,
        dangling: Dangling = ...,
    ) -> P | Dumped[P]: ...

    def __call__(
        self,
        messages: Sequence[Message],
        *,
        strict: bool = False,
        report: bool = False,
        dangling: Dangling = "answer",
    ) -> P | Dumped[P]:
        adjusted, adjustments = prepare(messages, self.fmt, dangling=dangling)
        if strict:
            if adjustments:
                raise refuse(adjustments, self.fmt)
            payload = self.shape(messages)
            self.validate(payload)
        else:
            payload = self.shape(adjusted)
        return Dumped(payload, adjustments) if report else payload


# -- per message ----------------------------------------------------------------------------


def _sendable(m: Message, fmt: str) -> bool:
    return bool(m.content) or bool(details(m, fmt))


def _clean(m: Message, i: int, fmt: str, rules: Rules, adj: list[Adjustment]) -> Message | None:
    """``m`` with the blocks ``fmt`` cannot take adjusted; None when nothing is left."""
    _note_foreign(m, i, fmt, adj)
    if not _sendable(m, fmt):
        if m.role == "system":  # an empty system prompt would still open a system slot
            adj.append(
                Adjustment(
                    kind="dropped_empty_message",
                    position=i,
                    detail="system message with no content left out",
                )
            )
            return None
        return m  # the format's shaping leaves it out, as it always did
    if m.role in _PLAIN_ROLES and all(_blank_text(b, fmt, rules) for b in m.content):
        return _empty(m, i, fmt, rules, adj)
    blocks: list[Block] = []
    changed = False
    with_results = any(isinstance(b, ToolResultBlock) for b in m.content)
    for b in m.content:
        if with_results and isinstance(b, TextBlock) and not b.text.content and not details(b, fmt):
            # beside results it would become a message of its own, with nothing in it
            adj.append(
                Adjustment(
                    kind="dropped_blank_text",
                    position=i,
                    detail="empty text block beside tool results left out",
                )
            )
            changed = True
            continue
        moved = _misplaced(b, m.role, i, rules, adj)
        if moved is not None:
            changed = True
            blocks.extend(moved)
            continue
        new = _clean_block(b, i, fmt, rules, adj)
        changed = changed or new is not b
        if new is not None:
            blocks.append(new)
    if details(m, fmt):
        return msgspec.structs.replace(m, content=blocks) if changed else m
    if not blocks:
        adj.append(
            Adjustment(
                kind="dropped_empty_message",
                position=i,
                detail=f"{m.role} message with nothing left to send left out",
            )
        )
        return None
    if all(_blank_text(b, fmt, rules) for b in blocks):
        return _empty(msgspec.structs.replace(m, content=blocks), i, fmt, rules, adj)
    return msgspec.structs.replace(m, content=blocks) if changed else m


_PLAIN_ROLES = ("user", "tool", "assistant", "system")  # the roles a provider has a slot for

# where each format keeps, on a message, the provider items threadline has no block for
_FOREIGN_KEYS = {
    "anthropic": ("blocks",),
    "bedrock": ("blocks",),
    "gemini": ("parts",),
    "openai_chat": ("parts",),
    "openai_responses": ("items", "parts_kept"),
}


def _note_foreign(m: Message, i: int, fmt: str, adj: list[Adjustment]) -> None:
    """Report the items another provider sent that only that provider can be sent back (a
    built-in tool call, a server-side compaction…): ``fmt``'s shaping leaves them out."""
    for other, keys in _FOREIGN_KEYS.items():
        mine = details(m, other) if other != fmt else {}
        kept = [x for key in keys if isinstance(mine.get(key), list) for x in mine[key]]
        if not kept:
            continue
        kinds = [_item_kind(x[1]) for x in kept if isinstance(x, list) and len(x) == 2]
        adj.append(
            Adjustment(
                kind="dropped_provider_items",
                position=i,
                detail=f"{len(kept)} {other} item(s) with no {fmt} form left out "
                f"({', '.join(sorted(set(kinds)))})",
            )
        )


def _item_kind(raw: Any) -> str:
    if isinstance(raw, dict):
        kind = raw.get("type")
        return str(kind) if kind else next(iter(raw), "?")
    return type(raw).__name__


def _empty(m: Message, i: int, fmt: str, rules: Rules, adj: list[Adjustment]) -> Message | None:
    """A message holding only blank text: kept where the provider takes it; else a user turn
    stays with :data:`EMPTY_USER_TEXT`, any other message is left out."""
    if not rules.no_empty_message or m.role not in _PLAIN_ROLES or details(m, fmt):
        return m
    if m.role in ("user", "tool"):
        adj.append(
            Adjustment(
                kind="filled_empty_message",
                position=i,
                detail=f"{m.role} message with no text sent as {EMPTY_USER_TEXT!r}",
            )
        )
        return msgspec.structs.replace(m, role="user", content=[text(EMPTY_USER_TEXT)])
    adj.append(
        Adjustment(
            kind="dropped_empty_message",
            position=i,
            detail=f"{m.role} message with no text left out",
        )
    )
    return None


def _misplaced(
    b: Block, role: str, i: int, rules: Rules, adj: list[Adjustment]
) -> list[Block] | None:
    """A block a message of ``role`` cannot hold, in its nearest text form (None: it may stay).
    Calls and thinking belong to assistant messages, results to user and tool messages; images
    to user messages (and, where the provider takes them, assistant ones)."""
    if isinstance(b, ToolUseBlock) and role != "assistant":
        u = b.tool_use
        adj.append(
            Adjustment(
                kind="misplaced_block_as_text",
                position=i,
                detail=f"tool call {u.id!r} in a {role} message sent as text",
            )
        )
        return [
            text(
                f"[tool call {u.name} {u.id}]\n"
                f"{_json_text(u.input, i, u.id, ensure_ascii=False, default=str)}"
            )
        ]
    if isinstance(b, ToolResultBlock) and role not in ("user", "tool"):
        adj.append(
            Adjustment(
                kind="misplaced_block_as_text",
                position=i,
                detail=f"tool result for {b.tool_result.tool_use_id!r} in a {role} "
                "message sent as text",
            )
        )
        out: list[Block] = []
        for part in _result_as_text(b):
            out.extend(_misplaced(part, role, i, rules, adj) or [part])
        return out
    if isinstance(b, ThinkingBlock) and role != "assistant":
        t = b.thinking
        keep = bool(t.content) and not t.redacted
        adj.append(
            Adjustment(
                kind="misplaced_block_as_text",
                position=i,
                detail=f"thinking in a {role} message "
                + ("sent as <think> text" if keep else "with no text left out"),
            )
        )
        return [text(f"<think>\n{t.content}\n</think>")] if keep else []
    no_slot = role == "system" or (role == "assistant" and rules.no_assistant_images)
    if isinstance(b, ImageBlock) and no_slot:
        src = b.image.source
        said = (
            f"[image: {src.data}]"
            if src.type == "url"
            else f"[image: {src.media_type or 'unknown type'}, not sent]"
        )
        adj.append(
            Adjustment(
                kind="image_as_text",
                position=i,
                detail=f"image in a {role} message sent as the text {said!r}",
            )
        )
        return [text(said)]
    return None


def _clean_block(b: Block, i: int, fmt: str, rules: Rules, adj: list[Adjustment]) -> Block | None:
    if isinstance(b, TextBlock):
        if (rules.no_blank_text or rules.no_empty_text) and _blank_text(b, fmt, rules):
            adj.append(
                Adjustment(
                    kind="dropped_blank_text",
                    position=i,
                    detail=f"blank text block {b.text.content!r} left out",
                )
            )
            return None
        return b
    if isinstance(b, (ImageBlock, ToolResultBlock)):
        return b
    mine = details(b, fmt)
    if isinstance(b, ThinkingBlock):
        t = b.thinking
        if (
            rules.reasoning_needs_id
            and isinstance(mine.get("reasoning"), dict)
            and not mine["reasoning"].get("id")
        ):
            rest = {k: v for k, v in mine.items() if k != "reasoning"}
            pd = {**(b.provider_details or {}), fmt: rest}
            if not rest:
                del pd[fmt]
            adj.append(
                Adjustment(
                    kind="reasoning_as_text",
                    position=i,
                    detail="reasoning item without an id sent as <think> text"
                    if t.content
                    else "reasoning item without an id or text left out",
                )
            )
            if not t.content:
                return None
            return msgspec.structs.replace(b, provider_details=pd or None)
        if t.redacted and not rules.redacted_thinking:
            adj.append(
                Adjustment(
                    kind="dropped_redacted_thinking",
                    position=i,
                    detail="redacted thinking (opaque to this provider) left out",
                )
            )
            return None
        if not t.content and t.signature is None and not t.redacted and not mine:
            adj.append(
                Adjustment(
                    kind="dropped_empty_thinking",
                    position=i,
                    detail="thinking block with no text left out",
                )
            )
            return None
        return b
    if isinstance(b, ToolUseBlock):
        u = b.tool_use
        new = b
        if rules.object_input and not isinstance(u.input, dict):
            value: dict[str, Any] = {} if u.input is None else {"input": u.input}
            adj.append(
                Adjustment(
                    kind="tool_input_wrapped",
                    position=i,
                    detail=f"input of tool call {u.id!r} is not an object; sent "
                    f"as {_json_text(value, i, u.id)[:60]}",
                )
            )
            new = msgspec.structs.replace(new, tool_use=msgspec.structs.replace(u, input=value))
        kept = mine.get("arguments", "")
        if rules.json_arguments and "arguments" in mine and not _json_string(kept):
            rest = {k: v for k, v in mine.items() if k != "arguments"}
            pd = {**(b.provider_details or {}), fmt: rest}
            adj.append(
                Adjustment(
                    kind="arguments_reencoded",
                    position=i,
                    detail=f"kept arguments of tool call {u.id!r} are not a JSON "
                    "string; the input was encoded again",
                )
            )
            new = msgspec.structs.replace(new, provider_details=pd)
        return new
    return b


def _blank_text(b: Block, fmt: str, rules: Rules) -> bool:
    """A text block with nothing the provider takes: empty, or blank where blank text is
    refused."""
    if not isinstance(b, TextBlock):
        return False
    said = b.text.content
    blank = not said.strip() if rules.no_blank_text else not said
    return blank and not details(b, fmt)


def _json_text(value: Any, position: int, call_id: str, **options: Any) -> str:
    """``json.dumps(value)`` of a tool call's input; input nested deeper than Python recurses
    is refused naming the message and the call."""
    try:
        return json.dumps(value, **options)
    except RecursionError:
        raise UserError(
            f"message {position}: the input of tool call {call_id!r} is nested too deeply to "
            "send; flatten it"
        ) from None


def _json_string(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        json.loads(value)
    except json.JSONDecodeError:
        return False
    return True


# -- tool pairing ---------------------------------------------------------------------------


def _dedupe_calls(
    msgs: list[Message], where: list[int], fmt: str, adj: list[Adjustment]
) -> tuple[list[Message], list[int]]:
    """Call ids used once each: a repeated identical call is left out, a different call that
    reuses an id gets ``<id>_<n>`` (and so does the next result for that id after the first)."""
    calls: dict[str, tuple[str, Any]] = {}
    renamed: dict[str, list[str]] = {}
    answered: set[str] = set()
    out: list[Message] = []
    out_where: list[int] = []
    for m, p in zip(msgs, where, strict=True):
        blocks: list[Block] = []
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                u = b.tool_use
                if u.id in calls and calls[u.id] == (u.name, u.input):
                    adj.append(
                        Adjustment(
                            kind="dropped_duplicate_call",
                            position=p,
                            detail=f"tool call {u.id!r} ({u.name}) repeats an "
                            "earlier identical call; left out",
                        )
                    )
                    continue
                if u.id in calls:
                    n = 2
                    while f"{u.id}_{n}" in calls:
                        n += 1
                    new_id = f"{u.id}_{n}"
                    renamed.setdefault(u.id, []).append(new_id)
                    adj.append(
                        Adjustment(
                            kind="renamed_duplicate_call",
                            position=p,
                            detail=f"tool call id {u.id!r} is used by an earlier "
                            f"call; sent as {new_id!r}",
                        )
                    )
                    u = msgspec.structs.replace(u, id=new_id)
                    b = msgspec.structs.replace(b, tool_use=u)
                calls[u.id] = (u.name, u.input)
            elif isinstance(b, ToolResultBlock):
                rid = b.tool_result.tool_use_id
                if rid in answered and renamed.get(rid):
                    r = msgspec.structs.replace(b.tool_result, tool_use_id=renamed[rid].pop(0))
                    b = msgspec.structs.replace(b, tool_result=r)
                answered.add(rid)
            blocks.append(b)
        if len(blocks) == len(m.content) and all(
            x is y for x, y in zip(blocks, m.content, strict=True)
        ):
            out.append(m)
        elif blocks or details(m, fmt):
            out.append(msgspec.structs.replace(m, content=blocks))
        else:
            adj.append(
                Adjustment(
                    kind="dropped_empty_message",
                    position=p,
                    detail=f"{m.role} message holding only repeated calls left out",
                )
            )
            continue
        out_where.append(p)
    return out, out_where


def _pair(
    msgs: list[Message],
    where: list[int],
    fmt: str,
    rules: Rules,
    dangling: Dangling,
    adj: list[Adjustment],
) -> tuple[list[Message], list[int]]:
    """Every tool result right after its call, every call answered (or dropped), results
    that answer nothing turned into text."""
    out: list[Message] = []
    out_where: list[int] = []
    turns = tool_turns(msgs)
    # results before the first assistant turn answer nothing
    head = turns[0].first if turns else len(msgs)
    for k in range(head):
        _emit_orphans(msgs[k], where[k], set(), out, out_where, adj)
    for turn in turns:
        run = list(range(turn.first, turn.last + 1))
        call_ids = [u.id for _, u in turn.calls]
        answered = answered_ids(msgs, turn)
        missing = [(p, u) for p, u in turn.calls if u.id not in answered]
        run_msgs = [msgs[p] for p in run]
        if missing and dangling == "drop":
            gone = {u.id for _, u in missing}
            for p, u in missing:
                adj.append(
                    Adjustment(
                        kind="dropped_dangling_call",
                        position=where[p],
                        detail=f"tool call {u.id!r} ({u.name}) has no result; left out",
                    )
                )
            run_msgs = [
                msgspec.structs.replace(
                    m,
                    content=[
                        b
                        for b in m.content
                        if not (isinstance(b, ToolUseBlock) and b.tool_use.id in gone)
                    ],
                )
                for m in run_msgs
            ]
            kept = [
                (m, where[p])
                for m, p in zip(run_msgs, run, strict=True)
                if m.content or details(m, fmt)
            ]
            for m, p in zip(run_msgs, run, strict=True):
                if not (m.content or details(m, fmt)):
                    adj.append(
                        Adjustment(
                            kind="dropped_empty_message",
                            position=where[p],
                            detail="assistant message holding only dropped calls left out",
                        )
                    )
            run_pairs = kept
            call_ids = [c for c in call_ids if c not in gone]
        else:
            run_pairs = [(m, where[p]) for m, p in zip(run_msgs, run, strict=True)]
        calls_before_last = any(m.tool_uses for m, _ in run_pairs[:-1])
        if rules.merge_split_turns and len(run_pairs) > 1 and calls_before_last:
            merged = _merge([m for m, _ in run_pairs])
            adj.append(
                Adjustment(
                    kind="merged_turn",
                    position=run_pairs[0][1],
                    detail=f"{len(run_pairs)} consecutive assistant messages "
                    "holding parallel tool calls sent as one turn",
                )
            )
            run_pairs = [(merged, run_pairs[0][1])]
        for m, p in run_pairs:
            out.append(m)
            out_where.append(p)
        side = range(turn.last + 1, turn.end)
        synthetic: list[tuple[Message, int]] = []
        if missing and dangling == "answer":
            for p, u in missing:
                adj.append(
                    Adjustment(
                        kind="answered_dangling_call",
                        position=where[p],
                        detail=f"tool call {u.id!r} ({u.name}) has no result; "
                        "answered as interrupted",
                    )
                )
            synthetic = [(interrupted_results([u.id for _, u in missing]), where[turn.last])]
        _emit_side(msgs, where, side, set(call_ids), synthetic, out, out_where, adj)
    return out, out_where


def _emit_side(
    msgs: list[Message],
    where: list[int],
    side: range,
    calls: set[str],
    synthetic: list[tuple[Message, int]],
    out: list[Message],
    out_where: list[int],
    adj: list[Adjustment],
) -> None:
    """The synthetic results, then the answer side of a turn, its results first."""
    seen: set[str] = set()
    parts: list[tuple[Message, int, Message | None, Message | None]] = []
    in_order = True  # no other content before a result so far
    content_seen = False
    for k in side:
        m, p = msgs[k], where[k]
        mine, other = _split_results(m, p, calls, seen, adj)
        if mine is not None and content_seen:
            in_order = False
        content_seen = content_seen or other is not None
        parts.append((m, p, mine, other))
    for m, p in synthetic:
        out.append(m)
        out_where.append(p)
    if in_order:  # each message stays whole (a format splits a mixed one as it always did)
        for m, p, mine, other in parts:
            out.append(_whole(m, mine, other))
            out_where.append(p)
        return
    first = next(p for _, p, mine, _ in parts if mine is not None)
    adj.append(
        Adjustment(
            kind="moved_tool_result",
            position=first,
            detail="tool results moved in front of the other messages that followed their calls",
        )
    )
    for _, p, mine, _ in parts:
        if mine is not None:
            out.append(mine)
            out_where.append(p)
    for _, p, _, other in parts:
        if other is not None:
            out.append(other)
            out_where.append(p)


def _whole(m: Message, mine: Message | None, other: Message | None) -> Message:
    if mine is None or other is None:
        found = mine if mine is not None else other
        assert found is not None
        return found
    if mine.content + other.content == m.content:
        return m
    return msgspec.structs.replace(m, content=mine.content + other.content)


def _split_results(
    m: Message, p: int, calls: set[str], seen: set[str], adj: list[Adjustment]
) -> tuple[Message | None, Message | None]:
    """(the results of ``m`` answering ``calls``, the rest of ``m``), each None when empty and
    ``m`` itself when it is all of ``m``; results that answer no call of the turn, or a call
    already answered, become text in the rest."""
    if not m.tool_results:
        return None, m
    mine: list[Block] = []
    other: list[Block] = []
    for b in m.content:
        if isinstance(b, ToolResultBlock):
            cid = b.tool_result.tool_use_id
            if cid in calls and cid not in seen:
                seen.add(cid)
                mine.append(b)
                continue
            why = (
                "answers a call already answered"
                if cid in seen
                else "answers no tool call right before it"
            )
            adj.append(
                Adjustment(
                    kind="orphan_result_as_text",
                    position=p,
                    detail=f"tool result for {cid!r} {why}; sent as user text",
                )
            )
            other.extend(_result_as_text(b))
        else:
            other.append(b)
    if not other:
        return m, None
    as_user = "user" if m.role == "tool" else m.role
    rest = msgspec.structs.replace(m, role=as_user, content=other)
    if not mine:
        return None, rest
    return msgspec.structs.replace(m, content=mine), rest


def _emit_orphans(
    m: Message,
    p: int,
    calls: set[str],
    out: list[Message],
    out_where: list[int],
    adj: list[Adjustment],
) -> None:
    mine, other = _split_results(m, p, calls, set(), adj)
    for part in (mine, other):
        if part is not None:
            out.append(part)
            out_where.append(p)


def _result_as_text(b: ToolResultBlock) -> list[Block]:
    r = b.tool_result
    label = f"[tool result for call {r.tool_use_id}{' (error)' if r.is_error else ''}]"
    if isinstance(r.content, str):
        return [text(f"{label}\n{r.content}" if r.content else label)]
    texts = "\n".join(p.text.content for p in r.content if isinstance(p, TextBlock))
    images: list[Block] = [p for p in r.content if isinstance(p, ImageBlock)]
    return [text(f"{label}\n{texts}" if texts else label), *images]


def _merge(run: Sequence[Message]) -> Message:
    """Consecutive assistant messages as one: their blocks in order, the first one's details,
    the last one's model, usage and stop reason."""
    content = [b for m in run for b in m.content]
    return msgspec.structs.replace(
        run[0],
        content=content,
        model=run[-1].model,
        usage=run[-1].usage,
        stop_reason=run[-1].stop_reason,
    )


def _user_first(msgs: list[Message], where: list[int], fmt: str, adj: list[Adjustment]) -> None:
    i = 0
    while i < len(msgs) and (msgs[i].role == "system" or not _sendable(msgs[i], fmt)):
        i += 1
    if i < len(msgs) and msgs[i].role == "assistant":
        msgs.insert(i, Message(role="user", content=[text(LEADING_USER_TEXT)]))
        where.insert(i, where[i])
        adj.append(
            Adjustment(
                kind="leading_user_turn",
                position=where[i],
                detail="the history starts with an assistant turn; a user turn "
                f"{LEADING_USER_TEXT!r} was put before it",
            )
        )


__all__ = ["RULES", "Adjustment", "Dangling", "Dumped", "Rules", "Sender", "prepare", "refuse"]
