"""The LangGraph checkpointer rebuilt by a fresh saver (threadline.integrations.langgraph): every
checkpoint, list and pending write a new saver (a new process) reads from the stored entries
equals what the writing saver returned and what a plain reference saver keeps, on JSONL,
SQLite and PostgreSQL; the failures found that way, kept as regression tests; and two savers
writing one thread."""

from __future__ import annotations

import contextlib
import copy
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    empty_checkpoint,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

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


def _step(saver: Any, config: Any, n: int, values: dict[str, Any], changed: dict[str, int]) -> Any:
    """Put checkpoint ``n`` (values ``values``, versions changed as ``changed`` says) after the
    one ``config`` names, with metadata ``run_id`` ``run-<n>``."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1f000000-0000-6000-8000-{n:012d}"
    checkpoint["ts"] = f"2026-11-27T08:00:{n:02d}+00:00"
    checkpoint["channel_values"] = dict(values)
    parent = saver.get_tuple(config) if "checkpoint_id" in config["configurable"] else None
    versions = dict(parent.checkpoint["channel_versions"]) if parent else {}
    checkpoint["channel_versions"] = {**versions, **changed}
    meta = {"source": "loop", "step": n, "parents": {}, "run_id": f"run-{n}"}
    return saver.put(config, checkpoint, meta, changed)


def test_a_value_prune_re_homed_is_found_by_the_kept_checkpoints_children(store: tl.Store) -> None:
    """``prune`` re-writes the values the kept checkpoint holds in the entries it purges. A
    child put afterwards that keeps such a value (at the kept checkpoint's version) looked
    only for the purged entry and read back without it, from the writer and a fresh saver."""
    root: Any = {"configurable": {"thread_id": "pruned", "checkpoint_ns": ""}}
    saver = ThreadlineSaver(store)
    ref = InMemorySaver()
    for s in (saver, ref):
        one = _step(s, root, 1, {"route": "go", "n": 1}, {"route": 1, "n": 1})
        two = _step(s, one, 2, {"route": "go", "n": 2}, {"n": 2})
    saver.prune(["pruned"])  # two is kept; "route" lived in one's entry
    for s in (saver, ref):
        three = _step(s, two, 3, {"route": "go", "n": 3}, {"n": 3})
    want = _fields(ref.get_tuple(three))
    assert want is not None and want[1]["channel_values"] == {"route": "go", "n": 3}
    assert _fields(saver.get_tuple(three)) == want
    saver.close()
    with ThreadlineSaver(store) as fresh:
        assert _fields(fresh.get_tuple(three)) == want
        assert _fields(fresh.get_tuple({"configurable": {"thread_id": "pruned"}})) == want


def test_a_kept_checkpoints_added_messages_are_read_from_where_prune_re_homed_them(
    store: tl.Store,
) -> None:
    """The kept checkpoint stored its messages as the ones added to its parent's; ``prune``
    purges the parent and re-writes the kept list whole. A child that keeps the list found the
    kept checkpoint's own entry first and read it as a change to a value that is gone
    (``UserError``), from the writer and a fresh saver."""
    root: Any = {"configurable": {"thread_id": "kept", "checkpoint_ns": ""}}
    hi, answer = HumanMessage("hi", id="h"), AIMessage("answer", id="a")
    saver, ref = ThreadlineSaver(store), InMemorySaver()
    for s in (saver, ref):
        one = _step(s, root, 1, {"messages": [hi]}, {"messages": 1})
        two = _step(s, one, 2, {"messages": [hi, answer]}, {"messages": 2})
    saver.prune(["kept"])
    for s in (saver, ref):
        three = _step(s, two, 3, {"messages": [hi, answer], "n": 3}, {"n": 3})
    want = _fields(ref.get_tuple(three))
    assert want is not None and want[1]["channel_values"]["messages"] == [hi, answer]
    assert _fields(saver.get_tuple(three)) == want
    saver.close()
    with ThreadlineSaver(store) as fresh:
        assert _fields(fresh.get_tuple(three)) == want


def test_a_message_whose_entry_prune_purged_is_written_again_when_put_again(
    store: tl.Store,
) -> None:
    """A message a task wrote to a checkpoint that ``prune`` then purged (with its writes) and
    that a later checkpoint holds again (the same object) was referred to by the purged entry
    the saver remembered: the later checkpoint could not be read (``not a message (was it
    purged?)``). It is written again."""
    root: Any = {"configurable": {"thread_id": "again", "checkpoint_ns": ""}}
    hi, late = HumanMessage("hi", id="h"), AIMessage("late", id="l")
    saver, ref = ThreadlineSaver(store), InMemorySaver()
    for s in (saver, ref):
        one = _step(s, root, 1, {"messages": [hi]}, {"messages": 1})
        s.put_writes(one, [("messages", [late])], "task-1", "~__pregel_pull, agent")
        two = _step(s, one, 2, {"messages": [hi], "n": 2}, {"n": 2})
    saver.prune(["again"])  # one goes, with its writes and the entry of ``late``
    for s in (saver, ref):
        three = _step(s, two, 3, {"messages": [hi, late], "n": 2}, {"messages": 3})
    want = _fields(ref.get_tuple(three))
    assert want is not None and want[1]["channel_values"]["messages"] == [hi, late]
    assert _fields(saver.get_tuple(three)) == want
    saver.close()
    with ThreadlineSaver(store) as fresh:
        assert _fields(fresh.get_tuple(three)) == want


def test_a_checkpoint_whose_parents_go_one_after_the_other_keeps_its_fields(
    store: tl.Store,
) -> None:
    """A checkpoint is stored as a change to its parent's fields. When ``delete_for_runs``
    purges the parent, the survivor gets its whole fields re-written; when that survivor goes
    too, its child's fields depended on the re-written copy, which the walk stopped at without
    seeing it was purged: a fresh saver rebuilt the child from nothing (version 1, no
    metadata, channels missing)."""
    root: Any = {"configurable": {"thread_id": "runs", "checkpoint_ns": ""}}
    saver = ThreadlineSaver(store)
    ref = InMemorySaver()
    for s in (saver, ref):
        config = root
        for n in range(1, 5):
            config = _step(
                s, config, n, {"n": n, "keep": "k"}, {"n": n, **({"keep": 1} if n == 1 else {})}
            )
    saver.delete_for_runs(["run-2"])
    saver.delete_for_runs(["run-3"])
    thread = {"configurable": {"thread_id": "runs"}}
    want = [_fields(t) for t in ref.list(thread) if t.metadata["run_id"] in ("run-1", "run-4")]
    assert [w[1]["channel_values"] for w in want] == [{"n": 4, "keep": "k"}, {"n": 1, "keep": "k"}]
    assert [_fields(t) for t in saver.list(thread)] == want
    saver.close()
    with ThreadlineSaver(store) as fresh:
        assert [_fields(t) for t in fresh.list(thread)] == want


def test_a_saver_that_only_read_a_thread_writes_it_against_every_checkpoint(
    store: tl.Store,
) -> None:
    """Saver B indexes a thread by reading it (no writer lock), saver A then puts a
    checkpoint and lets the thread go, and B writes: B becomes the writer, sees A's
    checkpoint and indexes the thread again. Before, B's index stayed as it was when B read
    the thread: B's reads missed A's checkpoint after B's own write, and B's ``prune`` kept
    a checkpoint that was no longer the latest."""
    root: Any = {"configurable": {"thread_id": "two", "checkpoint_ns": ""}}
    thread = {"configurable": {"thread_id": "two"}}
    a, b, ref = ThreadlineSaver(store), ThreadlineSaver(store), Ref()
    messages = [HumanMessage(f"m{n}", id=f"m{n}") for n in range(4)]

    def put(saver: Any, config: Any, n: int) -> Any:
        checkpoint = empty_checkpoint()
        checkpoint.update(id=f"1f000000-0000-6000-8000-{n:012d}", ts=f"2026-11-27T08:00:0{n}Z")
        checkpoint["channel_values"] = {"messages": messages[:n]}
        checkpoint["channel_versions"] = {"messages": n}
        meta = {"source": "loop", "step": n, "parents": {}}
        got = saver.put(config, checkpoint, meta, {"messages": n})
        ref.put(config, checkpoint, meta, {"messages": n})
        return got

    one = put(a, root, 1)
    a.close()
    assert len(list(b.list(thread))) == 1  # B's index: checkpoint 1
    two = put(a, one, 2)
    with pytest.raises(tl.SessionLockedError):  # A holds the thread
        b.put_writes(two, [("x", 1)], "task")
    a.close()
    three = put(b, two, 3)  # a child of the checkpoint B has not seen
    ids = [c["configurable"]["checkpoint_id"] for c in (three, two, one)]
    assert [_fields(t) for t in b.list(thread)] == [ref.tuple("two", "", c) for c in ids]
    with pytest.raises(tl.SessionLockedError):  # B holds the thread now
        put(a, three, 4)
    b.close()
    four = put(a, three, 4)
    a.close()
    b.prune(["two"])  # B read the thread before A's checkpoint 4: 4 is the one kept
    latest = four["configurable"]["checkpoint_id"]
    assert [_fields(t) for t in b.list(thread)] == [ref.tuple("two", "", latest)]
    b.close()
    with ThreadlineSaver(store) as fresh:
        assert [_fields(t) for t in fresh.list(thread)] == [ref.tuple("two", "", latest)]


def test_a_thread_another_saver_creates_meanwhile_is_opened(
    store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two savers putting the first checkpoint of one thread at once: the second one's
    ``create`` found the session there and failed with ``UserError`` ("already exists"); it
    opens it instead (and then meets the first one's writer lock, or writes)."""
    root: Any = {"configurable": {"thread_id": "new", "checkpoint_ns": ""}}
    a, b = ThreadlineSaver(store), ThreadlineSaver(store)
    _put(a, root, "1f000000-0000-6000-8000-000000000001", [HumanMessage("a", id="a")], 1, 0)
    a.close()
    real = store.exists
    calls: list[str] = []

    def late(session_id: str) -> bool:  # B looked before A created it
        calls.append(session_id)
        return False if len(calls) == 1 else real(session_id)

    monkeypatch.setattr(b.store, "exists", late)
    got = _put(b, root, "1f000000-0000-6000-8000-000000000002", [HumanMessage("b", id="b")], 1, 0)
    b.close()
    with ThreadlineSaver(store) as fresh:
        listed = [t.config for t in fresh.list({"configurable": {"thread_id": "new"}})]
    assert listed[0] == got and len(listed) == 2


# -- random operations, read back by the writer, a fresh saver and a reference ------------------


SERDE = JsonPlusSerializer()


def _kept(value: Any) -> Any:
    """``value`` as LangGraph's serializer gives it back (a tuple comes back a list): what
    ``InMemorySaver`` returns, and a copy later changes to the objects do not reach."""
    return SERDE.loads_typed(SERDE.dumps_typed(value))


class Ref:
    """What a checkpointer must return: every ``put`` and ``put_writes`` kept as given (as
    LangGraph's serializer gives them back: ``_kept``), and ``copy_thread``, ``prune``
    and ``delete_for_runs`` as docs/integrations.md decides them (LangGraph's ``InMemorySaver``
    has none of the three, and it keeps one value per channel version, where branches that
    reuse a version must not mix)."""

    def __init__(self) -> None:
        # thread -> ns -> checkpoint id -> (checkpoint, metadata, parent id)
        self.cps: dict[str, dict[str, dict[str, tuple[Any, Any, Any]]]] = {}
        self.writes: dict[tuple[str, str, str], dict[tuple[str, int], tuple[Any, ...]]] = {}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> None:
        conf = config["configurable"]
        thread, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        meta = get_checkpoint_metadata(config, metadata)
        saved = (_kept(checkpoint), _kept(meta), conf.get("checkpoint_id"))
        self.cps.setdefault(thread, {}).setdefault(ns, {})[checkpoint["id"]] = saved

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str) -> None:
        conf = config["configurable"]
        key = (conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])
        stored = self.writes.setdefault(key, {})
        for idx, (channel, value) in enumerate(writes):
            wkey = (task_id, WRITES_IDX_MAP.get(channel, idx))
            if wkey[1] >= 0 and wkey in stored:
                continue
            stored[wkey] = (task_id, channel, _kept(value), task_path)

    def tuple(self, thread: str, ns: str, cid: str) -> tuple[Any, ...]:
        checkpoint, meta, parent = self.cps[thread][ns][cid]
        stored = self.writes.get((thread, ns, cid), {})
        order = sorted(stored, key=lambda k: writes_sort_key(stored[k][3], *k))
        conf = {"thread_id": thread, "checkpoint_ns": ns}
        return (
            {"configurable": {**conf, "checkpoint_id": cid}},
            checkpoint,
            meta,
            {"configurable": {**conf, "checkpoint_id": parent}} if parent else None,
            [stored[k][:3] for k in order],
        )

    def delete_thread(self, thread: str) -> None:
        self.cps.pop(thread, None)
        for key in [k for k in self.writes if k[0] == thread]:
            del self.writes[key]

    def copy_thread(self, source: str, target: str) -> None:
        self.delete_thread(target)
        self.cps[target] = copy.deepcopy(self.cps.get(source, {}))
        for (thread, ns, cid), stored in list(self.writes.items()):
            if thread == source:
                self.writes[(target, ns, cid)] = copy.deepcopy(stored)

    def drop(self, doomed: Any) -> None:
        for thread, namespaces in self.cps.items():
            for ns, cps in namespaces.items():
                for cid in [cid for cid, saved in cps.items() if doomed(thread, ns, cid, saved)]:
                    del cps[cid]
                    self.writes.pop((thread, ns, cid), None)

    def prune(self, threads: list[str]) -> None:
        latest = {
            (t, ns): max(cps) for t in threads for ns, cps in self.cps.get(t, {}).items() if cps
        }
        self.drop(lambda t, ns, cid, _s: t in threads and latest.get((t, ns)) != cid)

    def delete_for_runs(self, runs: list[str]) -> None:
        self.drop(lambda _t, _ns, _cid, saved: saved[1].get("run_id") in runs)


