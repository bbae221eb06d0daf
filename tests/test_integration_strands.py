"""threadline as a Strands session repository: a Strands Agent with a tool call keeps its
conversation and state in threadline on every backend, reopens, and threadline's bookmarks and
undo (/tag, /undo N|tag, /tags, /clear) act on the agent's conversation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from strands import Agent, tool
from strands.models import Model
from strands.session.repository_session_manager import RepositorySessionManager
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionMessage, SessionType

import threadline as tl
from conftest import make_store
from test_integration_adk import TURNS, location
from threadline.integrations.strands import ThreadlineSessionRepository


class Scripted(Model):  # type: ignore[misc]
    """Answers with the given assistant messages in turn (text and toolUse blocks)."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.seen: list[list[dict[str, Any]]] = []

    def update_config(self, **config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError
        yield

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        self.seen.append(json.loads(json.dumps(messages, default=str)))
        reply = self.replies.pop(0)
        stop = "end_turn"
        yield {"messageStart": {"role": "assistant"}}
        for block in reply["content"]:
            if "text" in block:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            else:
                stop = "tool_use"
                use = block["toolUse"]
                yield {
                    "contentBlockStart": {
                        "start": {"toolUse": {"name": use["name"], "toolUseId": use["toolUseId"]}}
                    }
                }
                yield {
                    "contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(use["input"])}}}
                }
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": stop}}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def say(words: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": words}]}


CALL = {
    "role": "assistant",
    "content": [{"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Paris"}}}],
}


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tl.Store]:
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


def agent_on(repo: ThreadlineSessionRepository, replies: list[dict[str, Any]]) -> Agent:
    manager = RepositorySessionManager(session_id="chat", session_repository=repo)
    return Agent(
        agent_id="helper",
        model=Scripted(replies),
        tools=[weather],
        session_manager=manager,
        callback_handler=None,
    )


def texts(messages: list[Any]) -> list[str]:
    out = []
    for m in messages:
        for b in m["content"]:
            if "text" in b:
                out.append(f"{m['role']}: {b['text']}")
            elif "toolUse" in b:
                out.append(f"{m['role']}: call {b['toolUse']['name']}")
            elif "toolResult" in b:
                out.append(f"{m['role']}: result {b['toolResult']['content'][0]['text']}")
    return out


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_an_agent_with_a_tool_call_persists_reopens_and_continues_in_a_new_process(
    kind: str, tmp_path: Path
) -> None:
    where = location(kind, tmp_path)
    backend = tl.open_store(where["url"], **where.get("options", {}))
    repo = ThreadlineSessionRepository(backend)
    agent = agent_on(repo, [CALL, say("Sunny in Paris."), say("You asked about Paris.")])
    agent("Weather in Paris?")
    agent.state.set("city", "Paris")
    agent("What did I ask?")
    repo.close()

    again = ThreadlineSessionRepository(backend)
    model_replies = [say("Still Paris.")]
    agent = agent_on(again, model_replies)
    assert agent.state.get("city") == "Paris"
    assert texts(agent.messages) == [
        "user: Weather in Paris?",
        "assistant: call weather",
        "user: result Sunny in Paris",
        "assistant: Sunny in Paris.",
        "user: What did I ask?",
        "assistant: You asked about Paris.",
    ]
    agent("And now?")
    again.close()
    out = subprocess.run(
        [sys.executable, str(TURNS), "strands", json.dumps(where), "chat", "Bye"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == ("You said before: ['Weather in Paris?', 'What did I ask?', 'And now?']\n")
    with backend.open(ThreadlineSessionRepository.threadline_id("chat", "helper")) as s:
        assert [m.role for m in s.context().messages] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
    backend.close()


def test_tag_undo_tags_and_clear_act_on_the_agent_conversation(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "s")
    repo = ThreadlineSessionRepository(store)
    agent = agent_on(repo, [say("one"), say("two"), say("three")])
    agent("first")
    s = repo.session("chat", "helper")
    s.tag("after-first")
    agent("second")
    agent("third")
    assert [t.name for t in s.tags().tags] == ["__session_start__", "after-first"]
    result = s.undo(1)
    assert result.user_messages_removed == 1
    assert texts(agent_on(repo, []).messages) == [
        "user: first",
        "assistant: one",
        "user: second",
        "assistant: two",
    ]
    s.undo_to("after-first")
    assert texts(agent_on(repo, []).messages) == ["user: first", "assistant: one"]
    s.clear()
    assert agent_on(repo, []).messages == []
    # nothing was deleted: the old leaf is still in the tree
    assert len([e for e in s.entries() if e.type == "message"]) == 6


def test_repository_contract_errors_and_exact_round_trips(tmp_path: Path) -> None:
    repo = ThreadlineSessionRepository(tl.open_store(tmp_path / "s"))
    session = Session(session_id="s1", session_type=SessionType.AGENT)
    repo.create_session(session)
    assert repo.read_session("s1") == session
    with pytest.raises(SessionException):
        repo.create_session(session)
    assert repo.read_session("nope") is None
    agent = agent_on(repo, [])
    del agent
    from strands.types.session import SessionAgent

    repo.create_agent(
        "s1", SessionAgent(agent_id="a", state={"k": 1}, conversation_manager_state={})
    )
    with pytest.raises(SessionException):
        repo.create_agent("s1", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
    message = SessionMessage.from_message(
        {
            "role": "user",
            "content": [
                {"text": "hi"},
                {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}},
            ],
        },
        0,
    )
    repo.create_message("s1", "a", message)
    assert repo.list_messages("s1", "a") == [message]
    assert repo.read_message("s1", "a", 0) == message
    with pytest.raises(SessionException):
        repo.create_message("s1", "a", message)
    message.redact_message = {"role": "user", "content": [{"text": "[redacted]"}]}
    repo.update_message("s1", "a", message)
    assert repo.read_message("s1", "a", 0) == message
    s = repo.session("s1", "a")
    # the redaction is a new branch; the original message stays in the tree
    assert [e.message.text for e in s.entries() if e.type == "message"] == ["hi", "[redacted]"]
    assert [m.text for m in s.context().messages] == ["[redacted]"]
