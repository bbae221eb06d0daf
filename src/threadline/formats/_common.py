"""Helpers shared by the provider format modules (never imported by users).

Three ideas every format module relies on:

* **Namespaced leftovers.** Whatever a provider sent that threadline has no field for rides in
  ``provider_details[<format name>]`` of the block or message it came with, and only that format's
  ``dump`` puts it back. Details of other formats are ignored by a dump (a provider rejects fields
  it does not know), so a block keeps, say, its Anthropic ``cache_control`` and its Gemini
  ``thoughtSignature`` side by side.
* **Defaults stay leftovers.** A field present with its default value (``"is_error": false``) is
  kept as a leftover rather than consumed, so ``dump(load(y))`` writes it back exactly as it came.
* **Wrapped roles.** Roles a provider has no slot for (``compactionSummary``, ``branchSummary``,
  ``bashExecution``, ``custom`` and, where system text must come first, a ``system`` message in the
  middle of a conversation) become user text wrapped in a tag, ``<compaction_summary>\\n…\\n
  </compaction_summary>``; ``load`` recognises the tags and restores the role.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

import msgspec

from threadline.errors import ThreadlineError, UserError, malformed_input
from threadline.model.content import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    Thinking,
    ThinkingBlock,
    image,
    image_url,
    text,
)

JSON = dict[str, Any]

# role -> wrapper tag used when a provider has no slot for the role
WRAPPED_ROLES: dict[str, str] = {
    "compactionSummary": "compaction_summary",
    "branchSummary": "branch_summary",
    "bashExecution": "bash_execution",
    "custom": "custom_message",
    "system": "system_message",
}
_TAG_ROLES = {tag: role for role, tag in WRAPPED_ROLES.items()}
_SINGLE = re.compile(r"\A<(" + "|".join(_TAG_ROLES) + r")>\n(.*)\n</\1>\Z", re.DOTALL)


# -- provider_details -----------------------------------------------------------------------


def leftovers(raw: Mapping[str, Any], consumed: Iterable[str]) -> JSON:
    """The fields of ``raw`` that the loader did not consume."""
    used = set(consumed)
    return {k: v for k, v in raw.items() if k not in used}


def details(obj: Block | Message, fmt: str) -> JSON:
    """The leftovers ``fmt`` stored on a block or message (empty when none)."""
    pd = obj.provider_details
    if not pd:
        return {}
    found = pd.get(fmt)
    return dict(found) if isinstance(found, dict) else {}


def with_details(fmt: str, extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """``provider_details`` holding ``extra`` under ``fmt``, or None when there is nothing."""
    return {fmt: dict(extra)} if extra else None


def attach(block: Block, fmt: str, extra: Mapping[str, Any]) -> Block:
    """``block`` with ``extra`` stored under ``fmt`` (returns the same block when empty)."""
    if extra:
        merged = dict(block.provider_details or {})
        merged[fmt] = {**merged.get(fmt, {}), **extra}
        block.provider_details = merged
    return block


# -- input checking -------------------------------------------------------------------------


def expect_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise UserError(
            f"{what} must be a list, got {type(value).__name__}; pass the provider's "
            "list as sent to the API"
        )
    return value


def expect_dict(value: Any, what: str) -> JSON:
    """``value`` if it is an object; ``what`` (``messages[3].content[1]``) becomes the place a
    loader is at, which an error its checks did not foresee names (:func:`guarded`)."""
    if not isinstance(value, dict):
        raise UserError(f"{what} must be an object, got {type(value).__name__}")
    _WHERE.set(what)
    return value


_WHERE: ContextVar[str] = ContextVar("threadline_format_at", default="")


def arguments(raw: Any, where: str) -> Any:
    """Tool-call arguments sent as a JSON string, decoded."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: arguments are not valid JSON ({exc.msg})") from None