@dataclass
class Head:
    """A checkpoint the generator can continue from: its id, values and fields."""

    config: Any
    id: str
    values: dict[str, Any]
    versions: dict[str, Any]
    seen: dict[str, dict[str, Any]]
    step: int


CHANNELS = ["messages", "x", "branch:to:agent", "branch:to:tools", "__start__", ">odd"]
RUNS = ["run-a", "run-b", "run-c"]
PATHS = ["", "~__pregel_pull, agent", "~__pregel_pull, tools", index.INPUT_PATH, "custom"]


class Ops:
    """Random LangGraph operations (hypothesis draws each choice) applied to a saver and to
    the reference alike."""

    def __init__(self, draw: Any, *savers: ThreadlineSaver) -> None:
        self.draw = draw  # draw(kind, argument): "pick" one of a list, "int" in (lo, hi)
        self.savers = savers  # two: each op by either; a write the other's lock refuses
        self.saver = savers[0]
        self.refused = 0
        # LangGraph's own saver fed the same puts and writes (only those, and versions never
        # repeated across branches: see ``Ref``), when set
        self.memory: InMemorySaver | None = None
        self.ref = Ref()
        self.heads: dict[tuple[str, str], list[Head]] = {}  # every checkpoint put, in order
        self.waiting: dict[str, list[Any]] = {}  # messages written as writes, not yet in a value
        self.n = 0
        self.threads = ["t1", "t2"]

    def pick(self, options: Any) -> Any:
        return self.draw("pick", list(options))

    def integer(self, lo: int, hi: int) -> int:
        return int(self.draw("int", (lo, hi)))

    def new_id(self) -> str:
        self.n += 1
        kind = self.pick(["uuid"] * 8 + ["early", "plain"])
        if kind == "early":  # smaller than every id before it: put out of order
            return f"0e{self.n:06x}-0000-6000-8000-000000000000"
        if kind == "plain":  # not a UUID
            return f"cp-{self.n:05d}"
        return f"1f{self.n:06x}-0000-6000-8000-000000000000"

    def message(self, *, tool: bool = False) -> Any:
        self.n += 1
        n = self.n
        kind = self.pick(["human", "ai", "call", "tool", "noid"]) if not tool else "tool"
        if kind == "human":
            return HumanMessage(f"question {n}", id=f"h-{n}")
        if kind == "ai":
            return AIMessage(f"answer {n}", id=f"a-{n}")
        if kind == "call":
            call = {"name": "lookup", "args": {"q": n}, "id": f"call-{n}"}
            return AIMessage("", id=f"c-{n}", tool_calls=[call])
        if kind == "tool":  # LangGraph's reducer gives it an id once it is in the value
            return ToolMessage(f"result {n}", tool_call_id=f"call-{n}")
        return HumanMessage(f"no id {n}")

    def value(self, channel: str, old: Any, thread: str) -> Any:
        """A new value of ``channel`` (``_CLEAR``: none)."""
        if channel.startswith("branch:to:") or channel == ">odd":
            return self.pick([None, _CLEAR, "go"])
        if channel == "__start__":
            return self.pick([_CLEAR, {"messages": [self.message()]}, {"k": 1}])
        if channel == "messages":
            old = old if isinstance(old, list) else []
            kind = self.pick(["grow"] * 5 + ["many", "shrink", "edit", "clear", "tuple"])
            if kind in ("grow", "many"):
                added = self.waiting.pop(thread, [])
                for m in added:  # what add_messages does to a message without an id
                    if m.id is None:
                        m.id = f"given-{self.n}-{len(added)}"
                count = 64 + self.integer(0, 6) if kind == "many" else None
                more = self.integer(0, 2) if count is None else count
                return old + added + [self.message() for _ in range(more)]
            if kind == "shrink":
                return old[1:]
            if kind == "edit" and old:
                last = old[-1]
                return [*old[:-1], last.model_copy(update={"content": f"edited {self.n}"})]
            if kind == "tuple":
                return (1, "a")
            return _CLEAR
        return self.pick([1, "s", None, (1, 2), {3, 4}, {"m": self.message(), "n": 1}, _CLEAR])

    # the operations

    def put(self) -> None:
        thread = self.pick(self.threads)
        ns = self.pick(["", "", "", "sub:1"])
        heads = self.heads.get((thread, ns), [])
        where = self.pick(["latest"] * 4 + ["earlier", "none"]) if heads else "none"
        parent = None
        if where == "latest":
            parent = max(heads, key=lambda h: h.id)
        elif where == "earlier":  # time travel: a new branch from an earlier checkpoint
            parent = self.pick(heads)
        values = dict(parent.values) if parent else {}
        versions = dict(parent.versions) if parent else {}
        seen = copy.deepcopy(parent.seen) if parent else {}
        changed = list(dict.fromkeys(self.pick(CHANNELS) for _ in range(self.integer(1, 3))))
        # LangGraph's next version (repeats across branches) or one never used before
        top = max((v for v in versions.values()), default=0)
        repeat = self.pick([False, True])
        version = top + 1 if repeat and self.memory is None else 1000 + self.n
        for ch in changed:
            new = self.value(ch, values.get(ch), thread)
            if new is _CLEAR:
                if ch in versions and ch.startswith("branch:to:"):
                    node = ch[len("branch:to:") :]
                    seen.setdefault(node, {})[ch] = versions[ch]
                values.pop(ch, None)
            else:
                values[ch] = new
            versions[ch] = version
        cid = self.new_id()
        step = parent.step + 1 if parent and self.pick([False, True]) else self.integer(-1, 5)
        meta: dict[str, Any] = {"source": self.pick(["loop", "input", "update"]), "step": step}
        meta["parents"] = {}
        if self.pick([False, True]):
            meta["run_id"] = self.pick(RUNS)
        checkpoint = {
            "v": 4,
            "id": cid,
            "ts": f"2026-11-27T09:{self.n // 60 % 60:02d}:{self.n % 60:02d}+00:00",
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": seen,
            "updated_channels": sorted(ch for ch in changed if ch in values),
        }
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
        if parent is not None:
            conf["checkpoint_id"] = parent.id
        new_versions = dict.fromkeys(changed, version)
        got = self.saver.put({"configurable": conf}, checkpoint, meta, new_versions)
        self.ref.put({"configurable": conf}, checkpoint, meta, new_versions)
        if self.memory is not None:
            self.memory.put({"configurable": conf}, checkpoint, meta, new_versions)
        values = {k: copy.deepcopy(v) if k != "messages" else v for k, v in values.items()}
        self.heads.setdefault((thread, ns), []).append(Head(got, cid, values, versions, seen, step))

    def put_writes(self) -> None:
        known = [h for hs in self.heads.values() for h in hs]
        if not known:
            return
        head = self.pick(known)
        config = head.config
        if self.integer(0, 9) == 0:  # writes before their checkpoint is put
            conf = dict(config["configurable"])
            conf["checkpoint_id"] = f"1f{self.n + 1:06x}-0000-6000-8000-000000000000"
            config = {"configurable": conf}
        thread = config["configurable"]["thread_id"]
        path = self.pick(PATHS)
        rows: list[tuple[str, Any]] = []
        start = head.values.get("__start__")
        if path == index.INPUT_PATH and isinstance(start, dict) and self.pick([False, True]):
            rows = [*start.items(), ("branch:to:agent", None)]  # the input task's usual rows
        else:
            for _ in range(self.integer(1, 3)):
                kind = self.pick(["new", "new", "old", "trigger", "x", "error", "interrupt"])
                if kind == "new":
                    msgs = [self.message(tool=self.pick([False, True]))]
                    self.waiting.setdefault(thread, []).extend(msgs)
                    rows.append(("messages", msgs))
                elif kind == "old" and head.values.get("messages"):
                    rows.append(("messages", [self.pick(head.values["messages"])]))
                elif kind == "trigger":
                    rows.append(("branch:to:agent", None))
                elif kind == "error":
                    rows.append(("__error__", f"boom {self.n}"))
                elif kind == "interrupt":
                    rows.append(("__interrupt__", [{"value": self.n}]))
                else:
                    rows.append(("x", self.n))
        task = self.pick(["task-1", "task-2", "derived"])
        if task == "derived":
            doc = {"mj": {"step": head.step}}
            task = index.derived_task(config["configurable"]["checkpoint_id"], doc, path) or "t"
        self.saver.put_writes(config, rows, task, path)
        self.ref.put_writes(config, rows, task, path)
        if self.memory is not None:
            self.memory.put_writes(config, rows, task, path)

    def copy_thread(self) -> None:
        source = self.pick(self.threads)
        target = f"copy-{len(self.threads)}"
        self.saver.copy_thread(source, target)
        self.ref.copy_thread(source, target)
        self.threads.append(target)
        for (thread, ns), heads in list(self.heads.items()):
            if thread == source:
                self.heads[(target, ns)] = [
                    Head(
                        {"configurable": {**h.config["configurable"], "thread_id": target}},
                        h.id,
                        h.values,
                        h.versions,
                        h.seen,
                        h.step,
                    )
                    for h in heads
                ]

    def prune(self) -> None:
        thread = self.pick(self.threads)
        self.saver.prune([thread])
        self.ref.prune([thread])
        self.forget()

    def delete_for_runs(self) -> None:
        runs = [self.pick(RUNS)]
        self.saver.delete_for_runs(runs)
        self.ref.delete_for_runs(runs)
        self.forget()

    def delete_thread(self) -> None:
        thread = self.pick(self.threads)
        self.saver.delete_thread(thread)
        self.ref.delete_thread(thread)
        self.forget()

    def forget(self) -> None:
        for (thread, ns), heads in self.heads.items():
            kept = self.ref.cps.get(thread, {}).get(ns, {})
            heads[:] = [h for h in heads if h.id in kept]

    def reopen(self) -> None:
        self.saver.close()  # every thread let go: the next use reads it from the store

    def run(self, steps: int) -> None:
        ops = [self.put] * 6 + [self.put_writes] * 4 + [self.reopen]
        if self.memory is not None:
            pass
        elif len(self.savers) == 1:
            ops += [self.copy_thread, self.prune, self.delete_for_runs, self.delete_thread]
        else:  # (operations on one thread: a refused one has changed nothing)
            ops += [self.prune]
        for _ in range(steps):
            op = self.pick(ops)
            if len(self.savers) > 1:
                self.saver = self.pick(self.savers)
                if self.pick([False, True]):  # the other saver lets its threads go
                    for other in self.savers:
                        if other is not self.saver:
                            other.close()
            try:
                op()
            except tl.SessionLockedError:  # the other saver is the thread's writer
                self.refused += 1


