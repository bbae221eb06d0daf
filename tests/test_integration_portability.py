"""A conversation written through any framework adapter reads through every other: the same
user and assistant text, tool calls (id, name, arguments) and results, and reasoning text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from google.adk.events import Event
from google.genai import types
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from strands.types.session import Session as StrandsSession
from strands.types.session import SessionAgent, SessionMessage, SessionType

import threadline as tl
from threadline.formats import bedrock, gemini, openai_responses
from threadline.integrations import pydantic_ai
from threadline.integrations.adk import ThreadlineSessionService
from threadline.integrations.langchain import ThreadlineChatMessageHistory
from threadline.integrations.openai_agents import ThreadlineSession
from threadline.integrations.strands import ThreadlineSessionRepository
from threadline.model.content import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

REASONING = "The user wants the weather."

# the conversation every framework writes, as (speaker, kind, value…)
EXPECTED = [
    ("user", "text", "Weather in Paris?"),
    ("assistant", "thinking", REASONING),
    ("assistant", "call", "c1", "weather", {"city": "Paris"}),
    ("tool", "result", "c1", "Sunny"),
    ("assistant", "text", "Sunny in Paris."),
]


def flat(messages: list[Message]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in messages:
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                body = b.tool_result.content
                words = (
                    body
                    if isinstance(body, str)
                    else "".join(c.text.content for c in body if isinstance(c, TextBlock))
                )
                out.append(("tool", "result", b.tool_result.tool_use_id, words))
            elif isinstance(b, ToolUseBlock):
                out.append((m.role, "call", b.tool_use.id, b.tool_use.name, b.tool_use.input))
            elif isinstance(b, ThinkingBlock):
                out.append((m.role, "thinking", b.thinking.content))
            elif isinstance(b, TextBlock) and b.text.content:
                out.append((m.role, "text", b.text.content))
    return out


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- writers: each puts the conversation in threadline through its framework's own shapes --------


def write_openai_agents(store: Any, tid: str) -> None:
    s = ThreadlineSession(tid, store)
    run(
        s.add_items(
            [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": REASONING}],
                },
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "weather",
                    "arguments": '{"city": "Paris"}',
                },
                {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": "Sunny in Paris.", "annotations": []}
                    ],
                },
            ]
        )
    )
    s.close()


def write_langchain(store: Any, tid: str) -> None:
    h = ThreadlineChatMessageHistory(tid, store)
    h.add_messages(
        [
            HumanMessage("Weather in Paris?"),
            AIMessage(
                content=[{"type": "reasoning", "reasoning": REASONING}],
                tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Paris"}}],
            ),
            ToolMessage("Sunny", tool_call_id="c1"),
            AIMessage("Sunny in Paris."),
        ]
    )
    h.close()


def write_pydantic_ai(store: Any, tid: str) -> None:
    messages = [
        ModelRequest(parts=[UserPromptPart("Weather in Paris?")]),
        ModelResponse(
            parts=[ThinkingPart(REASONING), ToolCallPart("weather", {"city": "Paris"}, "c1")]
        ),
        ModelRequest(parts=[ToolReturnPart("weather", "Sunny", "c1")]),
        ModelResponse(parts=[TextPart("Sunny in Paris.")]),
    ]
    with store.open(tid) if store.exists(tid) else store.create(session_id=tid) as s:
        for m in pydantic_ai.load(messages):
            s.append_message(m)


ADK = ("app", "u", "s")


def write_adk(store: Any, tid: str) -> None:
    service = ThreadlineSessionService(store)

    async def go() -> None:
        session = await service.create_session(app_name=ADK[0], user_id=ADK[1], session_id=ADK[2])
        for author, role, parts in [
            ("user", "user", [types.Part(text="Weather in Paris?")]),
            (
                "helper",
                "model",
                [
                    types.Part(text=REASONING, thought=True),
                    types.Part(
                        function_call=types.FunctionCall(
                            id="c1", name="weather", args={"city": "Paris"}
                        )
                    ),
                ],
            ),
            (
                "helper",
                "user",
                [
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="c1", name="weather", response={"result": "Sunny"}
                        )
                    )
                ],
            ),
            ("helper", "model", [types.Part(text="Sunny in Paris.")]),
        ]:
            await service.append_event(
                session,
                Event(
                    author=author, invocation_id="i1", content=types.Content(role=role, parts=parts)
                ),
            )
        await service.close()

    run(go())


STRANDS = ("chat", "agent")


def write_strands(store: Any, tid: str) -> None:
    repo = ThreadlineSessionRepository(store)
    repo.create_session(StrandsSession(session_id=STRANDS[0], session_type=SessionType.AGENT))
    repo.create_agent(
        STRANDS[0], SessionAgent(agent_id=STRANDS[1], state={}, conversation_manager_state={})
    )
    for n, message in enumerate(
        [
            {"role": "user", "content": [{"text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": REASONING}}},
                    {"toolUse": {"toolUseId": "c1", "name": "weather", "input": {"city": "Paris"}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "c1",
                            "status": "success",
                            "content": [{"text": "Sunny"}],
                        }
                    }
                ],
            },
            {"role": "assistant", "content": [{"text": "Sunny in Paris."}]},
        ]
    ):
        repo.create_message(STRANDS[0], STRANDS[1], SessionMessage.from_message(message, n))
    repo.close()


# -- readers: each reads the session back in its framework's shapes, loaded for comparison -----


def read_openai_agents(store: Any, tid: str) -> list[Message]:
    s = ThreadlineSession(tid, store)
    items = run(s.get_items())
    s.close()
    return openai_responses.load(items)


def read_langchain(store: Any, tid: str) -> list[Message]:
    h = ThreadlineChatMessageHistory(tid, store)
    messages = h.messages
    h.close()
    out = []
    for lc in messages:
        if isinstance(lc, ToolMessage):
            out.append(
                Message(role="tool", content=[tl.tool_result(lc.tool_call_id, str(lc.content))])
            )
            continue
        parts = (
            lc.content if isinstance(lc.content, list) else [{"type": "text", "text": lc.content}]
        )
        blocks: list[Any] = []
        for p in parts:
            if isinstance(p, dict) and p.get("type") == "reasoning":
                blocks.append(tl.thinking(p["reasoning"]))
            elif isinstance(p, dict) and p.get("type") == "text":
                blocks.append(tl.text(p["text"]))
        if isinstance(lc, AIMessage):
            blocks += [tl.tool_use(c["id"] or "", c["name"], c["args"]) for c in lc.tool_calls]
        out.append(
            Message(role="assistant" if isinstance(lc, AIMessage) else "user", content=blocks)
        )
    return out


def read_pydantic_ai(store: Any, tid: str) -> list[Message]:
    with store.open(tid) as s:
        history = pydantic_ai.history(s)
    return [m for m in pydantic_ai.load(history)]


def read_adk(store: Any, tid: str) -> list[Message]:
    service = ThreadlineSessionService(store)
    got = run(service.get_session(app_name=ADK[0], user_id=ADK[1], session_id=ADK[2]))
    run(service.close())
    contents = [
        e.content.model_dump(mode="json", exclude_none=True)
        for e in got.events
        if e.content is not None
    ]
    return gemini.load(contents)


def read_strands(store: Any, tid: str) -> list[Message]:
    repo = ThreadlineSessionRepository(store)
    if repo.read_session(STRANDS[0]) is None:
        repo.create_session(StrandsSession(session_id=STRANDS[0], session_type=SessionType.AGENT))
    listed = repo.list_messages(STRANDS[0], STRANDS[1])
    repo.close()
    return bedrock.load([json.loads(json.dumps(m.to_message())) for m in listed])


FRAMEWORKS: dict[
    str, tuple[Callable[[Any, str], None], Callable[[Any, str], list[Message]], str]
] = {
    "openai_agents": (write_openai_agents, read_openai_agents, "chat-1"),
    "langchain": (write_langchain, read_langchain, "chat-1"),
    "pydantic_ai": (write_pydantic_ai, read_pydantic_ai, "chat-1"),
    "adk": (write_adk, read_adk, ThreadlineSessionService.threadline_id(*ADK)),
    "strands": (write_strands, read_strands, ThreadlineSessionRepository.threadline_id(*STRANDS)),
}


@pytest.mark.parametrize("writer", list(FRAMEWORKS))
@pytest.mark.parametrize("reader", list(FRAMEWORKS))
def test_a_conversation_written_by_one_framework_reads_the_same_in_another(
    writer: str, reader: str
) -> None:
    store = tl.open_store("memory://")
    write, _, wid = FRAMEWORKS[writer]
    _, read, rid = FRAMEWORKS[reader]
    write(store, wid)
    if rid != wid:  # each framework names its sessions its own way: open the same conversation
        with store.open(wid) as src:
            store.create(session_id=rid, records=src.path())
    assert flat(read(store, rid)) == EXPECTED