def dump_arguments(value: Any) -> str:
    """Tool-call arguments as the compact JSON string OpenAI sends."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- wrapped roles --------------------------------------------------------------------------


def wrap(message: Message, tag: str) -> list[Block]:
    """User-visible blocks standing for a message whose role the provider has no slot for."""
    blocks = message.content
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock) and not blocks[0].provider_details:
        return [text(f"<{tag}>\n{blocks[0].text.content}\n</{tag}>")]
    return [text(f"<{tag}>"), *blocks, text(f"</{tag}>")]


def unwrap(role: str, blocks: list[Block]) -> list[Message]:
    """Split a provider message's blocks back into messages, restoring wrapped roles.

    Plain blocks stay together in one message of ``role``; each wrapped run becomes a message of
    the role its tag names.
    """
    out: list[Message] = []
    plain: list[Block] = []
    i = 0
    while i < len(blocks):
        b = blocks[i]
        opened = _open_tag(b)
        single = _single(b)
        if single is not None:
            _flush(out, role, plain)
            out.append(Message(role=_TAG_ROLES[single[0]], content=[text(single[1])]))
        elif opened is not None and (end := _find_close(blocks, i + 1, opened)) is not None:
            _flush(out, role, plain)
            out.append(Message(role=_TAG_ROLES[opened], content=blocks[i + 1 : end]))
            i = end
        else:
            plain.append(b)
        i += 1
    _flush(out, role, plain)
    return out


def _flush(out: list[Message], role: str, plain: list[Block]) -> None:
    if plain:
        out.append(Message(role=role, content=list(plain)))
        plain.clear()


def _plain_text(b: Block) -> str | None:
    if isinstance(b, TextBlock) and not b.provider_details:
        return b.text.content
    return None


def _single(b: Block) -> tuple[str, str] | None:
    t = _plain_text(b)
    m = _SINGLE.match(t) if t is not None else None
    return (m.group(1), m.group(2)) if m else None


def _open_tag(b: Block) -> str | None:
    t = _plain_text(b)
    if t is not None and t.startswith("<") and t.endswith(">") and t[1:-1] in _TAG_ROLES:
        return t[1:-1]
    return None


def _find_close(blocks: Sequence[Block], start: int, tag: str) -> int | None:
    for j in range(start, len(blocks)):
        if _plain_text(blocks[j]) == f"</{tag}>":
            return j
    return None


# -- shaping for providers that need alternation ------------------------------------------


def provider_turns(
    messages: Sequence[Message], fmt: str, *, system_first: bool
) -> tuple[list[Message], list[tuple[str, list[Message]]]]:
    """Leading system messages, and the rest grouped into alternating turns.

    Each turn is (``user``|``assistant``, the messages merged into it). Wrapped roles and (when
    ``system_first``) later system messages become user messages holding wrapped text; ``tool``
    messages become user messages. The format module dumps each message and concatenates the
    turn's parts, so per-message leftovers are kept. Messages with nothing for ``fmt`` (no
    blocks, no leftovers of that format) are left out.
    """
    system: list[Message] = []
    i = 0
    if system_first:
        while i < len(messages) and messages[i].role == "system":
            system.append(messages[i])
            i += 1
    turns: list[tuple[str, list[Message]]] = []
    for m in messages[i:]:
        if not m.content and not details(m, fmt):
            continue  # nothing this provider can be sent (e.g. another provider's built-in item)
        if m.role in ("assistant", "user"):
            as_turn = m
        elif m.role == "tool":
            as_turn = Message(role="user", content=m.content, provider_details=m.provider_details)
        elif m.role in WRAPPED_ROLES:
            as_turn = Message(role="user", content=wrap(m, WRAPPED_ROLES[m.role]))
        else:
            raise UserError(
                f"Message role {m.role!r} has no provider mapping; use one of "
                "user, assistant, system, tool or a summary role"
            )
        if turns and turns[-1][0] == as_turn.role:
            turns[-1][1].append(as_turn)
        else:
            turns.append((as_turn.role, [as_turn]))
    return system, turns


def results_first(parts: list[Any], is_result: Callable[[Any], bool]) -> list[Any]:
    """Tool results before anything else in a user turn (stable), as Anthropic and Bedrock
    require."""
    return [p for p in parts if is_result(p)] + [p for p in parts if not is_result(p)]


# -- validation -----------------------------------------------------------------------------


class Problems:
    """Collects every broken rule of a payload, then raises one :class:`UserError` naming them."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.items: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.items.append(f"{where}: {problem}")

    def raise_if_any(self) -> None:
        if self.items:
            listed = "; ".join(f"({n}) {p}" for n, p in enumerate(self.items, 1))
            raise UserError(
                f"{self.fmt} payload breaks {len(self.items)} rule(s): {listed}; fix the "
                f"history or dump it with threadline.formats.{self.fmt}.dump"
            )


def check_adjacent_pairing(
    problems: Problems, turns: Sequence[tuple[str, str, list[str], list[str]]]
) -> None:
    """Tool pairing over (where, role, call ids, result ids) turns, for providers where the
    results of an assistant turn's calls must all be in the very next turn (Anthropic, Gemini,
    Bedrock): every call answered there, every result answering a call of the turn before."""
    seen: set[str] = set()
    prev_calls: list[str] = []
    prev_where = ""
    for where, _role, calls, results in turns:
        open_calls = set(prev_calls)
        for rid in results:
            if rid in open_calls:
                open_calls.discard(rid)
            elif rid in prev_calls:
                problems.add(where, f"second result for tool call {rid!r}")
            else:
                problems.add(
                    where,
                    f"tool result {rid!r} does not answer a tool call of the turn right before it",
                )
        for cid in prev_calls:
            if cid in open_calls:
                problems.add(prev_where, f"tool call {cid!r} is not answered in the next turn")
        for cid in calls:
            if cid in seen:
                problems.add(where, f"tool call id {cid!r} is used twice")
            seen.add(cid)
        prev_calls, prev_where = calls, where
    for cid in prev_calls:
        problems.add(prev_where, f"tool call {cid!r} has no result")