_CLEAR = object()


def _reads(saver: ThreadlineSaver, ref: Ref, threads: list[str], draw: Any, who: str) -> None:
    """Every read of ``saver`` equals the reference's: each checkpoint, the latest of each
    namespace, each namespace's list (whole, limited, before a checkpoint, filtered)."""
    for thread in threads:
        spaces = {ns: cps for ns, cps in ref.cps.get(thread, {}).items() if cps}
        listed = {
            (
                t.config["configurable"]["checkpoint_ns"],
                t.config["configurable"]["checkpoint_id"],
            ): _fields(t)
            for t in saver.list({"configurable": {"thread_id": thread}})
        }
        assert sorted(listed) == sorted((ns, cid) for ns, cps in spaces.items() for cid in cps), (
            who,
            thread,
        )
        for (ns, cid), got in listed.items():
            assert got == ref.tuple(thread, ns, cid), (who, "list", thread, ns, cid)
        for ns, cps in spaces.items():
            conf = {"thread_id": thread, "checkpoint_ns": ns}
            ids = sorted(cps, reverse=True)
            latest = saver.get_tuple({"configurable": conf})
            assert _fields(latest) == ref.tuple(thread, ns, ids[0]), (who, "latest", thread, ns)
            for cid in ids:
                got = saver.get_tuple({"configurable": {**conf, "checkpoint_id": cid}})
                assert _fields(got) == ref.tuple(thread, ns, cid), (who, "get", thread, ns, cid)
            limit = draw("int", (1, 3))
            before = draw("pick", ids)
            run = draw("pick", RUNS)
            for kwargs, want_ids in (
                ({"limit": limit}, ids[:limit]),
                (
                    {"before": {"configurable": {**conf, "checkpoint_id": before}}},
                    [i for i in ids if i < before],
                ),
                ({"filter": {"run_id": run}}, [i for i in ids if cps[i][1].get("run_id") == run]),
            ):
                got_ids = [
                    t.config["configurable"]["checkpoint_id"]
                    for t in saver.list({"configurable": conf}, **kwargs)
                ]
                assert got_ids == want_ids, (who, kwargs)
        if not spaces:
            assert saver.get_tuple({"configurable": {"thread_id": thread}}) is None, (who, thread)
    run = draw("pick", RUNS)  # every thread of the store, by metadata
    found = sorted(
        (
            t.config["configurable"]["thread_id"],
            t.config["configurable"]["checkpoint_ns"],
            t.config["configurable"]["checkpoint_id"],
        )
        for t in saver.list(None, filter={"run_id": run})
    )
    want_all = sorted(
        (thread, ns, cid)
        for thread, spaces in ref.cps.items()
        for ns, cps in spaces.items()
        for cid, saved in cps.items()
        if saved[1].get("run_id") == run
    )
    assert found == want_all, (who, "list(None)", run)


