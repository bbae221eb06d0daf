"""pydantic-ai message histories in threadline: a provider format and a run helper.

Format: :func:`load` turns a list of pydantic-ai ``ModelMessage`` (objects or their JSON form)
into threadline messages; :func:`dump` turns any threadline messages (whichever framework or
provider wrote them) into a ``ModelMessage`` list, validated by ``ModelMessagesTypeAdapter``.

- a ``ModelRequest`` becomes one message per part: ``system-prompt`` → system, ``user-prompt``
  → user, ``tool-return`` → tool (a tool result), ``retry-prompt`` → tool (an error result) or
  user; a ``ModelResponse`` becomes one assistant message (``text``, ``tool-call`` → tool use,
  ``thinking`` → thinking);
- each message keeps the part and its envelope (timestamps, usage, model name, run id…) in
  ``provider_details["pydantic_ai"]``, so ``dump(load(x))`` gives ``x`` back.

Run helper: ``history(session)`` is the ``message_history`` to pass to ``agent.run``, and
``record(session, result)`` appends the run's new messages::

    result = agent.run_sync("…", message_history=history(s))
    record(s, result)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from threadline.formats._common import arguments
from threadline.integrations._common import append_chain, missing_extra
from threadline.model.content import (
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text,
    thinking,
    tool_result,
    tool_use,
)

try:
    from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("pydantic-ai", "pydantic-ai", exc) from None

if TYPE_CHECKING:
    from threadline.session import Session

__all__ = ["dump", "history", "load", "record"]

NAME = "pydantic_ai"


def load(data: Sequence[Any]) -> list[Message]:
    """Threadline messages from pydantic-ai ``ModelMessage`` objects or their JSON form."""
    raw = ModelMessagesTypeAdapter.dump_python(
        ModelMessagesTypeAdapter.validate_python(list(data)), mode="json"
    )
    out: list[Message] = []
    for m in raw:
        parts = m.pop("parts")
        if m["kind"] == "response":
            blocks = [b for p in parts for b in _response_block(p)]
            out.append(
                Message(
                    role="assistant",
                    content=blocks,
                    provider_details={NAME: {"envelope": m, "parts": parts}},
                )
            )
            continue
        for k, part in enumerate(parts):
            msg = _request_message(part)
            mine: dict[str, Any] = {"part": part}
            if k == 0:
                mine["envelope"] = m
            msg.provider_details = {NAME: mine}
            out.append(msg)
        if not parts:
            out.append(Message(role="user", content=[], provider_details={NAME: {"envelope": m}}))
    return out


def _request_message(part: dict[str, Any]) -> Message:
    kind = part["part_kind"]
    if kind == "system-prompt":
        return Message(role="system", content=[text(part["content"])])
    if kind == "user-prompt":
        content = part["content"]
        if isinstance(content, str):
            return Message(role="user", content=[text(content)])
        return Message(
            role="user", content=[text(c) if isinstance(c, str) else text(str(c)) for c in content]
        )
    if kind == "tool-return":
        body = part["content"]
        return Message(
            role="tool",
            content=[
                tool_result(part["tool_call_id"], body if isinstance(body, str) else _json(body))
            ],
        )
    # retry-prompt: an error result when it answers a tool call, else a user message
    body = part["content"]
    words = body if isinstance(body, str) else _json(body)
    if part.get("tool_name"):
        return Message(
            role="tool", content=[tool_result(part["tool_call_id"], words, is_error=True)]
        )
    return Message(role="user", content=[text(words)])


def _response_block(part: dict[str, Any]) -> list[Block]:
    kind = part["part_kind"]
    if kind == "text":
        return [text(part["content"])]
    if kind == "thinking":
        return [thinking(part["content"], part.get("signature"))]
    if kind in ("tool-call", "builtin-tool-call"):
        args = part.get("args")
        if isinstance(args, str):
            args = arguments(args, "tool-call args") if args else {}
        return [tool_use(part["tool_call_id"], part["tool_name"], args or {})]
    return []  # files, builtin tool returns: kept in provider_details


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def dump(messages: Sequence[Message]) -> list[ModelMessage]:
    """A ``ModelMessage`` list for ``message_history`` (validated by pydantic-ai)."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    request: dict[str, Any] | None = None
    for m in messages:
        mine = (m.provider_details or {}).get(NAME) or {}
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                names[b.tool_use.id] = b.tool_use.name
        if m.role == "assistant":
            request = None
            if "parts" in mine:
                out.append({**mine["envelope"], "parts": mine["parts"]})
            else:
                parts = [p for b in m.content if (p := _response_part(b)) is not None]
                out.append({"kind": "response", "parts": parts})
            continue
        if "part" in mine:
            if "envelope" in mine or request is None:
                request = {**mine.get("envelope", {"kind": "request"}), "parts": []}
                out.append(request)
            request["parts"].append(mine["part"])
            continue
        if "envelope" in mine and not m.content:
            request = {**mine["envelope"], "parts": []}
            out.append(request)
            continue
        if request is None:
            request = {"kind": "request", "parts": []}
            out.append(request)
        request["parts"].extend(_request_parts(m, names))
    return ModelMessagesTypeAdapter.validate_python(out)


def _response_part(b: Block) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        return {"part_kind": "text", "content": b.text.content}
    if isinstance(b, ThinkingBlock):
        if b.thinking.redacted:
            return None
        return {
            "part_kind": "thinking",
            "content": b.thinking.content,
            **({"signature": b.thinking.signature} if b.thinking.signature else {}),
        }
    if isinstance(b, ToolUseBlock):
        return {
            "part_kind": "tool-call",
            "tool_name": b.tool_use.name,
            "args": b.tool_use.input,
            "tool_call_id": b.tool_use.id,
        }
    return None


def _request_parts(m: Message, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    words: list[str] = []
    for b in m.content:
        if isinstance(b, ToolResultBlock):
            r = b.tool_result
            body = (
                r.content
                if isinstance(r.content, str)
                else "\n".join(c.text.content for c in r.content if isinstance(c, TextBlock))
            )
            name = names.get(r.tool_use_id, "tool")
            if r.is_error:
                parts.append(
                    {
                        "part_kind": "retry-prompt",
                        "content": body,
                        "tool_name": name,
                        "tool_call_id": r.tool_use_id,
                    }
                )
            else:
                parts.append(
                    {
                        "part_kind": "tool-return",
                        "content": body,
                        "tool_name": name,
                        "tool_call_id": r.tool_use_id,
                    }
                )
        elif isinstance(b, TextBlock):
            words.append(b.text.content)
        elif isinstance(b, ThinkingBlock) and not b.thinking.redacted:
            words.append(b.thinking.content)
    if words:
        kind = "system-prompt" if m.role == "system" else "user-prompt"
        parts.append({"part_kind": kind, "content": "\n\n".join(words)})
    return parts


def history(session: Session) -> list[ModelMessage]:
    """The session's current context as pydantic-ai ``message_history``."""
    return dump(session.context().messages)


def record(session: Session, result: Any) -> list[str]:
    """Append a run's new messages (``result.new_messages()``) to the session in one durable
    write; returns the new entry ids."""
    return append_chain(session, load(result.new_messages()))