def check_alternation(problems: Problems, roles: Sequence[tuple[str, str]], first: str) -> None:
    """Roles must alternate and the first must be ``first``."""
    if roles and roles[0][1] != first:
        problems.add(
            roles[0][0], f"the first message must have role {first!r}, not {roles[0][1]!r}"
        )
    for (_, a), (where, b) in itertools.pairwise(roles):
        if a == b:
            problems.add(where, f"two {b!r} messages in a row; roles must alternate")


# -- reasoning as text, images as URLs ----------------------------------------------------


def split_think(content: str) -> list[Block]:
    """A text whose leading ``<think>\n…\n</think>`` sections (each followed by a blank line or
    the end) become thinking blocks; the rest stays one text block."""
    out: list[Block] = []
    rest = content
    while rest.startswith("<think>\n"):
        end = rest.find("\n</think>")
        if end < 0:
            break
        tail = rest[end + len("\n</think>") :]
        if tail and not tail.startswith("\n\n"):
            break
        out.append(ThinkingBlock(thinking=Thinking(content=rest[len("<think>\n") : end])))
        if not tail:
            return out
        rest = tail[2:]
    out.append(text(rest))
    return out


def join_think(blocks: Sequence[Block]) -> str | None:
    """The one string :func:`split_think` reads back, for unsigned thinking blocks followed by at
    most one text block; None for any other content."""
    parts: list[str] = []
    for n, b in enumerate(blocks):
        if (
            isinstance(b, ThinkingBlock)
            and b.thinking.signature is None
            and not b.thinking.redacted
        ):
            parts.append(f"<think>\n{b.thinking.content}\n</think>")
        elif isinstance(b, TextBlock) and n == len(blocks) - 1:
            parts.append(b.text.content)
        else:
            return None
    return "\n\n".join(parts)


def image_data_url(b: ImageBlock) -> str:
    """An image as the URL OpenAI takes: its URL, or a ``data:`` URL for base64 bytes."""
    src = b.image.source
    if src.type == "base64":
        return f"data:{src.media_type};base64,{src.data}"
    return src.data


def image_from_url(url: str) -> ImageBlock:
    """The inverse of :func:`image_data_url`."""
    m = re.match(r"\Adata:([^;,]+);base64,(.*)\Z", url, re.DOTALL)
    if m:
        return image(m.group(2), media_type=m.group(1))
    return image_url(url)


# -- provider items threadline has no block for -------------------------------------------


def place_foreign(known: list[Any], foreign: Sequence[Sequence[Any]] | None) -> list[Any]:
    """``known`` provider parts with the kept ones put back at their original indexes."""
    if not foreign:
        return known
    out = list(known)
    for index, raw in sorted(foreign, key=lambda f: int(f[0])):
        out.insert(min(int(index), len(out)), raw)
    return out


# -- transcript exports (``dump`` of the importer formats) -----------------------------------

EPOCH = "1970-01-01T00:00:00.000Z"
"""The timestamp a transcript dump writes: a message carries no time, and a dump must not depend
on the clock (the same messages always give the same file)."""


def position_uuid(n: int) -> str:
    """A UUID-shaped id made from a position, for formats whose records need ids."""
    return f"00000000-0000-4000-8000-{n:012x}"


def messages_uuid(messages: Sequence[Message]) -> str:
    """A session id derived from the messages, so equal histories give equal dumps."""
    digest = hashlib.sha256(msgspec.json.encode(list(messages), order="sorted")).hexdigest()
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"threadline:{digest}"))


_F = TypeVar("_F", bound=Callable[..., Any])
_MALFORMED = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError)


def guarded(what: str) -> Callable[[_F], _F]:
    """Let only threadline errors out of a loader. The loaders check what they rely on and
    raise precise UserErrors; this is the net under them for shapes nobody thought of (a
    list where a string was expected, JSON nested deeper than Python recurses)."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            token = _WHERE.set("")
            try:
                return fn(*args, **kwargs)
            except ThreadlineError:
                raise
            except (*_MALFORMED, RecursionError) as exc:
                place = _WHERE.get()
                raise malformed_input(f"{what}: at {place}" if place else what, exc) from None
            finally:
                _WHERE.reset(token)

        return inner  # type: ignore[return-value]

    return wrap