def check_rebuild(
    store: tl.Store, draw: Any, steps: int, savers: int = 1, memory: bool = False
) -> int:
    """Random operations on one saver over ``store`` (or two, taking turns as the threads'
    writer), then every read compared (see below); returns how many writes were refused.
    ``memory``: puts and writes only, fed to LangGraph's ``InMemorySaver`` too, whose every
    checkpoint must equal the reference's (so the reference is LangGraph's own answer)."""
    writers = [ThreadlineSaver(store) for _ in range(savers)]
    for writer in writers:  # writes before their checkpoint: no one puts it while they wait
        writer.writes_wait = 0.0
    ops = Ops(draw, *writers)
    if memory:
        ops.memory = InMemorySaver()
    ops.run(steps)
    if ops.memory is not None:
        for thread, spaces in ops.ref.cps.items():
            for ns, cps in spaces.items():
                for cid in cps:
                    conf = {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}
                    got = _fields(ops.memory.get_tuple({"configurable": conf}))
                    assert got == ops.ref.tuple(thread, ns, cid), ("InMemorySaver", conf)
    saver = ops.saver
    if savers > 1:  # each read what the store held when it opened a thread: read it again
        for other in writers:
            other.close()
    _reads(saver, ops.ref, ops.threads, draw, "writer")
    saver.close()
    with ThreadlineSaver(store) as fresh:
        _reads(fresh, ops.ref, ops.threads, draw, "fresh")
    for thread in ops.threads:
        spaces = ops.ref.cps.get(thread, {})
        if spaces.get(""):
            with ThreadlineSaver(store) as fresh:  # the latest from the branch
                got = fresh.get_tuple({"configurable": {"thread_id": thread}})
                want = ops.ref.tuple(thread, "", max(spaces[""]))
                assert _fields(got) == want, ("branch", thread)
    return ops.refused


