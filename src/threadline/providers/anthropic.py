"""A client for Anthropic's Messages API (streaming).

POSTs ``{base_url}/v1/messages`` with ``stream: true`` and reads the SSE events
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``, ``error``).
Messages are converted by :func:`threadline.formats.anthropic.dump`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from threadline.errors import ProviderError
from threadline.model.content import Block, Message, Usage, text, thinking, tool_use
from threadline.providers.base import (
    StreamEvent,
    StreamingProvider,
    ToolSpec,
    load_json,
    parse_tool_input,
    post_stream,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192


def request_messages(
    messages: Sequence[Message], system: str | None
) -> tuple[list[dict[str, Any]], Any]:
    """``(messages, system)`` of a request, from the formats module's dump."""
    from threadline.formats import anthropic

    dumped: Any = anthropic.dump(list(messages))
    if isinstance(dumped, dict):
        out = list(dumped.get("messages") or [])
        sys_part = dumped.get("system")
    else:
        out, sys_part = list(dumped), None
    if system:
        if isinstance(sys_part, list):
            sys_part = [{"type": "text", "text": system}, *sys_part]
        elif sys_part:
            sys_part = f"{system}\n\n{sys_part}"
        else:
            sys_part = system
    return out, sys_part


class AnthropicProvider(StreamingProvider):
    """A client for Anthropic's Messages API; the key comes from ``$ANTHROPIC_API_KEY``."""

    def __init__(
        self, model: str, *, base_url: str | None = None, api_key: str | None = None
    ) -> None:
        self.model = model
        self.base_url = (
            base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        self.api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        self.endpoint = f"{self.base_url}/v1/messages"

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    def stream(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Iterator[StreamEvent]:
        """Text and thinking chunks, then each tool call, then ``done`` with the message."""
        url = self.endpoint
        if not self.api_key and self.base_url == DEFAULT_BASE_URL:
            raise ProviderError(
                f"No API key for {url}; set $ANTHROPIC_API_KEY or pass api_key=", endpoint=url
            )
        headers = {"anthropic-version": API_VERSION, "Accept": "text/event-stream"}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        msgs, sys_part = request_messages(messages, system)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": msgs,
            "stream": True,
            "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        }
        if sys_part:
            body["system"] = sys_part
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]

        blocks: dict[int, dict[str, Any]] = {}
        usage = Usage()
        stop: str | None = None
        model = self.model
        finished = False
        with post_stream(url, body, headers, timeout) as events:
            for event, data in events:
                ev = load_json(data, url)
                if not isinstance(ev, dict):
                    raise _malformed(url, "an event is not a JSON object")
                kind = ev.get("type") or event
                if kind == "error":
                    err = ev.get("error") or {}
                    msg = err.get("message") if isinstance(err, dict) else err
                    raise ProviderError(
                        f"{url} reported an error mid-stream: {msg}; retry later", endpoint=url
                    )
                if kind == "message_start":
                    m = ev.get("message") or {}
                    model = m.get("model") or model
                    usage = _merge_usage(usage, m.get("usage") or {})
                elif kind == "content_block_start":
                    cb = ev.get("content_block") or {}
                    blocks[int(ev.get("index", len(blocks)))] = {
                        "type": cb.get("type"),
                        "text": cb.get("text") or "",
                        "thinking": cb.get("thinking") or "",
                        "signature": "",
                        "id": cb.get("id") or "",
                        "name": cb.get("name") or "",
                        "json": "",
                        "data": cb.get("data") or "",
                    }
                elif kind == "content_block_delta":
                    index = int(ev.get("index", 0))
                    if index not in blocks:
                        raise _malformed(url, f"a delta for block {index}, which never started")
                    slot = blocks[index]
                    delta = ev.get("delta") or {}
                    dtype = delta.get("type")
                    if dtype == "text_delta":
                        slot["text"] += delta.get("text") or ""
                        yield StreamEvent(kind="text", text=delta.get("text") or "")
                    elif dtype == "thinking_delta":
                        slot["thinking"] += delta.get("thinking") or ""
                        yield StreamEvent(kind="thinking", text=delta.get("thinking") or "")
                    elif dtype == "signature_delta":
                        slot["signature"] += delta.get("signature") or ""
                    elif dtype == "input_json_delta":
                        slot["json"] += delta.get("partial_json") or ""
                elif kind == "content_block_stop":
                    slot = blocks.get(int(ev.get("index", 0))) or {}
                    if slot.get("type") == "tool_use":
                        slot["input"] = parse_tool_input(slot["json"], slot["name"], url)
                        call = tool_use(slot["id"], slot["name"], slot["input"]).tool_use
                        yield StreamEvent(kind="tool_use", text=slot["name"], tool_use=call)
                elif kind == "message_delta":
                    stop = (ev.get("delta") or {}).get("stop_reason") or stop
                    usage = _merge_usage(usage, ev.get("usage") or {})
                elif kind == "message_stop":
                    finished = True
                    break
        if not finished:
            raise _malformed(url, "the stream ended before message_stop")

        content: list[Block] = []
        for index in sorted(blocks):
            slot = blocks[index]
            if slot["type"] == "text":
                content.append(text(slot["text"]))
            elif slot["type"] == "thinking":
                content.append(thinking(slot["thinking"], slot["signature"] or None))
            elif slot["type"] == "redacted_thinking":
                content.append(thinking(slot["data"], redacted=True))
            elif slot["type"] == "tool_use":
                content.append(
                    tool_use(
                        slot["id"],
                        slot["name"],
                        slot.get("input", parse_tool_input(slot["json"], slot["name"], url)),
                    )
                )
        usage.total = usage.input + usage.output + usage.cache_read + usage.cache_write
        message = Message(
            role="assistant", content=content, model=model, usage=usage, stop_reason=stop
        )
        yield StreamEvent(kind="done", message=message)


def _merge_usage(usage: Usage, raw: dict[str, Any]) -> Usage:
    """Anthropic sends input counts in message_start and output counts in message_delta."""

    def pick(key: str, old: int) -> int:
        value = raw.get(key)
        return int(value) if isinstance(value, int) and value else old

    return Usage(
        input=pick("input_tokens", usage.input),
        output=pick("output_tokens", usage.output),
        cache_read=pick("cache_read_input_tokens", usage.cache_read),
        cache_write=pick("cache_creation_input_tokens", usage.cache_write),
    )


def _malformed(url: str, what: str) -> ProviderError:
    return ProviderError(
        f"Malformed stream from {url}: {what}; check that the server speaks "
        "Anthropic's Messages API",
        endpoint=url,
    )
