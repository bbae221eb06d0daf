"""The LangGraph checkpointer (threadline.integrations.langgraph) on JSONL, SQLite and PostgreSQL:
LangGraph's own conformance suite, and a real compiled graph compared with ``InMemorySaver``."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

import threadline as tl
from _langgraph_chat import build, run, shape, user
from conftest import PG_URL, make_store, pg_schema
from threadline.integrations._langgraph_index import pack, pack_uuid, unpack
from threadline.integrations.langgraph import ThreadlineSaver
from threadline.model.entries import MessageEntry

STORES = ["jsonl", "sqlite", "postgres"]
HERE = Path(__file__).resolve().parent


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[tl.Store, list[str]]]:
    """A store, and the arguments that open it in another process."""
    if request.param == "postgres":
        schema = pg_schema()
        st = make_store("postgres", tmp_path, schema=schema)
        args = [PG_URL, "test", schema]
    else:
        st = make_store(request.param, tmp_path)
        args = [st.url]
    yield st, args
    st.close()


@pytest.mark.parametrize("kind", STORES)
def test_conformance_suite_passes_every_capability(kind: str, tmp_path: Path) -> None:
    stores: list[Any] = []

    @checkpointer_test(name=f"ThreadlineSaver[{kind}]")
    async def factory() -> Any:
        st = make_store(kind, tmp_path / str(len(stores)))
        stores.append(st)
        saver = ThreadlineSaver(st)
        yield saver
        saver.close()
        st.close()

    report = asyncio.run(validate(factory))
    outcome = {name: (r.passed, r.tests_failed, r.failures) for name, r in report.results.items()}
    assert outcome == {
        name: (True, 0, [])
        for name in (
            "put",
            "put_writes",
            "get_tuple",
            "list",
            "delete_thread",
            "delete_for_runs",
            "copy_thread",
            "prune",
        )
    }
    assert len(stores) == 8  # one fresh store per capability suite


def _history(graph: Any, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (s.metadata["step"], s.metadata["source"], s.next, len(s.values["messages"]))
        for s in graph.get_state_history(config)
    ]


def _after_turn(graph: Any, config: dict[str, Any], n_messages: int) -> dict[str, Any]:
    """The config of the checkpoint that ended the turn leaving ``n_messages`` messages."""
    for s in graph.get_state_history(config):
        if not s.next and len(s.values["messages"]) == n_messages:
            return s.config  # type: ignore[no-any-return]
    raise AssertionError(f"no finished turn with {n_messages} messages")


def test_a_50_turn_graph_resumed_in_a_new_process_and_time_travelled_equals_in_memory_saver(
    store: tuple[tl.Store, list[str]],
) -> None:
    store_, args = store
    config = {"configurable": {"thread_id": "chat-1"}}
    # the reference: LangGraph's InMemorySaver, all in one process
    ref = build(InMemorySaver())
    run(ref, config, 1, 25)
    ref_main = run(ref, config, 26, 50)
    ref_fork = _after_turn(ref, config, 26)  # the end of turn 10 (turns 3, 6, 9 call the tool)
    run(ref, ref_fork, 101, 101)  # time travel: a new branch from there
    ref_branch = run(ref, config, 102, 105)  # the thread's latest checkpoint is on it
    ref_history = _history(ref, config)

    # threadline: 25 turns here, 25 in a new process, then time travel here
    with ThreadlineSaver(store_) as saver:
        run(build(saver), config, 1, 25)
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "_langgraph_chat.py"),
            args[0],
            "chat-1",
            "26",
            "50",
            *args[1:],
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    main_shape = json.loads(out.stdout)
    saver = ThreadlineSaver(store_)
    graph = build(saver)
    assert main_shape == shape(ref_main["messages"])
    assert shape(graph.get_state(config).values["messages"]) == main_shape
    fork = _after_turn(graph, config, 26)
    run(graph, fork, 101, 101)
    branch = run(graph, config, 102, 105)
    assert shape(branch["messages"]) == shape(ref_branch["messages"])
    assert _history(graph, config) == ref_history
    assert len(ref_history) == 201  # both branches: 3 checkpoints a turn, 5 with a tool call

    # the thread is a readable threadline session: its current branch is the conversation
    session = saver.session("chat-1")
    assert session is not None and session.id == "chat-1"
    ctx = session.context()
    assert [m.role for m in ctx.messages] == [
        {"human": "user", "ai": "assistant", "tool": "tool"}[m.type] for m in branch["messages"]
    ]
    assert [m.text for m in ctx.messages if m.role != "tool"] == [
        m.content for m in branch["messages"] if m.type != "tool"
    ]
    # each message is stored once, however many checkpoints hold it
    stored = [e for e in session.entries() if e.type == "message"]
    assert len(stored) == len(ref_main["messages"]) + len(branch["messages"]) - 26
    saver.close()


def test_a_thread_reads_back_as_the_conversation_in_any_provider_format(jsonl_store: Any) -> None:
    with ThreadlineSaver(jsonl_store) as saver:
        final = run(build(saver), {"configurable": {"thread_id": "t"}}, 1, 3)
        session = saver.session("t")
        assert session is not None
        payload = tl.formats.dump_context("openai_chat", session.context().messages)
    assert [m.type for m in final["messages"]] == [
        "human",
        "ai",
        "human",
        "ai",
        "human",
        "ai",
        "tool",
        "ai",
    ]
    assert payload[6] == {"role": "tool", "tool_call_id": "call-3", "content": "result for 3: 9"}
    assert payload[5]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q":3}'}


def test_a_messages_channel_is_stored_as_the_messages_added(jsonl_store: Any) -> None:
    saver = ThreadlineSaver(jsonl_store)
    graph = build(saver)
    config = {"configurable": {"thread_id": "deltas"}}
    run(graph, config, 1, 30)
    session = saver.session("deltas")
    assert session is not None
    records = [
        json.loads(line)
        for line in (Path(jsonl_store.url) / "deltas.jsonl").read_bytes().splitlines()[1:]
    ]
    messages = [r for r in records if r["type"] == "message"]
    assert len(messages) == len(graph.get_state(config).values["messages"]) == 80
    parent = {r["id"]: r["parent_id"] for r in records}
    kind = {r["id"]: r["type"] for r in records}

    def at(entry: str, place: int) -> str:  # a message referred to by its place above entry
        for _ in range(place):
            entry = parent[entry]
        return entry

    entries = [r for r in records if r["type"] == "custom" and r["custom"]["custom_type"] == "lg.s"]
    checkpoints = [r["custom"]["data"] for r in entries]
    # a step that adds one message by its place says only the place: ["m", [place]] in full
    assert sum(type(c["b"].get("messages")) is int for c in checkpoints) > 70
    for c in checkpoints:
        c["b"] = {k: ["m", [v]] if type(v) is int and v > 0 else v for k, v in c["b"].items()}
    kinds = [c["b"]["messages"][0] for c in checkpoints if "messages" in c["b"]]
    assert kinds[0] == "l" and set(kinds[1:]) == {"m"}  # whole once, then only what was added
    added = [c["b"]["messages"] for c in checkpoints if c["b"].get("messages", [""])[0] == "m"]
    holders = [r["id"] for r in entries if r["custom"]["data"]["b"].get("messages", [""])[0] == "m"]
    # each step's message is just above its checkpoint: referred to by its place, not its id
    # (a tool message LangGraph gave its id after it was stored: [place, that id])
    places = [spec[1][0] if type(spec[1][0]) is int else spec[1][0][0] for spec in added]
    assert {type(p) for p in places} == {int} and max(places) <= 3
    ids = [at(h, p) for h, p in zip(holders, places, strict=True)]
    assert {kind[i] for i in ids} == {"message"} and len(set(ids)) == len(ids)
    # the base is the parent's: not written; every 64th link also says where the list was 63
    # links back (here the first value, stored whole) and every message added since, its own
    marked = [i for i, spec in enumerate(added) if len(spec) == 4]
    assert (len(added), marked) == (79, [63])
    assert {len(spec) for i, spec in enumerate(added) if i not in marked} == {2}
    first = next(
        r["id"]
        for r in records
        if r["type"] == "custom" and "messages" in r["custom"]["data"].get("b", {})
    )
    refs = [  # as the index reads them: entry ids, [entry id, message id] kept
        i if type(spec[1][0]) is int else [i, *spec[1][0][1:]]
        for i, spec in zip(ids, added, strict=True)
    ]
    # the segment's short ids in one string (each ended by "."), the others [place, ref]
    link = added[63][3]
    others = [[n, r] for n, r in enumerate(refs[:64]) if not isinstance(r, str)]
    assert (len(added[63]), added[63][2]) == (4, None)
    shorts = "".join(f"{r}." for r in refs[:64] if isinstance(r, str))
    assert link == ([first, shorts, others] if others else [first, shorts])
    assert {len(r) for r in refs if isinstance(r, str)} == {8}  # the saver's short ids
    assert unpack(link) == [first, refs[:64]]
    assert {len(spec[1]) for spec in added} == {1}  # each step adds one message
    saver.close()


def test_a_segment_packs_its_uuids_and_keeps_every_other_ref_in_place() -> None:
    ids = [
        "0b5e4a6e-2f0c-4d43-9a43-6d1f0c3b9e11",
        ["9f3e1a2b-7c4d-4e5f-8a6b-1c2d3e4f5a6b", "tool-id"],  # a message id given later
        "1f1e8dc4-9f41-6005-8000-f44b3d6b8a28",  # LangGraph's uuid6 ids pack too
        "0B5E4A6E-2F0C-4D43-9A43-6D1F0C3B9E11",  # not canonical: kept as it is
        "imported-7",
        "c86bda74-deea-4e30-9bb3-2a95265dddfe",
        "Ab3dE6g9",  # a short id the saver gave (8 letters and digits): as it is
    ]
    link = pack("e", ids)
    assert link[0] == "e" and len(link[1]) == 3 * 23 + 9 and link[1].endswith(".Ab3dE6g9.")
    assert link[2] == [[1, ids[1]], [3, ids[3]], [4, ids[4]]]
    assert unpack(link) == ["e", ids]
    assert pack("e", ids[:1]) == ["e", link[1][:23]] and unpack(pack("e", [])) == ["e", []]
    # a link written before short ids: the UUIDs' 22 characters one after the other
    old = [link[0], link[1][:22] + link[1][23:45] + link[1][46:68], link[2]]
    assert unpack(old) == ["e", ids[:6]]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_values_that_are_not_message_lists_come_back_exact(jsonl_store: Any) -> None:
    saver = ThreadlineSaver(jsonl_store)
    ref = InMemorySaver()
    config = {"configurable": {"thread_id": "odd", "checkpoint_ns": ""}}
    values = {
        "tuple": (1, "a"),
        "set": {1, 2},
        "nul": "a\x00b",
        "nan": float("nan"),
        "deep": _nested(45),
        "msgs": [HumanMessage("hi", id="h"), AIMessage("yo", id="a")],
        "mixed": {"m": ToolMessage("r", tool_call_id="c", id="t"), "n": 1},
        "shrunk": [HumanMessage("x", id="x")],
    }
    checkpoint = {
        "v": 1,
        "id": "1ef0",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": {k: 1 for k in values},
        "versions_seen": {},
        "updated_channels": None,
    }
    saved = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {k: 1 for k in values})
    ref_saved = ref.put(config, checkpoint, {"source": "loop", "step": 0}, {k: 1 for k in values})
    child = {
        **checkpoint,
        "id": "1ef1",
        "channel_values": {
            **values,
            "shrunk": [],
            "msgs": [*values["msgs"], AIMessage("more", id="m")],
        },
        "channel_versions": {k: 2 if k in ("shrunk", "msgs") else 1 for k in values},
    }
    saver.put(saved, child, {"source": "loop", "step": 1}, {"shrunk": 2, "msgs": 2})
    ref.put(ref_saved, child, {"source": "loop", "step": 1}, {"shrunk": 2, "msgs": 2})
    saver.close()
    fresh = ThreadlineSaver(jsonl_store)
    got = fresh.get_tuple({"configurable": {"thread_id": "odd"}})
    assert got is not None
    got_values = got.checkpoint["channel_values"]
    expected = ref.get_tuple({"configurable": {"thread_id": "odd"}}).checkpoint["channel_values"]
    nan = got_values.pop("nan")
    assert nan != nan and math.isnan(expected.pop("nan"))
    assert got_values == expected
    assert got_values["set"] == {1, 2} and got_values["nul"] == "a\x00b"
    assert [type(v) for v in got_values["msgs"]] == [HumanMessage, AIMessage, AIMessage]
    fresh.close()


def test_metadata_is_stored_as_changes_to_the_next_step_and_reads_back_exact(
    jsonl_store: Any,
) -> None:
    """A checkpoint's metadata is stored as its change to the parent's with ``step`` one more
    and ``source`` "loop", or "input" when it stores the graph's input (``__start__``):
    LangGraph's next step; anything else is said, and all of it reads back exact, from the
    saver that wrote it and from a fresh one."""
    from langgraph.checkpoint.base import empty_checkpoint

    metas: list[dict[str, Any]] = [
        {"source": "input", "step": -1, "parents": {}},
        {"source": "loop", "step": 0, "parents": {}},  # the next step: nothing stored
        {"source": "loop", "step": 1, "parents": {}},  # the same
        {"source": "input", "step": 2, "parents": {}},  # the source said
        {"source": "update", "step": 2, "parents": {}},  # the step not one more: said
        {"source": "loop", "step": True, "parents": {}},  # a bool is not a step
        {"source": "loop", "step": 2, "parents": {}},
        {"step": 3, "parents": {}},  # no source: removed
        {"step": 4, "parents": {}, "writes": None},  # no source to predict
        {"parents": {}},  # no step
        {"source": "loop", "step": 7, "parents": {}},
        {"source": "input", "step": 8, "parents": {}},  # stores __start__: nothing stored
        {"source": "loop", "step": 9, "parents": {}},  # stores __start__ too: said
    ]
    saver = ThreadlineSaver(jsonl_store)
    config: Any = {"configurable": {"thread_id": "meta", "checkpoint_ns": ""}}
    ids = []
    for n, meta in enumerate(metas, 1):
        checkpoint = empty_checkpoint()
        channel = "c" if n <= 11 else "__start__"
        checkpoint["channel_values"] = (
            {channel: None if n <= 11 else "go"} if n % 2 or n > 11 else {}
        )
        checkpoint["channel_versions"] = {channel: n}
        config = saver.put(config, checkpoint, dict(meta), {channel: n})
        ids.append(checkpoint["id"])
    want = [(cid, meta) for cid, meta in zip(ids, metas, strict=True)][::-1]
    thread = {"configurable": {"thread_id": "meta"}}
    listed = [(t.config["configurable"]["checkpoint_id"], t.metadata) for t in saver.list(thread)]
    assert listed == want
    saver.close()
    with ThreadlineSaver(jsonl_store) as fresh:
        listed = [
            (t.config["configurable"]["checkpoint_id"], t.metadata) for t in fresh.list(thread)
        ]
        assert listed == want
    records = [
        json.loads(line)
        for line in (Path(jsonl_store.url) / "meta.jsonl").read_bytes().splitlines()[1:]
    ]
    data = [r["custom"]["data"] for r in records if r["type"] == "custom"]
    assert [r["custom"]["custom_type"] for r in records if r["type"] == "custom"] == ["lg.s"] * 13
    assert [d.get("d", {}).get("mj") for d in data] == [
        [{"source": "input", "step": -1, "parents": {}}],
        None,
        None,
        [{"source": "input"}],
        [{"source": "update", "step": 2}],
        [{"step": True}],
        [{"step": 2}],
        [{}, ["source"]],
        [{"writes": None}],
        [{}, ["step", "writes"]],
        [{"source": "loop", "step": 7}],
        None,
        [{"source": "loop"}],
    ]
    # a channel's value stored as null ("j" null) or cleared (0: "e") is written short
    assert [d["b"]["c"] for d in data[:11]] == [None, 0] * 5 + [None]


def test_a_trigger_channel_is_written_short_and_one_named_like_it_keeps_the_earlier_kind(
    jsonl_store: Any,
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = ThreadlineSaver(jsonl_store)
    config: Any = {"configurable": {"thread_id": "short", "checkpoint_ns": ""}}
    steps = [
        {"branch:to:agent": None, "x": 1},
        {">agent": 2, "branch:to:agent": "a"},  # a channel named like a short trigger
        {"branch:to:agent": 3, "branch:to:": 4},
    ]
    versions: dict[str, int] = {}
    values: dict[str, Any] = {}
    for n, step in enumerate(steps, 1):
        checkpoint = empty_checkpoint()
        values = {**values, **step}
        versions = {**versions, **dict.fromkeys(step, n)}
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(
            config, checkpoint, {"source": "loop", "step": n}, dict.fromkeys(step, n)
        )
    saver.close()
    records = [
        json.loads(line)
        for line in (Path(jsonl_store.url) / "short.jsonl").read_bytes().splitlines()[1:]
    ]
    stored = [
        (r["custom"]["custom_type"], sorted(r["custom"]["data"]["b"]))
        for r in records
        if r["type"] == "custom"
    ]
    assert stored == [
        ("lg.s", [">agent", "x"]),
        ("lg.cp", [">agent", "branch:to:agent"]),
        ("lg.s", [">", ">agent"]),
    ]
    with ThreadlineSaver(jsonl_store) as fresh:
        got = fresh.get_tuple({"configurable": {"thread_id": "short"}})
        assert got is not None
        assert got.checkpoint["channel_values"] == values
        assert got.checkpoint["channel_versions"] == versions
        assert got.metadata == {"source": "loop", "step": 3}


def test_a_checkpoint_ts_reads_back_exact_whatever_its_offset(jsonl_store: Any) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = ThreadlineSaver(jsonl_store)
    config: Any = {"configurable": {"thread_id": "ts", "checkpoint_ns": ""}}
    stamps = [
        "2026-11-25T16:36:40.699417+00:00",  # LangGraph's: written with "Z"
        "2026-11-25T16:36:41Z",  # a "Z" of its own: kept in the data
        "2026-11-25T18:36:42.5+02:00",
    ]
    ids = []
    for n, ts in enumerate(stamps, 1):
        checkpoint = empty_checkpoint()
        checkpoint["ts"] = ts
        checkpoint["channel_values"] = {"x": n}
        checkpoint["channel_versions"] = {"x": n}
        config = saver.put(config, checkpoint, {"step": n}, {"x": n})
        ids.append(checkpoint["id"])
    saver.close()
    records = [
        json.loads(line)
        for line in (Path(jsonl_store.url) / "ts.jsonl").read_bytes().splitlines()[1:]
    ]
    assert [(r["timestamp"], "ts" in r["custom"]["data"]) for r in records] == [
        ("2026-11-25T16:36:40.699417Z", False),
        ("2026-11-25T16:36:41Z", True),
        ("2026-11-25T18:36:42.5+02:00", False),
    ]
    thread = {"configurable": {"thread_id": "ts"}}
    with ThreadlineSaver(jsonl_store) as fresh:  # from the branch, then the whole index
        latest = fresh.get_tuple(thread)
        assert latest is not None and latest.checkpoint["ts"] == stamps[-1]
        assert [t.checkpoint["ts"] for t in fresh.list(thread)] == stamps[::-1]


def test_time_travel_branches_the_session_tree_and_the_leaf_follows_the_new_branch(
    jsonl_store: Any,
) -> None:
    saver = ThreadlineSaver(jsonl_store)
    graph = build(saver)
    config = {"configurable": {"thread_id": "tt"}}
    run(graph, config, 1, 4)
    abandoned = graph.get_state(config).config["configurable"]["checkpoint_id"]
    fork = _after_turn(graph, config, 4)
    run(graph, fork, 7, 7)
    session = saver.session("tt")
    assert session is not None
    assert [(m.role, m.text.split(" after")[0]) for m in session.context().messages] == [
        ("user", "question 1"),
        ("assistant", "answer 1"),
        ("user", "question 2"),
        ("assistant", "answer 2"),
        ("user", "question 7"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "answer 3"),
    ]
    # the abandoned branch stays in the tree, off the current path
    on_path = set(session.path_ids())
    # (a checkpoint's entry id is its id packed)
    assert pack_uuid(fork["configurable"]["checkpoint_id"]) in on_path
    gone = pack_uuid(abandoned)
    assert gone in session.entry_ids() and gone not in on_path
    saver.close()


def test_a_thread_id_that_is_not_a_session_id_is_hashed_and_named_in_the_header(
    jsonl_store: Any,
) -> None:
    with ThreadlineSaver(jsonl_store) as saver:
        run(build(saver), {"configurable": {"thread_id": "user 42/chat"}}, 1, 1)
        session = saver.session("user 42/chat")
        assert session is not None
        assert session.id.startswith("lg-") and len(session.id) == 43
        assert session.header.metadata == {"langgraph": {"thread_id": "user 42/chat"}}


def test_a_session_that_is_not_a_langgraph_thread_is_refused(jsonl_store: Any) -> None:
    jsonl_store.create(session_id="mine").append_message("user", "hello")
    with (
        ThreadlineSaver(jsonl_store) as saver,
        pytest.raises(
            tl.UserError, match="Session 'mine' exists but is not LangGraph thread 'mine'"
        ),
    ):
        run(build(saver), {"configurable": {"thread_id": "mine"}}, 1, 1)


def test_async_graph_runs_through_the_async_methods(jsonl_store: Any) -> None:
    async def main() -> list[Any]:
        saver = ThreadlineSaver(jsonl_store)
        graph = build(saver)
        config = {"configurable": {"thread_id": "a"}}
        for turn in range(1, 4):
            await graph.ainvoke({"messages": [user(turn)]}, config)
        state = await graph.aget_state(config)
        saver.close()
        return shape(state.values["messages"])

    ref = build(InMemorySaver())
    expected = run(ref, {"configurable": {"thread_id": "a"}}, 1, 3)
    assert asyncio.run(main()) == shape(expected["messages"])


def test_without_the_extra_the_import_error_names_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['langgraph.checkpoint.base'] = None\n"
        "try:\n    import threadline.integrations.langgraph\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == (
        "threadline's LangGraph checkpointer needs langgraph-checkpoint: "
        "pip install 'threadline[langgraph]'\n"
    )


def _snapshot(saver: ThreadlineSaver, thread_id: str) -> list[tuple[Any, ...]]:
    return [
        (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    ]


def test_checkpoints_left_by_delete_for_runs_and_prune_read_back_exact_after_reopening(
    store: tuple[tl.Store, list[str]],
) -> None:
    store_, _ = store
    saver = ThreadlineSaver(store_)
    graph = build(saver)
    for turn in range(1, 10):
        config = {"configurable": {"thread_id": "runs"}, "metadata": {"run_id": f"run-{turn}"}}
        graph.invoke({"messages": [user(turn)]}, config)
    before = _snapshot(saver, "runs")
    gone = ["run-4", "run-5", "run-6"]
    # the middle runs go: the checkpoints after them were stored as changes to theirs
    saver.delete_for_runs(gone)
    kept = [t for t in before if t[2]["run_id"] not in gone]
    assert (len(before), len(kept)) == (33, 22)
    assert _snapshot(saver, "runs") == kept
    saver.close()
    fresh = ThreadlineSaver(store_)
    assert _snapshot(fresh, "runs") == kept
    # and the thread goes on from its latest checkpoint as if nothing had been deleted
    ref = run(build(InMemorySaver()), {"configurable": {"thread_id": "runs"}}, 1, 10)
    got = run(build(fresh), {"configurable": {"thread_id": "runs"}}, 10, 10)
    assert shape(got["messages"]) == shape(ref["messages"])
    latest = _snapshot(fresh, "runs")[0]
    fresh.prune(["runs"])
    assert _snapshot(fresh, "runs") == [latest]
    fresh.close()
    again = ThreadlineSaver(store_)
    assert _snapshot(again, "runs") == [latest]
    again.close()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_saver_keeps_few_threads_open_and_another_process_can_continue_the_others(
    jsonl_store: Any,
) -> None:
    saver = ThreadlineSaver(jsonl_store, max_open_threads=4)
    graph = build(saver)
    base = _fds()
    counts = []
    for i in range(60):
        run(graph, {"configurable": {"thread_id": f"t{i}"}}, 1, 1)
        counts.append(_fds())
    # four threads' descriptors, however many threads
    assert counts[3] > base and set(counts[4:]) == {counts[3]}
    script = [sys.executable, str(HERE / "_langgraph_chat.py"), str(jsonl_store.url)]
    # t0 was let go: another process continues it while this saver is still open
    out = subprocess.run([*script, "t0", "2", "2"], capture_output=True, text=True, check=True)
    assert [m[1] for m in json.loads(out.stdout)] == [
        "question 1",
        "answer 1 after 1 messages. ",
        "question 2",
        "answer 2 after 3 messages. ",
    ]
    # t59 is one of the four still open: its writer lock is this saver's
    held = subprocess.run([*script, "t59", "2", "2"], capture_output=True, text=True)
    assert held.returncode == 1 and "SessionLockedError" in held.stderr
    # this saver picks t0 up again with the other process's turn in it
    final = run(graph, {"configurable": {"thread_id": "t0"}}, 3, 3)
    ref = run(build(InMemorySaver()), {"configurable": {"thread_id": "t0"}}, 1, 3)
    assert shape(final["messages"]) == shape(ref["messages"])
    saver.close()
    assert _fds() == base  # close let the last four go


def test_max_open_threads_must_be_a_positive_int(jsonl_store: Any) -> None:
    with pytest.raises(tl.UserError, match="max_open_threads must be a positive int, not 0"):
        ThreadlineSaver(jsonl_store, max_open_threads=0)


def _with_subgraph(saver: Any) -> Any:
    """A graph whose one node is a subgraph with its own checkpoints (``checkpoint_ns``)."""

    def inner(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"inner {n}", id=f"in-{n}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    outer = StateGraph(MessagesState)
    outer.add_node("sub", sub.compile(checkpointer=True))
    outer.add_edge(START, "sub")
    return outer.compile(checkpointer=saver)


def test_subgraph_checkpoints_read_back_exact_after_reopening(
    store: tuple[tl.Store, list[str]],
) -> None:
    store_, _ = store
    config = {"configurable": {"thread_id": "sub"}}
    saver = ThreadlineSaver(store_)
    graph = _with_subgraph(saver)
    for turn in range(1, 6):
        graph.invoke({"messages": [user(turn)]}, config)
    before = _snapshot(saver, "sub")
    namespaces = {t[0]["configurable"]["checkpoint_ns"].split(":")[0] for t in before}
    assert (len(before), namespaces) == (30, {"", "sub"})
    saver.close()
    fresh = ThreadlineSaver(store_)
    assert _snapshot(fresh, "sub") == before
    final = _with_subgraph(fresh).invoke({"messages": [user(6)]}, config)
    assert [m.content for m in final["messages"]][-2:] == ["question 6", "inner 11"]
    fresh.close()


# -- a fresh saver loads the latest checkpoint from the session's branch ----------------------


def _tuple_fields(t: Any) -> tuple[Any, ...] | None:
    if t is None:
        return None
    return (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)


class FreshReads(ThreadlineSaver):
    """Answers every ``get_tuple`` as a fresh saver would (its threads closed first, so the
    latest checkpoint comes from the branch when the branch can settle it) and checks the
    answer against the one the whole index gives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.from_branch = 0

    def _latest_on_path(self, t: Any) -> Any:
        found = super()._latest_on_path(t)
        self.from_branch += found is not None
        return found

    def get_tuple(self, config: Any) -> Any:
        self.close()
        got = super().get_tuple(config)
        with self._lock:
            t = self._thread(config["configurable"]["thread_id"], create=False)
            assert t is None or t.complete
            want = super().get_tuple(config)  # from the whole index
        assert _tuple_fields(got) == _tuple_fields(want)
        return got


