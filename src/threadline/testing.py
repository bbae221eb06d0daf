"""Test doubles that ship with the library: a deterministic provider and fake HTTP servers.

:class:`TestProvider` answers without a network: scripted replies (text, tool calls, errors) in
order, then an echo of the last user text. :class:`FakeOpenAIServer` and
:class:`FakeAnthropicServer` are real HTTP servers on 127.0.0.1 (port 0, a daemon thread each)
speaking enough of OpenAI's Chat Completions API and Anthropic's Messages API for the real
clients in :mod:`threadline.providers` to talk to them, with scripted replies, recorded requests
and injected failures (:class:`HTTPFailure`, :class:`Hang`, :class:`Malformed`)::

    with FakeOpenAIServer(["Hello!", tool_call("read", {"path": "a.py"}), HTTPFailure(500)]) as srv:
        p = get_provider("m", base_url=srv.base_url)
        p.complete(messages).text            # "Hello!"
        srv.requests[0].body["messages"]     # what the client sent
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec

from threadline.errors import ProviderError
from threadline.model.content import (
    Block,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    text,
    tool_use,
)
from threadline.providers.base import StreamEvent, ToolSpec


@dataclass(frozen=True)
class HTTPFailure:
    """Scripted reply: answer with this HTTP status and an error body."""

    status: int = 500
    message: str = "injected failure"


@dataclass(frozen=True)
class Hang:
    """Scripted reply: accept the request and send nothing for ``seconds`` (or until close)."""

    seconds: float = 30.0


@dataclass(frozen=True)
class Malformed:
    """Scripted reply: a 200 response whose stream is not valid for the API."""

    body: str = "data: {not json\n\n"


Reply = str | Message | list[Block] | HTTPFailure | Hang | Malformed | BaseException

_call_counter = iter(range(1, 1 << 62))


def tool_call(
    name: str, input: Any = None, id: str | None = None, *, text_before: str = ""
) -> Message:
    """A scripted assistant reply that calls one tool (optionally after some text)."""
    blocks: list[Block] = [text(text_before)] if text_before else []
    blocks.append(tool_use(id or f"call_{next(_call_counter)}", name, input or {}))
    return Message(role="assistant", content=blocks, stop_reason="tool_use")


def estimate(value: Any) -> int:
    """A crude token count (JSON characters / 4) used for the doubles' reported usage."""
    return max(1, len(msgspec.json.encode(value)) // 4)


def _as_message(reply: str | Message | list[Block]) -> Message:
    if isinstance(reply, Message):
        return reply
    if isinstance(reply, str):
        return Message(role="assistant", content=[text(reply)], stop_reason="end_turn")
    stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in reply) else "end_turn"
    return Message(role="assistant", content=list(reply), stop_reason=stop)


def echo_reply(messages: Sequence[Message]) -> str:
    """The default reply of every double: ``echo: <last user text>``."""
    for m in reversed(messages):
        if m.role == "user" and m.text:
            return f"echo: {m.text}"
        if m.role in ("user", "tool") and any(isinstance(b, ToolResultBlock) for b in m.content):
            return f"done: {len(m.tool_results)} tool result(s)"
    return "echo: "


