"""threadline as an OpenAI Agents SDK session: real Runner runs with the SDK's ScriptedModel,
lossless items, non-destructive pop/clear, threadline's edits reaching the next run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from click.testing import CliRunner
from starlette.testclient import TestClient

import threadline as tl
from conftest import PG_URL, pg_schema
from threadline.cli.main import cli
from threadline.integrations.openai_agents import ThreadlineSession
from threadline.render import message_text
from threadline.web import create_app

set_tracing_disabled(True)
TURNS = Path(__file__).with_name("framework_turns.py")


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def two_turns(session: ThreadlineSession) -> list[str]:
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Paris"}, call_id="call_1")],
            [assistant_message("It is sunny in Paris.")],
            [assistant_message("You asked about Paris.")],
        ]
    )
    agent = Agent(name="helper", model=model, tools=[weather])
    first = await Runner.run(agent, "Weather in Paris?", session=session)
    second = await Runner.run(agent, "What did I ask?", session=session)
    return [first.final_output, second.final_output]


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """A store location a new process can open too."""
    if request.param == "jsonl":
        return {"url": str(tmp_path / "sessions")}
    if request.param == "sqlite":
        return {"url": f"sqlite:///{tmp_path}/store.db"}
    return {"url": PG_URL, "options": {"tenant": "test", "schema": pg_schema()}}


def test_a_run_with_a_tool_call_persists_reopens_in_a_new_process_and_continues(
    where: dict[str, Any],
) -> None:
    store = tl.open_store(where["url"], **where.get("options", {}))
    session = ThreadlineSession("chat-1", store)
    assert run(two_turns(session)) == ["It is sunny in Paris.", "You asked about Paris."]
    session.close()

    out = subprocess.run(
        [sys.executable, str(TURNS), "openai-agents", json.dumps(where), "chat-1", "And tomorrow?"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "You said before: ['Weather in Paris?', 'What did I ask?']\n"

    s = store.open("chat-1")
    ctx = s.context()
    assert [(m.role, message_text(m, with_ids=False)) for m in ctx.messages] == [
        ("user", "Weather in Paris?"),
        ("assistant", '→ weather({"city": "Paris"})'),
        ("tool", "← result: Sunny in Paris"),
        ("assistant", "It is sunny in Paris."),
        ("user", "What did I ask?"),
        ("assistant", "You asked about Paris."),
        ("user", "And tomorrow?"),
        ("assistant", "You said before: ['Weather in Paris?', 'What did I ask?']"),
    ]
    call = ctx.messages[1].content[0]
    assert (call.tool_use.id, call.tool_use.name, call.tool_use.input) == (  # type: ignore[union-attr]
        "call_1",
        "weather",
        {"city": "Paris"},
    )
    api = TestClient(create_app(store), base_url="http://127.0.0.1")
    body = api.get("/api/sessions/chat-1/context").json()
    assert body["total"] == 8
    assert [(r["view_id"], r["role"], r["blocks"]) for r in body["rows"][:3]] == [
        (ctx.view[0].id, "user", ["text"]),
        (ctx.view[1].id, "assistant", ["tool_use"]),
        (ctx.view[2].id, "tool", ["tool_result"]),
    ]
    store.close()


def test_threadline_show_prints_the_agent_conversation(tmp_path: Path) -> None:
    session = ThreadlineSession("chat-2", tmp_path / "s")
    run(two_turns(session))
    session.close()
    out = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "show", "chat-2"])
    assert out.exit_code == 0, out.output
    lines = [ln for ln in out.output.splitlines() if not ln.startswith("[")]
    assert lines == [
        "Session chat-2: 6 entries, 6 messages in the file, 6 in context; model -, thinking off",
        "    Weather in Paris?",
        '    → weather({"city": "Paris"}) [call_1]',
        "    ← result [call_1]: Sunny in Paris",
        "    It is sunny in Paris.",
        "    What did I ask?",
        "    You asked about Paris.",
    ]


ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "input_text", "text": "Look this up"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Search"}],
        "encrypted_content": "gAAAA-opaque",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "search",
        "arguments": '{"q":"x"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "c1", "output": "found x"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Here is x.", "annotations": []}],
    },
]


def test_items_come_back_exactly_as_added(tmp_path: Path) -> None:
    session = ThreadlineSession("items", tl.open_store(tmp_path / "s"))
    run(session.add_items(ITEMS[:2]))
    run(session.add_items(ITEMS[2:]))
    assert run(session.get_items()) == ITEMS
    assert run(session.get_items(limit=2)) == ITEMS[-2:]
    assert run(session.get_items(limit=0)) == []


def test_pop_item_moves_the_leaf_back_and_keeps_the_popped_item_in_the_tree(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "s")
    session = ThreadlineSession("pop", store)
    run(session.add_items(ITEMS))
    assert run(session.pop_item()) == ITEMS[-1]
    assert run(session.pop_item()) == ITEMS[-2]
    # the reasoning and the call were one assistant entry: popping the call keeps the reasoning
    assert run(session.pop_item()) == ITEMS[3]
    assert run(session.get_items()) == ITEMS[:3]
    s = session.session
    popped = [e for e in s.entries() if e.type == "message" and "Here is x." in e.message.text]
    assert len(popped) == 1 and popped[0].id not in s.path_ids()
    s.branch(popped[0].id)
    assert run(session.get_items()) == ITEMS


def test_clear_session_empties_the_context_and_the_old_branch_can_be_checked_out(
    tmp_path: Path,
) -> None:
    session = ThreadlineSession("clear", tl.open_store(tmp_path / "s"))
    run(session.add_items(ITEMS))
    old_leaf = session.session.leaf_id
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert run(session.pop_item()) is None
    assert old_leaf is not None
    session.session.branch(old_leaf)
    assert run(session.get_items()) == ITEMS


def test_undo_and_context_operations_done_in_threadline_reach_the_next_run(tmp_path: Path) -> None:
    session = ThreadlineSession("edits", tl.open_store(tmp_path / "s"))
    run(two_turns(session))
    s = session.session
    s.undo(1)  # drop "What did I ask?" and its answer
    s.digest(0, 3, "The user asked the weather in Paris: sunny.")
    model = ScriptedModel([[assistant_message("ok")]])
    run(Runner.run(Agent(name="helper", model=model), "Thanks", session=session))
    assert model.calls[0].input == [
        {"role": "system", "content": "The user asked the weather in Paris: sunny."},
        {"role": "user", "content": "Thanks"},
    ]


def test_a_chain_of_records_under_the_leaf_reads_the_same_before_and_after_a_reopen(
    store: tl.Store,
) -> None:
    from threadline.model.entries import MessageEntry

    s = store.create()
    s.append_message("user", "a")
    assert len(s.context().messages) == 1  # a warm, incremental view
    parent = s.leaf_id
    records = []
    for word in ["b", "c", "d"]:
        rec = MessageEntry(
            id=f"id-{word}",
            parent_id=parent,
            timestamp="2026-01-01T00:00:00Z",
            message=tl.Message(role="user", content=[tl.text(word)]),
        )
        records.append(rec)
        parent = rec.id
    assert s.append_records(records) == ["id-b", "id-c", "id-d"]
    assert (s.leaf_id, [m.text for m in s.context().messages]) == ("id-d", ["a", "b", "c", "d"])
    s.close()
    again = store.open(s.id)
    assert (again.leaf_id, [m.text for m in again.context().messages]) == (
        "id-d",
        ["a", "b", "c", "d"],
    )


def test_session_settings_default_to_the_sdks_and_a_dict_is_checked_and_converted(
    tmp_path: Path,
) -> None:
    """As the SDK's own sessions: no settings is ``SessionSettings()`` (no limit), a dict becomes
    ``SessionSettings`` and a field it does not have is refused; the limit then applies."""
    from agents.memory import SessionSettings

    store = tl.open_store(tmp_path / "s")
    plain = ThreadlineSession("plain", store)
    assert isinstance(plain.session_settings, SessionSettings)
    assert plain.session_settings.limit is None
    limited = ThreadlineSession("limited", store, session_settings={"limit": 2})
    assert isinstance(limited.session_settings, SessionSettings)
    assert limited.session_settings.limit == 2
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        ThreadlineSession("wrong", store, session_settings={"limitt": 1})
    items = [{"role": "user", "content": f"q{k}"} for k in range(3)]
    run(limited.add_items(items))
    assert [i["content"] for i in run(limited.get_items())] == ["q1", "q2"]
    limited.close()
    plain.close()
    store.close()


def test_a_message_purged_after_a_read_is_not_served_from_memory(tmp_path: Path) -> None:
    """get_items keeps each message's encoded items; a purge (the one change to a stored
    entry) through the session makes the next read encode the purged message again."""
    store = tl.open_store(tmp_path / "s")
    session = ThreadlineSession("purging", store)
    run(
        session.add_items(
            [{"role": "user", "content": "keep"}, {"role": "user", "content": "secret"}]
        )
    )
    assert [i["content"] for i in run(session.get_items())] == ["keep", "secret"]
    ts = session.session
    ts.purge([ts.context().view[1].entry_id], dry_run=False)
    after = json.dumps(run(session.get_items()))
    assert "keep" in after and "secret" not in after
    session.close()
    store.close()
