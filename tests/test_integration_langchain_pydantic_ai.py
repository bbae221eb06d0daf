"""threadline under LangChain (a chat message history with tool calls) and pydantic-ai (a
provider format and a run helper), with each framework's own offline test models."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import threadline as tl
from conftest import make_store
from threadline.integrations import pydantic_ai
from threadline.integrations.langchain import ThreadlineChatMessageHistory
from threadline.render import message_text


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tl.Store]:
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


LC = [
    SystemMessage("Be brief."),
    HumanMessage("Weather in Paris?"),
    AIMessage("", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Paris"}}]),
    ToolMessage("Sunny", tool_call_id="c1"),
    AIMessage("Sunny in Paris."),
]


def test_langchain_messages_with_tool_calls_round_trip_and_clear_keeps_them(
    backend: tl.Store,
) -> None:
    history = ThreadlineChatMessageHistory("lc-1", backend)
    history.add_messages(LC)
    history.close()
    again = ThreadlineChatMessageHistory("lc-1", backend)
    assert again.messages == LC
    ctx = again.session.context()
    assert [(m.role, message_text(m, with_ids=False)) for m in ctx.messages] == [
        ("system", "Be brief."),
        ("user", "Weather in Paris?"),
        ("assistant", '→ weather({"city": "Paris"})'),
        ("tool", "← result: Sunny"),
        ("assistant", "Sunny in Paris."),
    ]
    again.clear()
    assert again.messages == []
    assert len([e for e in again.session.entries() if e.type == "message"]) == 5
    again.close()


def test_a_langchain_chat_model_sees_the_history_of_earlier_turns(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "s")
    model = FakeMessagesListChatModel(responses=[AIMessage("Hi Ann."), AIMessage("Ann.")])
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | model
    for question in ["I am Ann.", "Who am I?"]:
        history = ThreadlineChatMessageHistory("lc-2", store)
        answer = chain.invoke({"history": history.messages, "question": question})
        history.add_messages([HumanMessage(question), answer])
        history.close()
    assert [m.text for m in store.open("lc-2").context().messages] == [
        "I am Ann.",
        "Hi Ann.",
        "Who am I?",
        "Ann.",
    ]


def test_messages_another_framework_wrote_read_as_langchain_messages() -> None:
    store = tl.open_store("memory://")
    with store.create(session_id="lc-3") as s:
        s.append_message("user", [tl.text("Which is warmer?"), tl.image("AAAA")])
        s.append_message(
            "assistant",
            [
                tl.thinking("Two calls at once."),
                tl.text("Checking both."),
                tl.tool_use("c1", "weather", {"city": "Paris"}),
                tl.tool_use("c2", "clock", "UTC"),
            ],
        )
        # the results in one user message, as Anthropic and Bedrock send them
        s.append_message("user", [tl.tool_result("c1", "Sunny"), tl.tool_result("c2", "no", True)])
        s.append_message("assistant", "Paris.")
    history = ThreadlineChatMessageHistory("lc-3", store)
    assert history.messages == [
        HumanMessage(
            [
                {"type": "text", "text": "Which is warmer?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]
        ),
        AIMessage(
            [
                {"type": "reasoning", "reasoning": "Two calls at once."},
                {"type": "text", "text": "Checking both."},
            ],
            tool_calls=[
                {"id": "c1", "name": "weather", "args": {"city": "Paris"}},
                {"id": "c2", "name": "clock", "args": {"input": "UTC"}},
            ],
        ),
        ToolMessage("Sunny", tool_call_id="c1", name="weather"),
        ToolMessage("no", tool_call_id="c2", name="clock", status="error"),
        AIMessage("Paris."),
    ]
    history.close()


def test_langchain_reasoning_is_a_thinking_block_and_comes_back_as_written() -> None:
    store = tl.open_store("memory://")
    said = [
        HumanMessage("Why?"),
        AIMessage([{"type": "reasoning", "reasoning": "Think first."}, "Because.", {"x": 1}]),
        AIMessage([{"type": "thinking", "thinking": "Anthropic-style.", "signature": "s"}]),
    ]
    history = ThreadlineChatMessageHistory("lc-4", store)
    history.add_messages(said)
    assert history.messages == said
    history.close()
    with store.open("lc-4") as s:  # what every other adapter reads
        assert [message_text(m, with_ids=False) for m in s.context().messages] == [
            "Why?",
            "(thinking) Think first.\nBecause.\n[item block]",
            "(thinking) Anthropic-style.",
        ]


def test_a_history_the_earlier_adapter_wrote_reads_back_whole() -> None:
    from langchain_core.messages import message_to_dict

    store = tl.open_store("memory://")
    said = AIMessage("Hi.", id="m1", response_metadata={"model_name": "fake"})
    with store.create(session_id="lc-5") as s:
        s.append_message(
            "assistant", "Hi.", provider_details={"langchain": {"message": message_to_dict(said)}}
        )
    history = ThreadlineChatMessageHistory("lc-5", store)
    assert history.messages == [said]
    history.close()


def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def test_pydantic_ai_messages_round_trip_through_the_format() -> None:
    agent = Agent(TestModel(), system_prompt="Be brief.", tools=[weather])
    result = asyncio.run(agent.run("Weather?"))
    messages = result.all_messages()
    back = pydantic_ai.dump(pydantic_ai.load(messages))
    assert ModelMessagesTypeAdapter.dump_python(
        back, mode="json"
    ) == ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def test_a_pydantic_ai_run_persists_reopens_and_gets_its_history_back(backend: tl.Store) -> None:
    seen: list[int] = []

    def reply(messages: list[Any], info: AgentInfo) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

        seen.append(len(messages))
        last = messages[-1].parts[-1]
        if last.part_kind == "user-prompt" and "weather" in str(last.content):
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"}, "call_1")])
        if last.part_kind == "tool-return":
            return ModelResponse(parts=[TextPart(f"It is {last.content}.")])
        return ModelResponse(parts=[TextPart(f"{len(messages)} messages so far.")])

    agent = Agent(FunctionModel(reply), system_prompt="Be brief.", tools=[weather])
    with backend.create(session_id="pa-1") as s:
        result = asyncio.run(agent.run("weather in Paris?", message_history=pydantic_ai.history(s)))
        pydantic_ai.record(s, result)
    with backend.open("pa-1") as s:
        result = asyncio.run(agent.run("And then?", message_history=pydantic_ai.history(s)))
        assert result.output == "5 messages so far."
        pydantic_ai.record(s, result)
        assert [(m.role, message_text(m, with_ids=False)) for m in s.context().messages] == [
            ("system", "Be brief."),
            ("user", "weather in Paris?"),
            ("assistant", '→ weather({"city": "Paris"})'),
            ("tool", "← result: Sunny in Paris"),
            ("assistant", "It is Sunny in Paris."),
            ("user", "And then?"),
            ("assistant", "5 messages so far."),
        ]