class TestProvider:
    """A deterministic, offline :class:`~threadline.providers.Provider`.

    Replies come from ``replies`` in order (a string, an assistant :class:`Message` such as
    :func:`tool_call` builds, a list of blocks, or an exception to raise, such as
    ``KeyboardInterrupt()`` to simulate an abort); once they run out it
    echoes the last user text. Streams text in chunks of ``chunk_size`` characters and reports
    usage (JSON characters / 4). Every call is recorded in ``calls``.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self, replies: Sequence[Reply] = (), *, model: str = "test", chunk_size: int = 8
    ) -> None:
        self.model = model
        self.replies: list[Reply] = list(replies)
        self.chunk_size = max(1, chunk_size)
        self.calls: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"TestProvider(model={self.model!r}, {len(self.replies)} scripted replies left)"

    def complete(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Message:
        """The next reply, whole."""
        events = list(
            self.stream(
                messages, system=system, tools=tools, max_tokens=max_tokens, timeout=timeout
            )
        )
        final = events[-1].message
        assert final is not None
        return final

    def stream(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Iterator[StreamEvent]:
        """The next reply as text chunks, tool calls, then ``done``."""
        msgs = list(messages)
        self.calls.append(
            {"messages": msgs, "system": system, "tools": list(tools), "max_tokens": max_tokens}
        )
        scripted = self.replies.pop(0) if self.replies else echo_reply(msgs)
        if isinstance(scripted, BaseException):
            raise scripted
        if isinstance(scripted, (HTTPFailure, Hang, Malformed)):
            raise ProviderError(
                f"TestProvider: scripted {type(scripted).__name__}; script a text reply instead",
                endpoint="test://",
            )
        reply = _as_message(scripted)
        for block in reply.content:
            if isinstance(block, TextBlock):
                s = block.text.content
                for i in range(0, len(s), self.chunk_size):
                    yield StreamEvent(kind="text", text=s[i : i + self.chunk_size])
            elif isinstance(block, ToolUseBlock):
                yield StreamEvent(
                    kind="tool_use", text=block.tool_use.name, tool_use=block.tool_use
                )
        prompt = estimate([system or "", msgs])
        out = estimate(reply.content)
        final = msgspec.structs.replace(
            reply,
            model=reply.model or self.model,
            usage=reply.usage or Usage(input=prompt, output=out, total=prompt + out),
        )
        yield StreamEvent(kind="done", message=final)


# -- fake HTTP servers ---------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request a fake server received: path, headers (lower-case names), JSON body."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _State:
    replies: list[Reply]
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)


class _FakeServer:
    """Shared machinery: a threaded HTTP server on 127.0.0.1 with a reply script."""

    path = "/"
    _prefix = ""

    def __init__(self, replies: Sequence[Reply] = (), *, chunk_size: int = 8) -> None:
        self._state = _State(replies=list(replies))
        self.chunk_size = chunk_size
        self._server: ThreadingHTTPServer | None = None
        self._port: int | None = None  # kept after close, so messages naming the URL can be checked
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> _FakeServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:
                owner._handle(self)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever, daemon=True, name=type(self).__name__
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; hanging requests are released."""
        self._state.closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        """The URL to pass as ``base_url`` to the matching provider."""
        if self._port is None:
            raise RuntimeError("Server not started; use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._port}{self._prefix}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self._state.lock:
            return list(self._state.requests)

    def add_replies(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._state.lock:
            self._state.replies.extend(replies)

    # request handling
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = None
        state = self._state
        with state.lock:
            state.requests.append(
                RecordedRequest(
                    path=h.path, headers={k.lower(): v for k, v in h.headers.items()}, body=body
                )
            )
        if h.path != self.path:
            self._send_json(
                h, 404, {"error": {"message": f"no route {h.path}", "type": "not_found"}}
            )
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(
                h,
                400,
                {
                    "error": {
                        "message": "body needs a messages array",
                        "type": "invalid_request_error",
                    }
                },
            )
            return
        with state.lock:
            reply: Reply | None = state.replies.pop(0) if state.replies else None
        if isinstance(reply, Hang):
            state.closing.wait(reply.seconds)
            h.close_connection = True
            return
        if isinstance(reply, HTTPFailure):
            self._send_json(
                h, reply.status, {"error": {"message": reply.message, "type": "server_error"}}
            )
            return
        if isinstance(reply, Malformed):
            self._send_raw(h, 200, "text/event-stream", reply.body.encode())
            return
        if isinstance(reply, BaseException):
            self._send_json(h, 500, {"error": {"message": str(reply), "type": "server_error"}})
            return
        message = _as_message(reply if reply is not None else self._echo(body))
        self._reply(h, body, message)

    def _echo(self, body: dict[str, Any]) -> str:
        for m in reversed(body["messages"]):
            if m.get("role") == "user":
                c = m.get("content")
                if isinstance(c, str):
                    return f"echo: {c}"
                if isinstance(c, list):
                    texts = [
                        p.get("text", "")
                        for p in c
                        if isinstance(p, dict) and p.get("type") == "text"
                    ]
                    if texts:
                        return f"echo: {chr(10).join(texts)}"
        return "echo: "

    def _reply(self, h: BaseHTTPRequestHandler, body: dict[str, Any], message: Message) -> None:
        raise NotImplementedError

    def _chunks(self, s: str) -> list[str]:
        n = max(1, self.chunk_size)
        return [s[i : i + n] for i in range(0, len(s), n)] or [""]

    @staticmethod
    def _send_json(h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        _FakeServer._send_raw(h, status, "application/json", json.dumps(payload).encode())

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, ctype: str, data: bytes) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _send_sse(h: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]]) -> None:
        out = []
        for name, data in events:
            line = data if isinstance(data, str) else json.dumps(data)
            out.append((f"event: {name}\n" if name else "") + f"data: {line}\n\n")
        _FakeServer._send_raw(h, 200, "text/event-stream", "".join(out).encode())


