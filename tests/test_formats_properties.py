"""Property tests: random histories with valid tool pairing through every provider format.

Two properties:
* a history in the shape a format can express comes back equal from ``load(dump(x))``;
* any history (mixed tool-result styles, consecutive user turns, summaries, signed and redacted
  thinking, error results) dumps to a payload its validator accepts, with every tool call and
  result and every user text still there after a reload.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import formats
from threadline.errors import UserError
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    image,
    image_url,
    text,
    thinking,
    tool_result,
    tool_use,
)


@dataclass(frozen=True)
class Caps:
    """What a format can express without normalizing."""

    tool_messages: bool  # tool results as `tool` messages (else in one user message)
    signed_thinking: bool  # thinking signatures and redacted thinking survive
    is_error: bool  # tool result error flag survives
    result_images: bool  # tool results may hold images
    alternation: bool  # no two user or two assistant turns in a row
    url_images: bool
    url_media_type: bool = False  # an image URL keeps its media type


CAPS = {
    "openai_chat": Caps(True, False, False, False, False, True),
    "openai_responses": Caps(True, False, False, True, False, True),
    "anthropic": Caps(False, True, True, True, True, True),
    "gemini": Caps(False, False, True, False, True, True, url_media_type=True),
    "bedrock": Caps(False, True, True, True, True, False),
}
ANY = Caps(True, True, True, True, False, True)

words = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 .,!?]{0,24}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def images(draw: st.DrawFn, caps: Caps) -> ImageBlock:
    if caps.url_images and draw(st.booleans()):
        return image_url(
            f"https://example.com/{draw(st.integers(0, 99))}.png",
            media_type="image/png" if caps.url_media_type else "",
        )
    return image(
        draw(st.sampled_from(["iVBORw0KGgo=", "R0lGODlhAQABAAAAACw="])),
        media_type=draw(st.sampled_from(["image/png", "image/gif"])),
    )


@st.composite
def thinking_blocks(draw: st.DrawFn, caps: Caps) -> Block:
    kind = draw(
        st.sampled_from(["plain", "signed", "redacted"] if caps.signed_thinking else ["plain"])
    )
    if kind == "signed":
        return thinking(draw(words), signature=draw(st.sampled_from(["EqQBCkgIARABGAIiQ", "sig"])))
    if kind == "redacted":
        return thinking("", signature="EmwKAhgBEgy3va3pzix", redacted=True)
    return thinking(draw(words))


@st.composite
def histories(draw: st.DrawFn, caps: Caps) -> list[Message]:
    ids = count(1)
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message(role="system", content=[text(draw(words))]))
    for turn in range(draw(st.integers(1, 4))):
        # the user side: a person, a summary, or (not at the very start) a system note
        kinds = ["user", "user", "compactionSummary", "branchSummary", "bashExecution"]
        if turn:
            kinds.append("system")
        kind = draw(st.sampled_from(kinds))
        if kind == "user":
            blocks: list[Block] = [text(draw(words))]
            if draw(st.booleans()):
                blocks.append(draw(images(caps)))
            out.append(Message(role="user", content=blocks))
        else:
            out.append(Message(role=kind, content=[text(draw(words))]))
            if kind != "user" and (caps.alternation or kind == "system"):
                out.append(Message(role="user", content=[text(draw(words))]))
        # the assistant side: thinking, text, tool calls and their results, repeated
        for _ in range(draw(st.integers(1, 2))):
            blocks = []
            if draw(st.booleans()):
                blocks.append(draw(thinking_blocks(caps)))
            calls = [
                tool_use(
                    f"call_{next(ids)}",
                    draw(st.sampled_from(["read", "grep"])),
                    draw(st.dictionaries(words, json_values, max_size=2)),
                )
                for _ in range(draw(st.integers(0, 3)))
            ]
            if draw(st.booleans()) or not calls:
                blocks.append(text(draw(words)))
            blocks.extend(calls)
            out.append(Message(role="assistant", content=blocks))
            if not calls:
                break
            results = [_result(draw, caps, c.tool_use.id) for c in calls]
            if caps.tool_messages:
                out.extend(Message(role="tool", content=[r]) for r in results)
            else:
                out.append(Message(role="user", content=list(results)))
        if not caps.alternation and draw(st.booleans()):
            out.append(Message(role="user", content=[text(draw(words))]))  # two user turns
    return _alternate(out) if caps.alternation else out


def _result(draw: st.DrawFn, caps: Caps, call_id: str) -> Block:
    is_error = caps.is_error and draw(st.booleans())
    if caps.result_images and draw(st.booleans()):
        return tool_result(call_id, [text(draw(words)), draw(images(caps))], is_error=is_error)
    return tool_result(call_id, draw(words), is_error=is_error)


def _alternate(messages: list[Message]) -> list[Message]:
    """Drop a plain user message that would follow another user-side message of the same
    plain kind (formats that need alternation merge them)."""
    out: list[Message] = []
    for m in messages:
        prev = out[-1] if out else None
        if prev is not None and m.role == "user" and prev.role == "user":
            continue
        if prev is not None and m.role == "assistant" and prev.role == "assistant":
            continue
        out.append(m)
    return out


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", formats.PROVIDER_FORMATS)
def test_a_history_the_format_can_express_round_trips_and_validates(name: str) -> None:
    module = formats.get(name)

    @SETTINGS
    @given(histories(CAPS[name]))
    def check(history: list[Message]) -> None:
        payload = module.dump(history)
        module.validate(payload)
        assert module.load(payload) == history

    check()


@pytest.mark.parametrize("name", formats.PROVIDER_FORMATS)
def test_any_history_dumps_to_a_valid_payload_keeping_tool_pairs_and_user_text(name: str) -> None:
    module = formats.get(name)

    @SETTINGS
    @given(histories(ANY))
    def check(history: list[Message]) -> None:
        payload = formats.dump_context(name, history)
        back = module.load(payload)
        assert _tool_ids(back) == _tool_ids(history)
        assert _in_order(_texts(history, "user"), _texts(back, "user"))

    check()


def _tool_ids(messages: list[Message]) -> tuple[list[str], list[str]]:
    return (
        [u.id for m in messages for u in m.tool_uses],
        [r.tool_use_id for m in messages for r in m.tool_results],
    )


def _in_order(wanted: list[str], found: list[str]) -> bool:
    """``wanted`` is a subsequence of ``found`` (a dump may add a caption, never drop text)."""
    rest = iter(found)
    return all(any(w == f for f in rest) for w in wanted)


def _texts(messages: list[Message], role: str) -> list[str]:
    return [
        b.text.content
        for m in messages
        if m.role == role
        for b in m.content
        if isinstance(b, TextBlock)
    ]


@pytest.mark.parametrize("name", formats.PROVIDER_FORMATS)
def test_a_history_missing_a_tool_result_is_refused_naming_the_call(name: str) -> None:
    """The raw shaping of such a history fails the validator, and a strict dump refuses it."""
    module = formats.get(name)

    @SETTINGS
    @given(histories(ANY), st.data())
    def check(history: list[Message], data: st.DataObject) -> None:
        answered = [r.tool_use_id for m in history for r in m.tool_results]
        if not answered:
            return
        dropped = data.draw(st.sampled_from(answered))
        without = [
            Message(
                role=m.role,
                content=[
                    b
                    for b in m.content
                    if not (isinstance(b, ToolResultBlock) and b.tool_result.tool_use_id == dropped)
                ],
            )
            for m in history
        ]
        kept = [m for m in without if m.content]
        with pytest.raises(UserError, match=f"'{dropped}'"):
            module.validate(module.shape(kept))
        with pytest.raises(UserError, match=f"answered_dangling_call: tool call '{dropped}'"):
            module.dump(kept, strict=True)

    check()
