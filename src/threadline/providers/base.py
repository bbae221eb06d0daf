"""The provider contract and what every HTTP provider shares: SSE reading and error mapping.

A provider turns a list of :class:`~threadline.model.content.Message` into the next assistant
message. ``complete`` returns it whole; ``stream`` yields :class:`StreamEvent` values as text,
thinking and tool calls arrive, and always ends with one ``"done"`` event carrying the complete
message (``usage`` and ``stop_reason`` set, tool calls as ``tool_use`` blocks).

Every failure (missing key, connection refused, HTTP 4xx/5xx, timeout, malformed stream) is a
:class:`~threadline.errors.ProviderError` whose one-line message names the endpoint and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
import msgspec

from threadline.errors import ProviderError
from threadline.model.content import Message, ToolUse

EventKind = Literal["text", "thinking", "tool_use", "done"]


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool the model may call: its name, a description, and a JSON Schema of its input."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class StreamEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event of :meth:`Provider.stream`.

    ``kind`` is ``"text"`` or ``"thinking"`` (``text`` holds the new chunk), ``"tool_use"`` (a
    complete tool call in ``tool_use``; ``text`` holds its name) or ``"done"`` (``message`` holds
    the complete assistant message). The last event of every stream is ``"done"``.
    """

    kind: EventKind
    text: str = ""
    message: Message | None = None
    tool_use: ToolUse | None = None


@runtime_checkable
class Provider(Protocol):
    """An LLM client: ``complete`` for the whole reply, ``stream`` for events as they come."""

    model: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Message: ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Iterator[StreamEvent]: ...


class StreamingProvider:
    """Base of the HTTP providers: ``complete`` is ``stream`` drained."""

    model: str
    endpoint: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Message:
        """The whole assistant reply (the stream, drained)."""
        return complete_from_stream(
            self.stream(
                messages, system=system, tools=tools, max_tokens=max_tokens, timeout=timeout
            ),
            self.endpoint,
        )

    def stream(
        self,
        messages: Sequence[Message],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> Iterator[StreamEvent]:
        raise NotImplementedError


def complete_from_stream(events: Iterator[StreamEvent], endpoint: str) -> Message:
    """The ``done`` message of a stream (``complete`` is ``stream`` drained)."""
    for ev in events:
        if ev.kind == "done" and ev.message is not None:
            return ev.message
    raise ProviderError(
        f"The stream from {endpoint} ended without a final message; "
        "check that the server speaks the expected API",
        endpoint=endpoint,
    )


def parse_tool_input(raw: str, name: str, endpoint: str) -> Any:
    """The JSON input of a tool call accumulated from stream deltas (empty means ``{}``)."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProviderError(
            f"Malformed stream from {endpoint}: the arguments of tool call '{name}' are not "
            f"JSON ({exc.msg}); check that the server speaks the expected API",
            endpoint=endpoint,
        ) from None


@contextmanager
def post_stream(
    url: str, body: dict[str, Any], headers: dict[str, str], timeout: float
) -> Iterator[Iterator[tuple[str, str]]]:
    """POST ``body`` and yield an iterator of SSE ``(event, data)`` pairs.

    Every httpx failure becomes a :class:`ProviderError` naming ``url`` and the fix, including
    the ones raised while the caller is still reading the stream.
    """
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout)) as client,
            client.stream("POST", url, json=body, headers=headers) as resp,
        ):
            if resp.status_code >= 400:
                resp.read()
                raise ProviderError(
                    _status_message(url, resp), endpoint=url, status=resp.status_code
                )
            yield _sse(resp.iter_lines(), url)
    except httpx.TimeoutException:
        raise ProviderError(
            f"POST {url} timed out after {timeout:g}s; check that the server is responsive "
            "or raise the timeout",
            endpoint=url,
        ) from None
    except httpx.ConnectError as exc:
        raise ProviderError(
            f"Cannot connect to {url} ({_first_line(str(exc))}); check that the server is "
            "running and the base URL is right",
            endpoint=url,
        ) from None
    except httpx.HTTPError as exc:
        raise ProviderError(
            f"POST {url} failed ({type(exc).__name__}: {_first_line(str(exc))}); check the "
            "server and retry",
            endpoint=url,
        ) from None


def _sse(lines: Iterator[str], url: str) -> Iterator[tuple[str, str]]:
    """Server-sent events as ``(event, data)``; ``event`` is ``""`` when the server sent none."""
    event = ""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field not in ("id", "retry"):
            raise ProviderError(
                f"Malformed stream from {url}: unexpected line {_first_line(line)[:60]!r}; "
                "check that the server streams server-sent events",
                endpoint=url,
            )
    if data:
        yield event, "\n".join(data)


def load_json(data: str, url: str) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise ProviderError(
            f"Malformed stream from {url}: an event is not JSON ({exc.msg}); check that the "
            "server speaks the expected API",
            endpoint=url,
        ) from None


def _status_message(url: str, resp: httpx.Response) -> str:
    status = resp.status_code
    detail = ""
    try:
        body = resp.json()
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            detail = str(err.get("message") or err.get("type") or "")
        elif isinstance(err, str):
            detail = err
    except (ValueError, AttributeError):
        detail = resp.text[:200]
    fix = {
        401: "check the API key",
        403: "check the API key's permissions",
        404: "check the base URL and the model name",
        429: "wait and retry (rate limited)",
    }.get(
        status,
        "check the request and the server" if status < 500 else "the server failed; retry later",
    )
    detail = f": {_first_line(detail)[:200]}" if detail else ""
    return f"POST {url} failed with HTTP {status}{detail}; {fix}"


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0] if s.strip() else s
