"""An OpenAI-compatible Chat Completions client (OpenAI, llama.cpp, vLLM, Ollama, LM Studio, …).

POSTs ``{base_url}/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``,
then accumulates text, reasoning and tool-call deltas into one assistant message. Messages are
converted by :func:`threadline.formats.openai_chat.dump`.
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}


def chat_messages(messages: Sequence[Message], system: str | None) -> list[dict[str, Any]]:
    """The ``messages`` array of a request: the formats module's dump, system prompt first."""
    from threadline.formats import openai_chat

    dumped: Any = openai_chat.dump(list(messages))
    out: list[dict[str, Any]] = list(dumped["messages"] if isinstance(dumped, dict) else dumped)
    if system:
        out.insert(0, {"role": "system", "content": system})
    return out


class OpenAICompatProvider(StreamingProvider):
    """A client for any server speaking OpenAI's Chat Completions API.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, then ``https://api.openai.com/v1``; the key to
    ``$OPENAI_API_KEY``. A key is required only for api.openai.com: local servers take none.
    """

    def __init__(
        self, model: str, *, base_url: str | None = None, api_key: str | None = None
    ) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.endpoint = f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        return f"OpenAICompatProvider(model={self.model!r}, base_url={self.base_url!r})"

    def stream(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Iterator[StreamEvent]:
        """Text and reasoning chunks, then each tool call, then ``done`` with the message."""
        url = self.endpoint
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        elif self.base_url == DEFAULT_BASE_URL:
            raise ProviderError(
                f"No API key for {url}; set $OPENAI_API_KEY or pass api_key=, or point "
                "--base-url at a local server",
                endpoint=url,
            )
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(messages, system),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if max_tokens is not None:
            body["max_tokens"] = max_tokens

        text_parts: list[str] = []
        think_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: Usage | None = None
        model = self.model
        done = False
        with post_stream(url, body, headers, timeout) as events:
            for _event, data in events:
                if data.strip() == "[DONE]":
                    done = True
                    break
                chunk = load_json(data, url)
                if not isinstance(chunk, dict):
                    raise _malformed(url, "an event is not a JSON object")
                if "error" in chunk:
                    err = chunk["error"]
                    msg = err.get("message") if isinstance(err, dict) else err
                    raise ProviderError(
                        f"{url} reported an error mid-stream: {msg}; retry later", endpoint=url
                    )
                model = chunk.get("model") or model
                if isinstance(chunk.get("usage"), dict):
                    usage = _usage(chunk["usage"])
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    piece = delta.get("content")
                    if piece:
                        text_parts.append(piece)
                        yield StreamEvent(kind="text", text=piece)
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if isinstance(reasoning, str) and reasoning:
                        think_parts.append(reasoning)
                        yield StreamEvent(kind="thinking", text=reasoning)
                    for tc in delta.get("tool_calls") or ():
                        slot = calls.setdefault(
                            int(tc.get("index", len(calls))), {"id": "", "name": "", "args": ""}
                        )
                        fn = tc.get("function") or {}
                        slot["id"] = tc.get("id") or slot["id"]
                        slot["name"] += fn.get("name") or ""
                        slot["args"] += fn.get("arguments") or ""
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        if not done and finish is None:
            raise _malformed(url, "the stream ended before a finish_reason or [DONE]")

        blocks: list[Block] = []
        if think_parts:
            blocks.append(thinking("".join(think_parts)))
        if text_parts:
            blocks.append(text("".join(text_parts)))
        for index in sorted(calls):
            slot = calls[index]
            if not slot["name"]:
                raise _malformed(url, f"tool call #{index} has no function name")
            block = tool_use(
                slot["id"] or f"call_{index}",
                slot["name"],
                parse_tool_input(slot["args"], slot["name"], url),
            )
            blocks.append(block)
            yield StreamEvent(kind="tool_use", text=slot["name"], tool_use=block.tool_use)
        stop = _FINISH.get(finish or "", finish)
        if calls and stop == "end_turn":
            stop = "tool_use"
        message = Message(
            role="assistant", content=blocks, model=model, usage=usage, stop_reason=stop
        )
        yield StreamEvent(kind="done", message=message)


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    output = int(raw.get("completion_tokens") or 0)
    details = raw.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    total = int(raw.get("total_tokens") or prompt + output)
    return Usage(input=prompt - cached, output=output, cache_read=cached, total=total)


def _malformed(url: str, what: str) -> ProviderError:
    return ProviderError(
        f"Malformed stream from {url}: {what}; check that the server speaks "
        "the OpenAI Chat Completions API",
        endpoint=url,
    )