@contextlib.contextmanager
def _fresh_store(kind: str) -> Iterator[tl.Store]:
    """A new store for one example (its folder removed afterwards; a PostgreSQL schema is
    dropped with the others at the end of the session)."""
    folder = tempfile.mkdtemp(prefix="lg-rebuild-")
    store = make_store(kind, Path(folder))
    try:
        yield store
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


def _hypothesis_draw(data: Any) -> Any:
    def draw(kind: str, arg: Any) -> Any:
        if kind == "pick":
            return data.draw(st.sampled_from(arg))
        return data.draw(st.integers(*arg))

    return draw


# examples per store (a few seconds each); bench/README.md has the longer runs
EXAMPLES = {"jsonl": 30, "sqlite": 20, "postgres": 12}


@pytest.mark.parametrize("memory", [False, True], ids=["every-op", "vs-InMemorySaver"])
@pytest.mark.parametrize("kind", STORES)
def test_random_operations_read_back_the_same_from_the_writer_and_a_fresh_saver(
    kind: str, memory: bool
) -> None:
    """Random sequences of puts (LangGraph-shaped steps, time travel, subgraph namespaces,
    ids out of order, message lists that grow by 0-2 or 64-70 messages, shrink or are edited,
    tool results given their id after they were written), pending writes (new and old
    messages, triggers, errors and interrupts, the input task's rows, derived task ids, writes
    before their checkpoint), ``copy_thread``, ``prune``, ``delete_for_runs``,
    ``delete_thread`` and the saver letting every thread go: every read of the writing saver,
    of a fresh saver (the whole index) and of one fresh saver per thread's latest checkpoint
    (the session's branch) equals the reference's. ``vs-InMemorySaver``: puts and writes only,
    versions never repeated across branches, and LangGraph's ``InMemorySaver`` fed the same
    must equal the reference too."""

    @settings(max_examples=EXAMPLES[kind], deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data: Any) -> None:
        with _fresh_store(kind) as store:
            check_rebuild(store, _hypothesis_draw(data), data.draw(st.integers(4, 20)), 1, memory)

    check()


