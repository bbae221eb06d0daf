"""Providers against the shipped test doubles: real HTTP on 127.0.0.1, scripted replies/failures."""

from __future__ import annotations

import socket

import pytest

from threadline.errors import ProviderError
from threadline.model.content import Message, Usage, text, tool_result, tool_use
from threadline.providers import (
    AnthropicProvider,
    OpenAICompatProvider,
    ToolSpec,
    get_provider,
)
from threadline.testing import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    Hang,
    HTTPFailure,
    Malformed,
    TestProvider,
    tool_call,
)

HELLO = [Message(role="user", content=[text("Hello there")])]
READ = ToolSpec(
    name="read",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def test_get_provider_picks_the_implementation_from_model_and_provider() -> None:
    assert isinstance(get_provider("test"), TestProvider)
    assert isinstance(get_provider("claude-sonnet-4-5", api_key="k"), AnthropicProvider)
    assert isinstance(get_provider("gpt-4o-mini", api_key="k"), OpenAICompatProvider)
    assert isinstance(get_provider("my-model", provider="anthropic"), AnthropicProvider)
    p = get_provider("qwen", base_url="http://127.0.0.1:9/v1/")
    assert isinstance(p, OpenAICompatProvider)
    assert p.endpoint == "http://127.0.0.1:9/v1/chat/completions"


def test_test_provider_echoes_then_follows_its_script() -> None:
    p = TestProvider(["first", tool_call("read", {"path": "a.py"}, id="c1")], chunk_size=3)
    first = list(p.stream(HELLO))
    assert [e.kind for e in first] == ["text", "text", "done"]
    assert [e.text for e in first[:2]] == ["fir", "st"]
    second = p.complete(HELLO)
    assert second.tool_uses[0].name == "read"
    assert second.tool_uses[0].input == {"path": "a.py"}
    assert second.stop_reason == "tool_use"
    third = p.complete(HELLO)
    assert third.text == "echo: Hello there"
    assert third.usage is not None and third.usage.output > 0
    assert len(p.calls) == 3


def test_test_provider_raises_a_scripted_exception() -> None:
    p = TestProvider([ProviderError("boom")])
    with pytest.raises(ProviderError, match="boom"):
        p.complete(HELLO)


def test_openai_stream_yields_text_chunks_then_the_complete_message() -> None:
    with FakeOpenAIServer(["Hi, how can I help?"], chunk_size=5) as srv:
        p = get_provider("m1", base_url=srv.base_url)
        events = list(p.stream(HELLO, system="Be brief."))
        req = srv.requests[0]
    assert [e.text for e in events if e.kind == "text"] == ["Hi, h", "ow ca", "n I h", "elp?"]
    done = events[-1]
    assert done.kind == "done" and done.message is not None
    assert done.message.text == "Hi, how can I help?"
    assert done.message.stop_reason == "end_turn"
    assert done.message.usage is not None and done.message.usage.output > 0
    assert req.path == "/v1/chat/completions"
    assert req.body["stream"] is True
    assert req.body["stream_options"] == {"include_usage": True}
    assert req.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert req.body["messages"][1]["role"] == "user"


def test_openai_tool_calls_are_accumulated_from_deltas() -> None:
    reply = tool_call(
        "read", {"path": "src/a.py", "lines": [1, 2]}, id="call_9", text_before="Let me look."
    )
    with FakeOpenAIServer([reply]) as srv:
        msg = get_provider("m", base_url=srv.base_url).complete(HELLO, tools=[READ])
        sent_tools = srv.requests[0].body["tools"]
    assert msg.text == "Let me look."
    assert [(u.id, u.name, u.input) for u in msg.tool_uses] == [
        ("call_9", "read", {"path": "src/a.py", "lines": [1, 2]})
    ]
    assert msg.stop_reason == "tool_use"
    assert sent_tools == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": READ.parameters,
            },
        }
    ]


def test_openai_history_with_tool_results_is_sent_in_chat_shape() -> None:
    history = [
        *HELLO,
        Message(role="assistant", content=[tool_use("c1", "read", {"path": "x"})]),
        Message(role="tool", content=[tool_result("c1", "file body")]),
    ]
    with FakeOpenAIServer() as srv:
        msg = get_provider("m", base_url=srv.base_url).complete(history)
        sent = srv.requests[0].body["messages"]
    assert msg.text == "echo: Hello there"
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["tool_call_id"] == "c1"


@pytest.mark.parametrize(
    ("failure", "pattern"),
    [
        (HTTPFailure(500, "overloaded"), r"HTTP 500: overloaded; the server failed"),
        (HTTPFailure(401, "bad key"), r"HTTP 401: bad key; check the API key"),
        (Malformed(), r"Malformed stream from http://127\.0\.0\.1:\d+/v1/chat/completions"),
    ],
)
def test_openai_failures_raise_one_line_provider_errors(failure: object, pattern: str) -> None:
    with FakeOpenAIServer([failure]) as srv, pytest.raises(ProviderError, match=pattern) as info:  # type: ignore[list-item]
        get_provider("m", base_url=srv.base_url).complete(HELLO)
    assert "\n" not in str(info.value)


def test_openai_timeout_names_the_endpoint_and_the_fix() -> None:
    with (
        FakeOpenAIServer([Hang(10)]) as srv,
        pytest.raises(ProviderError, match=r"timed out after 0\.3s; check that the server"),
    ):
        get_provider("m", base_url=srv.base_url).complete(HELLO, timeout=0.3)


def test_connection_refused_is_a_provider_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProviderError, match=rf"Cannot connect to http://127\.0\.0\.1:{port}/v1"):
        get_provider("m", base_url=f"http://127.0.0.1:{port}/v1").complete(HELLO)