@pytest.mark.parametrize("kind", STORES)
def test_conformance_suite_passes_with_every_read_from_a_fresh_saver(
    kind: str, tmp_path: Path
) -> None:
    savers: list[FreshReads] = []

    @checkpointer_test(name=f"FreshReads[{kind}]")
    async def factory() -> Any:
        st = make_store(kind, tmp_path / str(len(savers)))
        saver = FreshReads(st)
        savers.append(saver)
        yield saver
        saver.close()
        st.close()

    report = asyncio.run(validate(factory))
    failed = {name: r.failures for name, r in report.results.items() if not r.passed}
    assert failed == {}
    assert len(savers) == 8
    # the get_tuple suite's latest-checkpoint reads came from the branch
    assert sum(s.from_branch for s in savers) > 0


def test_a_fresh_saver_loads_the_latest_checkpoint_without_reading_every_checkpoint(
    store: tuple[tl.Store, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadline.integrations import _langgraph_index as index

    store_, _ = store
    config = {"configurable": {"thread_id": "long"}}
    with ThreadlineSaver(store_) as saver:
        run(build(saver), config, 1, 100)
    with ThreadlineSaver(store_) as full:
        every = list(full.list(config))
        want = full.get_tuple(config)
    assert len(every) == 366 > 4 * index.CHAIN  # the latest's fields start from a full record

    applied = []
    ingested = []
    real_apply, real_ingest = index.apply_doc, index.ThreadIndex.ingest
    monkeypatch.setattr(
        index, "apply_doc", lambda old, ch: applied.append(1) or real_apply(old, ch)
    )
    monkeypatch.setattr(
        index.ThreadIndex, "ingest", lambda self, rec: ingested.append(1) or real_ingest(self, rec)
    )
    fresh = ThreadlineSaver(store_)
    got = fresh.get_tuple(config)
    assert _tuple_fields(got) == _tuple_fields(want)
    # nothing indexed; the fields rebuilt from the nearest full record (< CHAIN changes)
    assert ingested == []
    assert 1 <= len(applied) <= index.CHAIN
    # the message list comes from < SEGMENT links and one segment per SEGMENT links before
    # them: the entries read (checkpoints and writes) are a fraction of the checkpoints. (84-92
    # here, on main before short ids too: how many writes lie on the branch between the
    # checkpoints depends on when LangGraph's background saves land, so the machine's load.)
    assert fresh.path_reads < len(every) // 3
    # the thread goes on (the whole index is built for the next put) like InMemorySaver's
    ref = run(build(InMemorySaver()), config, 1, 101)
    more = run(build(fresh), config, 101, 101)
    assert shape(more["messages"]) == shape(ref["messages"])
    assert ingested != []
    fresh.close()


def test_a_latest_checkpoint_put_out_of_order_or_after_its_writes_is_read_exactly(
    store: tuple[tl.Store, list[str]],
) -> None:
    store_, _ = store
    saver = ThreadlineSaver(store_)
    base = {"v": 1, "ts": "2026-01-01T00:00:00+00:00", "versions_seen": {}}

    def put(cid: str, parent: str | None, value: int) -> None:
        conf: dict[str, Any] = {"thread_id": "odd", "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent
        cp = {**base, "id": cid, "channel_values": {"n": value}, "channel_versions": {"n": value}}
        saver.put({"configurable": conf}, cp, {"step": value}, {"n": value})  # type: ignore[arg-type]

    put("b", None, 1)
    put("c", "b", 2)
    put("a", "c", 3)  # put last, but "c" is the latest (greatest id)
    latest = {"configurable": {"thread_id": "odd"}}
    saver.close()
    fresh = FreshReads(store_)
    got = fresh.get_tuple(latest)
    assert (got.checkpoint["id"], got.checkpoint["channel_values"]) == ("c", {"n": 2})
    assert fresh.from_branch == 0  # the branch ends at "a", which says it was not the newest
    # writes for "d" arrive before "d" is put: they wait on a side branch
    saver = ThreadlineSaver(store_)
    saver.put_writes(
        {"configurable": {"thread_id": "odd", "checkpoint_ns": "", "checkpoint_id": "d"}},
        [("n", 9)],
        "task-1",
    )
    put("d", "c", 4)
    saver.close()
    got = fresh.get_tuple(latest)
    assert got.checkpoint["id"] == "d"
    assert got.pending_writes == [("task-1", "n", 9)]
    assert fresh.from_branch == 0
    # a later checkpoint with nothing unusual is read from the branch again
    saver = ThreadlineSaver(store_)
    put("e", "d", 5)
    saver.close()
    got = fresh.get_tuple(latest)
    assert (got.checkpoint["id"], got.parent_config["configurable"]["checkpoint_id"]) == ("e", "d")
    assert fresh.from_branch == 1
    fresh.close()


def _writes_shape(saver: Any, config: dict[str, Any]) -> list[list[Any]]:
    """Every checkpoint's pending writes, newest first, without the ids LangGraph makes."""
    out = []
    for tup in saver.list(config):
        out.append(
            [[ch, shape(v) if isinstance(v, list) else v] for _task, ch, v in tup.pending_writes]
        )
    return out


def test_writes_of_new_messages_ride_in_the_message_entries_and_read_back_exact(
    jsonl_store: Any,
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = ThreadlineSaver(jsonl_store)
    hi = HumanMessage("hi", id="h1")
    answer = AIMessage("hello", id="a1")
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [hi]}
    checkpoint["channel_versions"] = {"messages": 1}
    config = saver.put(
        {"configurable": {"thread_id": "direct", "checkpoint_ns": ""}},
        checkpoint,
        {"step": 0},
        {"messages": 1},
    )
    cid = checkpoint["id"]
    saver.put_writes(config, [("messages", [answer]), ("branch:to:tools", None)], "t1", "p1")
    saver.put_writes(config, [("messages", [hi])], "t2", "p2")  # no new message: an entry
    more = [AIMessage("one", id="a2"), AIMessage("two", id="a3")]
    saver.put_writes(config, [("messages", more)], "t3", "~__pregel_pull, agent")
    records = [
        json.loads(line)
        for line in (Path(jsonl_store.url) / "direct.jsonl").read_bytes().splitlines()[1:]
    ]
    kinds = [r["custom"]["custom_type"] if r["type"] == "custom" else r["type"] for r in records]
    assert kinds == [
        "message",
        "lg.s",
        "message",
        "lg.w",
        "message",
        "message",
    ]
    hi_entry, cp_entry, carrier, writes, one, two = records
    # the checkpoint's entry id is its id packed (a UUID's 16 bytes, 22 characters)
    assert cp_entry["id"] == pack_uuid(cid) and len(cp_entry["id"]) == 22
    assert carrier["parent_id"] == cp_entry["id"]
    assert cp_entry["parent_id"] == hi_entry["id"]
    # no "cp": its tree parent is the checkpoint's entry
    assert carrier["message"]["provider_details"]["langgraph"] == {
        "task": "t1",
        "w": [[0, "messages", ["l", [""]]], [1, "branch:to:tools", None]],  # "": itself, null
        "path": "p1",
    }
    # the last of two messages carries them, with "cp": its parent is the first one
    assert "langgraph" not in one["message"]["provider_details"]
    assert two["message"]["provider_details"]["langgraph"] == {
        "task": "t3",
        "w": [[0, "messages", ["l", [one["id"], ""]]]],
        "pp": "agent",  # LangGraph's path of a node: "~__pregel_pull, agent"
        "cp": cid,
    }
    assert writes["parent_id"] == carrier["id"]
    assert writes["custom"]["data"] == {
        "task": "t2",
        "w": [[0, "messages", ["l", [3]]]],  # the message 3 entries above: hi
        "path": "p2",
    }
    want = [
        ("t1", "messages", [answer]),
        ("t1", "branch:to:tools", None),
        ("t2", "messages", [hi]),
        ("t3", "messages", more),
    ]
    tup = saver.get_tuple(config)
    assert tup is not None and tup.pending_writes == want
    saver.close()
    # a fresh saver: from the branch alone, and from the whole index
    for read in (
        lambda s: s.get_tuple({"configurable": {"thread_id": "direct"}}),
        lambda s: next(iter(s.list(config))),
    ):
        with ThreadlineSaver(jsonl_store) as fresh:
            got = read(fresh)
            assert got is not None and got.pending_writes == want
    with ThreadlineSaver(jsonl_store) as fresh:
        assert fresh.get_tuple({"configurable": {"thread_id": "direct"}}) is not None
        assert fresh.path_reads == 4  # the checkpoint, the writes entry and two carriers
    # the session reads as the conversation: the carrier is an ordinary message
    with ThreadlineSaver(jsonl_store) as fresh:
        session = fresh.session("direct")
        assert session is not None
        path = [r.message.text for r in session.path() if isinstance(r, MessageEntry)]
        assert path == ["hi", "hello", "one", "two"]


def test_a_graph_whose_writes_ride_in_messages_keeps_pending_writes_exact(
    jsonl_store: Any,
) -> None:
    config = {"configurable": {"thread_id": "carried"}}
    tasks: set[tuple[str, str]] = set()  # (checkpoint id, task id) as LangGraph gave them

    class Recording(ThreadlineSaver):
        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            tasks.add((config["configurable"]["checkpoint_id"], task_id))
            super().put_writes(config, writes, task_id, task_path)

    saver = Recording(jsonl_store)
    run(build(saver), config, 1, 6)
    mine = _snapshot(saver, "carried")
    saver.close()
    records = (Path(jsonl_store.url) / "carried.jsonl").read_bytes().splitlines()
    # every task of this graph is a node run on its usual trigger: its id is derived, not stored
    carried = [
        json.loads(line)["message"]["provider_details"]["langgraph"]
        for line in records
        if line.startswith(b'{"type":"message"') and b'"langgraph":{' in line
    ]
    assert not any(b'"task"' in line for line in records)
    # the input task's writes (the input's messages, then the trigger of the first node) are
    # said by the node they trigger; they read back from the checkpoint's input
    writes = [
        r["custom"]["data"]
        for r in map(json.loads, records)
        if r["type"] == "custom" and r["custom"]["custom_type"] == "lg.w"
    ]
    inputs = [{k: v for k, v in d.items() if k != "cp"} for d in writes if "in" in d]
    assert inputs == [{"in": ["agent"]}] * 6  # one per turn
    # and the input itself, stored by its checkpoint: each key's messages by their places
    starts = [
        r["custom"]["data"]["b"]["__start__"]
        for r in map(json.loads, records)
        if r["type"] == "custom" and r["custom"]["data"].get("b", {}).get("__start__")
    ]
    assert starts == [{"messages": [1]}] * 6
    assert not any(d.get("pp") == "__start__" for d in writes)
    # an answer's writes are the node's usual rows (the message itself, on "messages"): its
    # name says them; a tool call's also route to the tools. (Which writes ride in messages
    # and which in writes entries depends on when LangGraph's background saves land.)
    usual = [[0, "messages", ["l", [""]]]]
    assert {"pp": "agent"} in carried and all(c.get("w") != usual for c in carried)
    fresh = ThreadlineSaver(jsonl_store)
    assert _snapshot(fresh, "carried") == mine
    got = {
        (tup.config["configurable"]["checkpoint_id"], task)
        for tup in fresh.list(config)
        for task, _ch, _v in tup.pending_writes
    }
    assert got == tasks and len(tasks) == 26 - 6 - 2 - 2  # one task per put_writes
    ref = InMemorySaver()
    run(build(ref), config, 1, 6)
    assert _writes_shape(fresh, config) == _writes_shape(ref, config)
    # input 6x2 rows, agent 6x1 + 2 more rows for its 2 tool calls + 2 answers after a
    # tool, tools 2x2
    assert sum(len(w) for w in _writes_shape(fresh, config)) == 26
    fresh.close()


@pytest.mark.parametrize("name", ["r2", "r3", "r4"])
def test_a_thread_written_by_an_earlier_round_reads_back_exact_and_goes_on(
    name: str, tmp_path: Path
) -> None:
    """tests/data/langgraph_<name>: a thread (4 turns, then a turn from an earlier checkpoint)
    written by the saver of round 2 (before message entries carried writes), round 3
    (before checkpoints were stored as changes to a predicted step) or round 4 (before the
    saver's own entries had short ids), and what it listed then."""
    import shutil

    src = HERE / "data" / f"langgraph_{name}"
    shutil.copytree(src / "store", tmp_path / "store")
    expected = json.loads((src / "expected.json").read_text())
    config = {"configurable": {"thread_id": name}}
    store = tl.open_store(str(tmp_path / "store"))
    with ThreadlineSaver(store) as saver:
        got = []
        for tup in saver.list(config):
            values = tup.checkpoint["channel_values"]
            got.append(
                {
                    "id": tup.config["configurable"]["checkpoint_id"],
                    "parent": tup.parent_config["configurable"]["checkpoint_id"]
                    if tup.parent_config
                    else None,
                    "messages": [m.model_dump(mode="json") for m in values.get("messages", [])],
                    "channels": sorted(values),
                    "versions": tup.checkpoint["channel_versions"],
                    "metadata": tup.metadata,
                    "writes": [
                        [t, ch, [m.model_dump(mode="json") for m in v] if type(v) is list else v]
                        for t, ch, v in tup.pending_writes
                    ],
                }
            )
        assert got == expected
        assert (len(got), sum(len(e["writes"]) for e in got)) == (19, 23)
        # the thread goes on from its latest checkpoint in the new format
        latest = saver.get_tuple(config)
        assert latest is not None
        before = latest.checkpoint["channel_values"]["messages"]
        state = run(build(saver), config, 100, 100)
        assert shape(state["messages"][: len(before)]) == shape(before)
        assert len(state["messages"]) == len(before) + 2
    store.close()