class FakeOpenAIServer(_FakeServer):
    """An OpenAI Chat Completions server on 127.0.0.1 (``POST /v1/chat/completions``), streaming
    (SSE, with a usage chunk when ``stream_options.include_usage``) and non-streaming."""

    path = "/v1/chat/completions"
    _prefix = "/v1"

    def _reply(self, h: BaseHTTPRequestHandler, body: dict[str, Any], message: Message) -> None:
        content = message.text or None
        calls: list[dict[str, Any]] = [
            {
                "id": u.id,
                "type": "function",
                "function": {"name": u.name, "arguments": json.dumps(u.input)},
            }
            for u in message.tool_uses
        ]
        finish = "tool_calls" if calls else "stop"
        prompt = estimate(body["messages"])
        completion = estimate(msgspec.to_builtins(message.content))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        model = body.get("model", "fake")
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }
        if not body.get("stream"):
            msg: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                msg["tool_calls"] = calls
            self._send_json(
                h,
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return
        events: list[tuple[str | None, Any]] = [
            (
                None,
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}
                    ],
                },
            )
        ]
        if content:
            events += [
                (
                    None,
                    {
                        **base,
                        "choices": [
                            {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                        ],
                    },
                )
                for piece in self._chunks(content)
            ]
        for i, call in enumerate(calls):
            args = call["function"]["arguments"]
            half = len(args) // 2
            events.append(
                (
                    None,
                    {
                        **base,
                        "choices": [
                            {
                                "index": 0,
                                "delta": {
                                    "tool_calls": [
                                        {
                                            "index": i,
                                            "id": call["id"],
                                            "type": "function",
                                            "function": {
                                                "name": call["function"]["name"],
                                                "arguments": args[:half],
                                            },
                                        }
                                    ]
                                },
                                "finish_reason": None,
                            }
                        ],
                    },
                )
            )
            events.append(
                (
                    None,
                    {
                        **base,
                        "choices": [
                            {
                                "index": 0,
                                "delta": {
                                    "tool_calls": [
                                        {"index": i, "function": {"arguments": args[half:]}}
                                    ]
                                },
                                "finish_reason": None,
                            }
                        ],
                    },
                )
            )
        events.append(
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        )
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**base, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        self._send_sse(h, events)


class FakeAnthropicServer(_FakeServer):
    """An Anthropic Messages server on 127.0.0.1 (``POST /v1/messages``), streaming only."""

    path = "/v1/messages"

    def _reply(self, h: BaseHTTPRequestHandler, body: dict[str, Any], message: Message) -> None:
        model = body.get("model", "fake")
        prompt = estimate([body.get("system") or "", body["messages"]])
        completion = estimate(msgspec.to_builtins(message.content))
        ev: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "usage": {"input_tokens": prompt, "output_tokens": 1},
                    },
                },
            )
        ]
        index = 0
        if message.text:
            ev.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            ev += [
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
                for piece in self._chunks(message.text)
            ]
            ev.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for u in message.tool_uses:
            args = json.dumps(u.input)
            ev.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": u.id,
                            "name": u.name,
                            "input": {},
                        },
                    },
                )
            )
            ev.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": args},
                    },
                )
            )
            ev.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        stop = "tool_use" if message.tool_uses else "end_turn"
        ev.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop},
                    "usage": {"output_tokens": completion},
                },
            )
        )
        ev.append(("message_stop", {"type": "message_stop"}))
        self._send_sse(h, ev)


__all__ = [
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "HTTPFailure",
    "Hang",
    "Malformed",
    "RecordedRequest",
    "Reply",
    "TestProvider",
    "echo_reply",
    "tool_call",
]
