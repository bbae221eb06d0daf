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
