"""A stateful model of the session tree (DESIGN §4-§5), checked after every step.

Hypothesis drives random appends, branches, labels, compactions, branch summaries, reopens,
forks and a second writer against a real session and against :class:`Reference`, a deliberately
simple pure-Python reading of the design: a dict of entries, a leaf, a dict of labels, and the
context rules of §5 written out as plainly as possible. After every step the session's leaf,
path, context (ids, roles, texts, model, thinking level), flat tree and labels must equal the
reference's.
Runs on every backend of conftest.BACKENDS.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import threadline as tl
from conftest import BACKENDS, make_store

# -- the reference ---------------------------------------------------------------------------


@dataclass
class Ref:
    id: str
    parent: str | None
    kind: str
    ts: str
    seq: int
    data: dict[str, Any]


@dataclass
class Reference:
    entries: dict[str, Ref] = field(default_factory=dict)
    leaf: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def add(self, eid: str, kind: str, ts: str, **data: Any) -> None:
        self.entries[eid] = Ref(eid, self.leaf, kind, ts, len(self.entries), data)
        self.leaf = eid
        if kind == "label":
            if data["label"]:
                self.labels[data["target"]] = data["label"]
            else:
                self.labels.pop(data["target"], None)

    def path(self, leaf: str | None) -> list[str]:
        out = []
        while leaf is not None:
            out.append(leaf)
            leaf = self.entries[leaf].parent
        return out[::-1]

    def children(self, parent: str | None) -> list[str]:
        kids = [e for e in self.entries.values() if e.parent == parent]
        return [e.id for e in sorted(kids, key=lambda e: (e.ts, e.seq))]

    def flat_tree(self) -> list[tuple[str, str | None, list[str], int, str | None]]:
        out = []
        stack = [(r, 0) for r in reversed(self.children(None))]
        while stack:
            eid, depth = stack.pop()
            kids = self.children(eid)
            out.append((eid, self.entries[eid].parent, kids, depth, self.labels.get(eid)))
            stack.extend((k, depth + 1) for k in reversed(kids))
        return out

    def context(self, leaf: str | None) -> tuple[list[tuple[str, str, str]], Any, str]:
        """([(view id, role, text)], (provider, model_id) | None, thinking level)."""
        path = self.path(leaf)
        model, thinking = None, "off"
        compaction = None
        for eid in path:
            e = self.entries[eid]
            if e.kind == "model_change":
                model = (e.data["provider"], e.data["model_id"])
            elif e.kind == "thinking_level":
                thinking = e.data["level"]
            elif e.kind == "compaction":
                compaction = eid
        shown: list[tuple[str, str, str]] = []
        walk = path
        if compaction is not None:
            c = self.entries[compaction]
            shown.append((compaction, "compactionSummary", c.data["summary"]))
            first = c.data["first_kept"]
            if first in path and first != compaction:
                walk = path[path.index(first) :]
            else:
                walk = path[path.index(compaction) + 1 :]
        for eid in walk:
            e = self.entries[eid]
            if e.kind == "message":
                shown.append((eid, e.data["role"], e.data["text"]))
            elif e.kind == "branch_summary" and e.data["summary"]:
                shown.append((eid, "branchSummary", e.data["summary"]))
        return shown, model, thinking


# -- the machine ---------------------------------------------------------------------------------

TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
) | st.sampled_from(["a\u2028b", "\u2029", '{"json": 1}', "\\n"])
NAME = st.sampled_from(["a", "b", "c"])


class SessionMachine(RuleBasedStateMachine):
    store: tl.Store  # set per backend by the test below

    def __init__(self) -> None:
        super().__init__()
        self.s = self.store.create()
        self.ref = Reference()

    def teardown(self) -> None:
        self.s.close()

    def _ts(self, eid: str) -> str:
        return self.s.entry(eid).timestamp

    def _add(self, eid: str, kind: str, **data: Any) -> None:
        self.ref.add(eid, kind, self._ts(eid), **data)

    def _pick(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(list(self.ref.entries)))

    def _pick_or_none(self, data: st.DataObject) -> str | None:
        if not self.ref.entries:
            return None
        return data.draw(st.none() | st.sampled_from(list(self.ref.entries)))

    @rule(role=st.sampled_from(["user", "assistant", "system", "tool"]), body=TEXT)
    def append_message(self, role: str, body: str) -> None:
        self._add(self.s.append_message(role, body), "message", role=role, text=body)

    @rule(provider=NAME, model_id=NAME)
    def append_model_change(self, provider: str, model_id: str) -> None:
        self._add(
            self.s.append_model_change(provider, model_id),
            "model_change",
            provider=provider,
            model_id=model_id,
        )

    @rule(level=st.sampled_from(["low", "medium", "high", "off"]))
    def append_thinking_level(self, level: str) -> None:
        self._add(self.s.append_thinking_level(level), "thinking_level", level=level)

    @rule(name=TEXT)
    def append_custom(self, name: str) -> None:
        self._add(self.s.append_custom("note", {"n": name}), "custom")

    @precondition(lambda self: self.ref.entries)
    @rule(data=st.data(), label=st.none() | st.just("") | TEXT)
    def set_label(self, data: st.DataObject, label: str | None) -> None:
        target = self._pick(data)
        self._add(self.s.set_label(target, label), "label", target=target, label=label)

    @precondition(lambda self: self.ref.entries)
    @rule(data=st.data())
    def branch(self, data: st.DataObject) -> None:
        target = self._pick(data)
        self.s.branch(target)
        self.ref.leaf = target

    @rule()
    def reset_leaf(self) -> None:
        self.s.reset_leaf()
        self.ref.leaf = None

    @rule(data=st.data(), summary=TEXT)
    def append_compaction(self, data: st.DataObject, summary: str) -> None:
        first = self._pick_or_none(data)
        self._add(
            self.s.append_compaction(summary, first, 10),
            "compaction",
            summary=summary,
            first_kept=first,
        )

    @rule(data=st.data(), summary=st.just("") | TEXT)
    def branch_with_summary(self, data: st.DataObject, summary: str) -> None:
        target = self._pick_or_none(data)
        eid = self.s.branch_with_summary(target, summary)
        self.ref.leaf = target
        self._add(eid, "branch_summary", summary=summary)

    @rule()
    def reopen(self) -> None:
        self.s.close()
        self.s = self.store.open(self.s.id)
        assert self.s.load_report.clean

    @rule(body=TEXT, data=st.data())
    def another_writer_then_this_one(self, body: str, data: st.DataObject) -> None:
        """Another Session object writes while this one is closed; this one's next append must
        first read those records (its parent is never stale)."""
        self.s.close()
        other = self.store.open(self.s.id)
        theirs = other.append_message("user", body)
        self.ref.add(theirs, "message", other.entry(theirs).timestamp, role="user", text=body)
        if data.draw(st.booleans()):
            target = data.draw(st.sampled_from(list(self.ref.entries)))
            other.branch(target)
            self.ref.leaf = target
        other.close()
        self._add(self.s.append_message("assistant", body), "message", role="assistant", text=body)

    @rule()
    def fork(self) -> None:
        self.s.close()
        self.s = self.store.fork(self.s.id)

    @precondition(lambda self: self.ref.entries)
    @rule(data=st.data())
    def context_at_another_leaf(self, data: st.DataObject) -> None:
        target = self._pick(data)
        self._check_context(target, self.s.context(leaf_id=target))
        assert self.s.leaf_id == self.ref.leaf

    def _check_context(self, leaf: str | None, ctx: tl.Context) -> None:
        shown, model, thinking = self.ref.context(leaf)
        assert [v.id for v in ctx.view] == [x[0] for x in shown]
        assert [(m.role, m.text) for m in ctx.messages] == [(x[1], x[2]) for x in shown]
        assert (None if ctx.model is None else (ctx.model.provider, ctx.model.model_id)) == model
        assert ctx.thinking_level == thinking

    @invariant()
    def matches_the_reference(self) -> None:
        s, ref = self.s, self.ref
        assert s.leaf_id == ref.leaf
        assert s.path_ids() == ref.path(ref.leaf)
        self._check_context(ref.leaf, s.context())
        assert [
            (n.entry.id, n.parent_id, n.children, n.depth, n.label) for n in s.tree(flat=True)
        ] == ref.flat_tree()
        assert s.labels() == ref.labels
        assert [e.id for e in s.entries()] == list(ref.entries)


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_session_behaves_like_the_reference_model(kind: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tl-stateful-"))
    store = make_store(kind, tmp)
    try:
        machine = type(f"SessionMachine_{kind}", (SessionMachine,), {"store": store})
        # the servers' fsyncs make each step slow; memory and JSONL get the larger budget
        examples = 60 if kind in ("memory", "jsonl") else 20
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)
