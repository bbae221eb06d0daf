"""The LangGraph checkpointer rebuilt by a fresh saver (threadline.integrations.langgraph): every
checkpoint, list and pending write a new saver (a new process) reads from the stored entries
equals what the writing saver returned and what a plain reference saver keeps, on JSONL,
SQLite and PostgreSQL; the failures found that way, kept as regression tests; and two savers
writing one thread."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

import threadline as tl
from conftest import make_store
from threadline.integrations import _langgraph_index as index
from threadline.integrations.langgraph import ThreadlineSaver

STORES = ["jsonl", "sqlite", "postgres"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tl.Store]:
    st = make_store(request.param, tmp_path)
    yield st
    st.close()


def _fields(t: Any) -> tuple[Any, ...] | None:
    if t is None:
        return None
    return (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)


def _put(saver: Any, config: Any, cid: str, messages: list[Any], version: int, step: int) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = cid
    checkpoint["ts"] = f"2026-11-27T08:00:{step:02d}+00:00"
    checkpoint["channel_values"] = {"messages": list(messages)}
    checkpoint["channel_versions"] = {"messages": version}
    meta = {"source": "loop", "step": step, "parents": {}}
    return saver.put(config, checkpoint, meta, {"messages": version})


# -- found by the rebuild tests, kept as regression tests --------------------------------------


def test_a_step_that_adds_64_messages_or_more_keeps_its_parent(store: tl.Store) -> None:
    """A checkpoint entry names its parent by the tree when the nearest saver entry above it
    belongs to the parent; the messages its step adds lie between. The walk up to that entry
    stopped after 64 entries, so a step adding 64 messages or more (a fresh saver rewriting
    a list, a long input) read back with no parent and its fields rebuilt from nothing: no
    metadata (``KeyError: 'md'``), versions missing, from the writer's own index and from a
    fresh saver's."""
    root: Any = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    ref = InMemorySaver()
    saver = ThreadlineSaver(store)
    messages = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(70)]
    ids = ["1f000000-0000-6000-8000-000000000001", "1f000000-0000-6000-8000-000000000002"]
    configs = []
    for s in (saver, ref):
        first = _put(s, root, ids[0], messages[:1], 1, 0)
        configs.append(_put(s, first, ids[1], messages, 2, 1))  # 69 messages added in one step
    want = _fields(ref.get_tuple(configs[1]))
    assert want is not None and want[3]["configurable"]["checkpoint_id"] == ids[0]
    assert _fields(saver.get_tuple(configs[0])) == want
    saver.close()
    with ThreadlineSaver(store) as fresh:  # from the branch
        assert _fields(fresh.get_tuple({"configurable": {"thread_id": "long"}})) == want
    with ThreadlineSaver(store) as fresh:  # from the whole index
        assert [_fields(t) for t in fresh.list({"configurable": {"thread_id": "long"}})] == [
            _fields(t) for t in ref.list({"configurable": {"thread_id": "long"}})
        ]


def test_a_message_given_its_id_while_it_is_written_keeps_that_id(
    store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph stores a task's writes in the background while its ``add_messages`` reducer
    gives a message without an id (a tool result) its id. The saver read the id after it
    wrote the message's entry: the entry held none, the saver remembered the new one, and the
    next checkpoint referred to the entry as if it held it. A fresh saver then read the tool
    result without its id, its next step no longer matched the stored list and it wrote every
    message of the conversation again."""
    tool = ToolMessage("result", tool_call_id="call-1")
    real = index.lc.round_trips

    def racing(message: Any, converted: Any = None) -> bool:
        ok = real(message, converted)
        if message is tool and tool.id is None:
            tool.id = "given-later"  # the reducer, in LangGraph's thread, right then
        return ok

    monkeypatch.setattr(index.lc, "round_trips", racing)
    root: Any = {"configurable": {"thread_id": "race", "checkpoint_ns": ""}}
    hi = HumanMessage("hi", id="h")
    call = AIMessage("", id="a", tool_calls=[{"name": "f", "args": {}, "id": "call-1"}])
    saver = ThreadlineSaver(store)
    first = _put(saver, root, "1f000000-0000-6000-8000-000000000001", [hi, call], 1, 0)
    saver.put_writes(first, [("messages", [tool])], "task-1", "~__pregel_pull, tools")
    second = _put(saver, first, "1f000000-0000-6000-8000-000000000002", [hi, call, tool], 2, 1)
    monkeypatch.setattr(index.lc, "round_trips", real)
    want = saver.get_tuple(second)
    assert want is not None and want.checkpoint["channel_values"]["messages"][2].id == "given-later"
    saver.close()
    with ThreadlineSaver(store) as fresh:
        got = fresh.get_tuple(second)
        assert _fields(got) == _fields(want)
        # the next step stores the one message it adds, not the conversation again
        session = fresh.session("race")
        assert session is not None
        before = len(session.entry_ids())
        answer = AIMessage("done", id="d")
        _put(fresh, second, "1f000000-0000-6000-8000-000000000003", [hi, call, tool, answer], 3, 2)
        assert len(session.entry_ids()) == before + 2  # the answer and the checkpoint
