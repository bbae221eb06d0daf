"""Property tests of the send policy over random session trees (docs/formats.md, "Send
policy"): interrupted turns, parallel calls split over several assistant messages, results out
of place, compactions, branch switches and context operations at any point.

For every provider format: the default dump passes the provider's validator and keeps every user
and assistant text; ``strict=True`` refuses exactly the histories the policy adjusts; after
``Session.repair()`` no interrupted call is left to answer.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline import formats
from threadline.errors import UserError
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    image,
    image_url,
    text,
    thinking,
    tool_result,
    tool_use,
)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
words = st.from_regex(r"[a-z][a-z ]{0,11}", fullmatch=True)

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), words),
        st.tuples(st.just("blank_user"), st.sampled_from(["", " ", "\n"])),
        st.tuples(st.just("assistant"), words),
        st.tuples(st.just("aborted"), st.none()),
        # calls, split over messages?, which results come, a user text before them?, order
        st.tuples(
            st.just("turn"),
            st.tuples(
                st.integers(1, 3),
                st.booleans(),
                st.lists(st.booleans(), min_size=3, max_size=3),
                st.booleans(),
                st.booleans(),
            ),
        ),
        st.tuples(st.just("stray_result"), words),
        st.tuples(st.just("compaction"), st.integers(0, 40)),
        st.tuples(st.just("branch"), st.integers(0, 40)),
        st.tuples(
            st.just("op"),
            st.tuples(
                st.sampled_from(["snip", "digest", "insert"]), st.integers(0, 40), st.integers(0, 3)
            ),
        ),
    ),
    min_size=1,
    max_size=14,
)


def build(steps: list[tuple[str, Any]]) -> tl.Session:
    s = tl.open_store("memory://").create()
    n_calls = 0
    for kind, arg in steps:
        if kind == "user":
            s.append_message("user", arg)
        elif kind == "blank_user":
            s.append_message("user", [text(arg)])
        elif kind == "assistant":
            s.append_message("assistant", arg)
        elif kind == "aborted":
            s.append_message("assistant", [text("")])
        elif kind == "turn":
            k, split, answered, text_first, reverse = arg
            ids = [f"call_{n_calls + i}" for i in range(k)]
            n_calls += k
            calls: list[Block] = [tool_use(c, "read", {"n": i}) for i, c in enumerate(ids)]
            if split:
                for b in calls:
                    s.append_message("assistant", [b])
            else:
                s.append_message("assistant", [text("calling"), *calls])
            if text_first:
                s.append_message("user", "wait")
            done = [c for c, yes in zip(ids, answered, strict=False) if yes]
            for c in reversed(done) if reverse else done:
                s.append_message("tool", [tool_result(c, f"result of {c}")])
        elif kind == "stray_result":
            s.append_message("tool", [tool_result(f"gone_{arg}", arg)])
        elif kind in ("compaction", "branch"):
            path = [e.id for e in s.path()]
            if not path:
                continue
            target = path[arg % len(path)]
            if kind == "branch":
                s.branch(target)
            else:
                s.append_compaction("earlier work", target, 100)
        elif kind == "op":
            op, at, width = arg
            n = len(s.context().messages)
            if n == 0:
                continue
            start = at % n
            end = min(n - 1, start + width)
            try:
                if op == "snip":
                    s.snip(start, end)
                elif op == "digest":
                    s.digest(start, end, "digest of a range")
                else:
                    s.insert(start, [Message(role="user", content=[text("inserted")])])
            except UserError:
                pass  # the op would have split a tool pair: refused, as it should be
    return s


def _strings(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _texts(messages: list[Message]) -> list[str]:
    return [
        b.text.content
        for m in messages
        if m.role in ("user", "assistant")
        for b in m.content
        if isinstance(b, TextBlock) and b.text.content.strip()
    ]


def _sendable(messages: list[Message]) -> bool:
    """A conversation to send: something besides system and blank text (a history of only an
    aborted, empty reply has nothing a provider could be sent)."""
    return any(
        m.role != "system"
        and any(not isinstance(b, TextBlock) or b.text.content.strip() for b in m.content)
        for m in messages
    )


@SETTINGS
@given(STEPS)
def test_any_session_dumps_valid_for_every_provider_and_strict_refuses_exactly_the_adjusted(
    steps: list[tuple[str, Any]],
) -> None:
    s = build(steps)
    messages = list(s.context().messages)
    if not _sendable(messages):
        return
    for name in formats.PROVIDER_FORMATS:
        module = formats.get(name)
        dumped = formats.dump_context(name, messages, report=True)  # validated
        found = _strings(dumped.payload)
        assert [t for t in _texts(messages) if json.dumps(t)[1:-1] not in found] == []
        if dumped.adjustments:
            try:
                module.dump(messages, strict=True)
            except UserError as exc:
                assert f"needs {len(dumped.adjustments)} adjustment(s)" in str(exc)
            else:
                raise AssertionError(f"{name}: strict accepted a history the policy adjusted")
        else:
            assert module.dump(messages, strict=True) == dumped.payload


@SETTINGS
@given(STEPS)
def test_after_repair_no_provider_answers_an_interrupted_call_and_undo_restores(
    steps: list[tuple[str, Any]],
) -> None:
    s = build(steps)
    before = list(s.context().messages)
    done = s.repair(apply=True)
    after = list(s.context().messages)
    if _sendable(after):
        for name in formats.PROVIDER_FORMATS:
            kinds = {a.kind for a in formats.dump_context(name, after, report=True).adjustments}
            assert "answered_dangling_call" not in kinds
    s.undo_repair(done.op_ids)
    assert list(s.context().messages) == before


# -- any message list, whatever role holds whatever block ------------------------------------

ROLES = [
    "user",
    "assistant",
    "tool",
    "system",
    "compactionSummary",
    "branchSummary",
    "bashExecution",
    "custom",
]


@st.composite
def any_block(draw: st.DrawFn, ids: list[str]) -> Block:
    kind = draw(
        st.sampled_from(
            [
                "text",
                "blank",
                "image",
                "image_url",
                "thinking",
                "signed",
                "redacted",
                "call",
                "result",
                "result_image",
            ]
        )
    )
    if kind == "text":
        return text(draw(words))
    if kind == "blank":
        return text(draw(st.sampled_from(["", " ", "\n"])))
    if kind == "image":
        return image("iVBORw0KGgo=", "image/png")
    if kind == "image_url":
        return image_url("https://example.com/a.png")
    if kind == "thinking":
        return thinking(draw(st.sampled_from(["", "hmm"])))
    if kind in ("signed", "redacted"):
        b = thinking("s" if kind == "signed" else "", signature="sig")
        b.thinking.redacted = kind == "redacted"
        return b
    if kind == "call":
        ids.append(f"c{len(ids)}")
        return tool_use(ids[-1], "f", draw(st.sampled_from([{}, {"a": 1}, None, "s", [1]])))
    target = draw(st.sampled_from(ids)) if ids else "nowhere"
    if kind == "result":
        return tool_result(target, draw(st.sampled_from(["", "out"])), is_error=draw(st.booleans()))
    return tool_result(target, [text("t"), image("iVBORw0KGgo=", "image/png")])


@st.composite
def any_history(draw: st.DrawFn) -> list[Message]:
    ids: list[str] = []
    return [
        Message(
            role=draw(st.sampled_from(ROLES)), content=draw(st.lists(any_block(ids), max_size=3))
        )
        for _ in range(draw(st.integers(1, 7)))
    ]


def _has_content(messages: list[Message]) -> bool:
    """Something a provider can be sent besides system text (a system prompt alone is not a
    conversation: every provider refuses it): a non-blank text, a call, a result or an image."""
    return any(
        isinstance(b, (ImageBlock, ToolUseBlock, ToolResultBlock))
        or (isinstance(b, TextBlock) and b.text.content.strip())
        for m in messages
        if m.role != "system"
        for b in m.content
    )


@SETTINGS
@given(any_history())
def test_any_message_list_dumps_valid_for_every_provider(messages: list[Message]) -> None:
    if not _has_content(messages):
        return
    for name in formats.PROVIDER_FORMATS:
        dumped = formats.dump_context(name, messages, report=True)  # validated
        found = _strings(dumped.payload)
        assert [t for t in _texts(messages) if json.dumps(t)[1:-1] not in found] == []
        if not dumped.adjustments:
            assert formats.get(name).dump(messages, strict=True) == dumped.payload