def test_missing_key_for_the_public_endpoints_is_reported_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(
        ProviderError,
        match=r"No API key for https://api\.openai\.com/v1/chat/"
        r"completions; set \$OPENAI_API_KEY",
    ):
        get_provider("gpt-4o").complete(HELLO)
    with pytest.raises(ProviderError, match=r"set \$ANTHROPIC_API_KEY"):
        get_provider("claude-x").complete(HELLO)


def test_openai_key_is_sent_as_a_bearer_token() -> None:
    with FakeOpenAIServer(["ok"]) as srv:
        get_provider("m", base_url=srv.base_url, api_key="sk-test").complete(HELLO)
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test"


def test_anthropic_stream_with_text_and_tool_call() -> None:
    reply = tool_call("read", {"path": "b.py"}, id="toolu_1", text_before="Reading.")
    with FakeAnthropicServer([reply]) as srv:
        p = get_provider("claude-test", base_url=srv.base_url, api_key="k")
        events = list(p.stream(HELLO, system="sys", tools=[READ], max_tokens=100))
        req = srv.requests[0]
    kinds = [e.kind for e in events]
    assert kinds[-2:] == ["tool_use", "done"]
    msg = events[-1].message
    assert msg is not None
    assert msg.text == "Reading."
    assert [(u.id, u.name, u.input) for u in msg.tool_uses] == [
        ("toolu_1", "read", {"path": "b.py"})
    ]
    assert msg.stop_reason == "tool_use"
    assert msg.usage is not None and msg.usage.input > 0 and msg.usage.output > 0
    assert req.headers["x-api-key"] == "k"
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.body["system"] == "sys"
    assert req.body["max_tokens"] == 100
    assert req.body["tools"][0]["input_schema"] == READ.parameters


def test_anthropic_http_error_is_a_provider_error() -> None:
    with FakeAnthropicServer([HTTPFailure(529, "overloaded")]) as srv:
        p = get_provider("claude-test", base_url=srv.base_url, api_key="k")
        with pytest.raises(ProviderError, match=r"/v1/messages failed with HTTP 529: overloaded"):
            p.complete(HELLO)


def test_fake_server_answers_non_streaming_requests() -> None:
    import httpx

    with FakeOpenAIServer([tool_call("grep", {"q": "x"}, id="c7")]) as srv:
        r = httpx.post(
            f"{srv.base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
    body = r.json()
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"]["tool_calls"] == [
        {"id": "c7", "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}}
    ]
    assert body["usage"]["total_tokens"] == (
        body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_usage_from_the_openai_usage_chunk() -> None:
    with FakeOpenAIServer(["four"]) as srv:
        msg = get_provider("m", base_url=srv.base_url).complete(HELLO)
    assert isinstance(msg.usage, Usage)
    assert msg.usage.total == msg.usage.input + msg.usage.output


def _chunk(delta: dict[str, object], finish: str | None = None) -> str:
    import json

    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


@pytest.mark.parametrize(
    ("stream", "pattern"),
    [
        (
            'data: {"error": {"message": "quota exceeded"}}\n\n',
            r"reported an error mid-stream: quota exceeded; retry later",
        ),
        (
            _chunk({"content": "partial"}),
            r"Malformed stream from .*: the stream ended before a finish_reason or \[DONE\]",
        ),
        (
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "read", "arguments": "{bad"}}
                    ]
                },
                "tool_calls",
            )
            + "data: [DONE]\n\n",
            r"the arguments of tool call 'read' are not JSON",
        ),
        ("event: x\nbogus line\n\n", r"unexpected line 'bogus line'"),
    ],
)
def test_openai_stream_problems_are_provider_errors(stream: str, pattern: str) -> None:
    with FakeOpenAIServer([Malformed(stream)]) as srv, pytest.raises(ProviderError, match=pattern):
        get_provider("m", base_url=srv.base_url).complete(HELLO)


def test_openai_reasoning_deltas_become_a_thinking_block() -> None:
    stream = (
        _chunk({"reasoning_content": "think "})
        + _chunk({"reasoning_content": "hard"})
        + _chunk({"content": "answer"}, "stop")
        + "data: [DONE]\n\n"
    )
    with FakeOpenAIServer([Malformed(stream)]) as srv:
        events = list(get_provider("m", base_url=srv.base_url).stream(HELLO))
    assert [(e.kind, e.text) for e in events[:-1]] == [
        ("thinking", "think "),
        ("thinking", "hard"),
        ("text", "answer"),
    ]
    msg = events[-1].message
    assert msg is not None
    assert [type(b).__name__ for b in msg.content] == ["ThinkingBlock", "TextBlock"]
    assert msg.content[0].thinking.content == "think hard"  # type: ignore[union-attr]
    assert msg.usage is None and msg.stop_reason == "end_turn"


def test_anthropic_error_event_and_truncated_stream() -> None:
    err = 'event: error\ndata: {"type": "error", "error": {"message": "overloaded"}}\n\n'
    cut = (
        'event: message_start\ndata: {"type": "message_start", "message": {"usage": '
        '{"input_tokens": 3}}}\n\n'
    )
    with FakeAnthropicServer([Malformed(err), Malformed(cut)]) as srv:
        p = get_provider("claude-x", base_url=srv.base_url, api_key="k")
        with pytest.raises(ProviderError, match="error mid-stream: overloaded"):
            p.complete(HELLO)
        with pytest.raises(ProviderError, match="the stream ended before message_stop"):
            p.complete(HELLO)