@pytest.mark.parametrize("kind", STORES)
def test_two_savers_taking_turns_on_the_same_threads_leave_every_checkpoint_exact(
    kind: str,
) -> None:
    """Two savers over one store, each operation by either, the other letting its threads go
    or not: a write to a thread the other saver holds is refused with
    ``SessionLockedError`` and changes nothing; one it let go goes on from every checkpoint
    the store holds (the other saver's included, re-read when this saver had only read the
    thread, or another saver pruned it). Every read afterwards equals the reference fed the
    writes that were not refused."""
    refused = []

    @settings(
        max_examples=EXAMPLES[kind] // 2, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(data=st.data())
    def check(data: Any) -> None:
        with _fresh_store(kind) as store:
            refused.append(
                check_rebuild(store, _hypothesis_draw(data), data.draw(st.integers(4, 20)), 2)
            )

    check()
    assert sum(refused) > 0  # the lock was met, not only taken in turns


@pytest.mark.xfail(strict=True, reason="the writer's reads hand out the objects it caches")
def test_a_message_a_caller_changes_after_reading_it_does_not_change_the_next_read(
    jsonl_store: tl.Store,
) -> None:
    """Not met (found by the rebuild tests, not fixed): the writing saver caches a message list
    it read or put as the message objects themselves and hands them out, so a caller that
    changes a message it got from ``get_tuple`` changes what the saver's next reads return
    (and what its next step compares with); a fresh saver reads what was stored, and
    ``InMemorySaver`` gives new objects on every read."""
    root: Any = {"configurable": {"thread_id": "read", "checkpoint_ns": ""}}
    saver = ThreadlineSaver(jsonl_store)
    messages = [HumanMessage(f"m{n}", id=f"m{n}") for n in range(3)]
    config = root
    for n in range(1, 4):
        config = _put(saver, config, f"1f000000-0000-6000-8000-00000000000{n}", messages[:n], n, n)
    second = {
        "configurable": {
            **config["configurable"],
            "checkpoint_id": "1f000000-0000-6000-8000-000000000002",
        }
    }
    got = saver.get_tuple(second)
    assert got is not None
    got.checkpoint["channel_values"]["messages"][0].content = "changed by the caller"
    again = saver.get_tuple(second)
    assert again is not None
    assert [m.content for m in again.checkpoint["channel_values"]["messages"]] == ["m0", "m1"]


def test_savers_in_threads_writing_one_thread_are_refused_or_exact(store: tl.Store) -> None:
    """Two savers, each used by two Python threads at once, put checkpoints on one LangGraph
    thread, each worker going on from its own last one; a saver lets the thread go now and
    then. A put is refused with ``SessionLockedError`` while the other saver holds the thread,
    else stored: every checkpoint stored reads back exact from a fresh saver, and nothing
    refused is in the store."""
    import threading

    savers = [ThreadlineSaver(store), ThreadlineSaver(store)]
    ref = Ref()
    guard = threading.Lock()
    refused: list[str] = []
    errors: list[BaseException] = []

    def work(w: int) -> None:
        saver = savers[w % 2]
        config: Any = {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}
        messages: list[Any] = []
        for n in range(12):
            cid = f"1f{n:04d}{w:02d}-0000-6000-8000-000000000000"
            messages = [*messages, HumanMessage(f"{w}-{n}", id=f"{w}-{n}")]
            checkpoint = empty_checkpoint()
            checkpoint.update(id=cid, ts=f"2026-11-27T08:{n:02d}:{w:02d}+00:00")
            checkpoint["channel_values"] = {"messages": list(messages), "w": w}
            checkpoint["channel_versions"] = {"messages": n + 1, "w": n + 1}
            meta = {"source": "loop", "step": n, "parents": {}}
            try:
                got = saver.put(config, checkpoint, meta, {"messages": n + 1, "w": n + 1})
            except tl.SessionLockedError:
                with guard:
                    refused.append(cid)
                continue
            except BaseException as exc:  # anything else fails the test
                errors.append(exc)
                return
            with guard:
                ref.put(config, checkpoint, meta, {"messages": n + 1, "w": n + 1})
            config = got
            if n % 3 == w % 3:
                saver.close()  # let the thread go: the other saver may take it

    workers = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for saver in savers:
        saver.close()
    assert errors == []
    stored = ref.cps["shared"][""]
    # (PostgreSQL's lock waits a moment for the holder before it refuses: there the savers
    # often just take turns)
    assert len(stored) + len(refused) == 48 and stored
    with ThreadlineSaver(store) as fresh:
        listed = {
            t.config["configurable"]["checkpoint_id"]: _fields(t)
            for t in fresh.list({"configurable": {"thread_id": "shared"}})
        }
        assert sorted(listed) == sorted(stored)
        for cid in stored:
            assert listed[cid] == ref.tuple("shared", "", cid)
    with ThreadlineSaver(store) as fresh:  # the latest, from the branch or the whole index
        latest = fresh.get_tuple({"configurable": {"thread_id": "shared"}})
        assert _fields(latest) == ref.tuple("shared", "", max(stored))


@pytest.mark.xfail(strict=True, reason="a message edited in place is not stored again")
def test_a_message_edited_in_place_between_checkpoints_is_read_back_edited(
    jsonl_store: tl.Store,
) -> None:
    """Not met (found by the rebuild tests, not fixed): a message list is stored as the
    messages added when the previous value's messages are the same objects, so a message a
    node edits in place (not through ``add_messages``, which replaces it) keeps its old
    content in the next checkpoint, from the writer and from a fresh saver alike, where
    ``InMemorySaver`` stores each checkpoint as it is when put."""
    root: Any = {"configurable": {"thread_id": "edited", "checkpoint_ns": ""}}
    saver = ThreadlineSaver(jsonl_store)
    ref = InMemorySaver()
    one = HumanMessage("one", id="1")
    first = [
        _put(s, root, "1f000000-0000-6000-8000-000000000001", [one], 1, 0) for s in (saver, ref)
    ]
    one.content = "one, edited in place"
    two = HumanMessage("two", id="2")
    second = _put(saver, first[0], "1f000000-0000-6000-8000-000000000002", [one, two], 2, 1)
    _put(ref, first[1], "1f000000-0000-6000-8000-000000000002", [one, two], 2, 1)
    want = _fields(ref.get_tuple(second))
    saver.close()
    with ThreadlineSaver(jsonl_store) as fresh:
        assert _fields(fresh.get_tuple(second)) == want


def test_concurrent_async_conversations_through_one_saver_read_back_exact(store: tl.Store) -> None:
    """Six conversations of a real compiled graph at once (``ainvoke`` under
    ``asyncio.gather``: LangGraph's background saves of all of them interleave) through one
    saver that keeps three threads open (so threads are let go and opened again meanwhile):
    a fresh saver lists every checkpoint of every thread as the writer did, and each ends as
    the same conversation run alone with ``InMemorySaver``."""
    import asyncio

    from _langgraph_chat import build, run, shape, user

    saver = ThreadlineSaver(store, max_open_threads=3)
    graph = build(saver)
    threads = [f"c{i}" for i in range(6)]

    async def conversation(thread: str) -> None:
        for turn in range(1, 9):
            await graph.ainvoke({"messages": [user(turn)]}, {"configurable": {"thread_id": thread}})

    async def main() -> None:
        await asyncio.gather(*(conversation(thread) for thread in threads))

    asyncio.run(main())

    def listed(s: ThreadlineSaver, thread: str) -> list[Any]:
        return [_fields(t) for t in s.list({"configurable": {"thread_id": thread}})]

    mine = {thread: listed(saver, thread) for thread in threads}
    saver.close()
    alone = run(build(InMemorySaver()), {"configurable": {"thread_id": "alone"}}, 1, 8)
    with ThreadlineSaver(store) as fresh:
        for thread in threads:
            assert listed(fresh, thread) == mine[thread]
            latest = fresh.get_tuple({"configurable": {"thread_id": thread}})
            assert latest is not None
            messages = latest.checkpoint["channel_values"]["messages"]
            assert shape(messages) == shape(alone["messages"])
    assert sum(len(v) for v in mine.values()) == 6 * 28  # 3 checkpoints a turn, 5 with a tool
