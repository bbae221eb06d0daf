"""The storage side of the LangGraph checkpointer (:mod:`threadline.integrations.langgraph`):
how values are encoded in entries, and the in-memory index of one thread's checkpoints."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

from threadline.formats import langchain as lc
from threadline.model.entries import CustomEntry, MessageEntry, new_id, now
from threadline.session import Session
from threadline.store.base import SESSION_ID_RE

CHECKPOINT = "langgraph.checkpoint"
WRITES = "langgraph.writes"
BLOBS = "langgraph.blobs"  # channel values re-homed by prune / delete_for_runs
MSG_KEY = "$m"  # a message entry reference inside a stored value
MAX_DEPTH = 40  # threadline refuses records nested deeper than 64


# -- value encoding ------------------------------------------------------------------------------
# A stored value ("spec") is a short list: ["j", json] a JSON value; ["x", tree] JSON whose
# {"$m": entry_id} leaves are LangChain messages kept as message entries; ["m", base, [ids]] a
# message list = the value stored in entry ``base`` (same channel) + these message entries;
# ["s", type, base64] LangGraph's serializer; ["e"] no value (a channel cleared at this version).


def plain(value: Any) -> bool:
    """Whether ``value`` is JSON that threadline stores and reads back identical."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if v is None or t is bool:
            continue
        if t is str:
            if "\x00" in v or not (v.isascii() or _utf8(v)):
                return False
        elif t is int:
            if not -(2**63) <= v < 2**64:
                return False
        elif t is float:
            if not math.isfinite(v):
                return False
        elif t is list:
            if depth >= MAX_DEPTH:
                return False
            stack.extend((x, depth + 1) for x in v)
        elif t is dict:
            if depth >= MAX_DEPTH:
                return False
            for k, x in v.items():
                if type(k) is not str or k == MSG_KEY or not plain(k):
                    return False
                stack.append((x, depth + 1))
        else:
            return False
    return True


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


@dataclass
class Batch:
    """Records of one durable append, chained from ``parent``."""

    parent: str | None
    # messages written for this thread's latest steps: id(obj) -> (obj, entry id, its id then)
    known: dict[int, tuple[Any, str, Any]]
    # the entries a reused message may be in (None: any): a checkpoint's messages must be on
    # its path, so that the session's branch reads as the conversation
    allowed: set[str] | None = None
    records: list[Any] = field(default_factory=list)
    written: dict[int, tuple[Any, str, Any]] = field(default_factory=dict)

    def add(self, rec: Any) -> str:
        self.records.append(rec)
        self.parent = rec.id
        return str(rec.id)

    def message(self, msg: Any) -> Any:
        """A reference to the entry holding LangChain message ``msg`` (written now if new):
        the entry id, or ``[entry id, message id]`` when ``add_messages`` gave the message its
        id after it was stored. None when it would not come back identical from an entry."""
        hit = self.written.get(id(msg)) or self.known.get(id(msg))
        if (
            hit is not None
            and hit[0] is msg
            and (self.allowed is None or hit[1] in self.allowed or id(msg) in self.written)
        ):
            if msg.id == hit[2]:
                return hit[1]
            if hit[2] is None and isinstance(msg.id, str):
                return [hit[1], msg.id]
        converted = lc.to_message(msg)
        if not lc.round_trips(msg, converted):
            return None
        eid = self.add(
            MessageEntry(id=new_id(), parent_id=self.parent, timestamp=now(), message=converted)
        )
        self.written[id(msg)] = (msg, eid, msg.id)
        return eid


# -- per-thread index ----------------------------------------------------------------------------


@dataclass
class CheckpointInfo:
    entry: str  # the checkpoint's custom entry
    ns: str
    id: str
    parent: str | None  # parent checkpoint id
    tail: str | None  # last entry of its linear suffix: where writes and children attach
    # (task_id, idx) -> (task_id, channel, spec, task_path, entry id)
    writes: dict[tuple[str, int], tuple[str, str, Any, str, str]] = field(default_factory=dict)
    blobs: dict[str, str] = field(default_factory=dict)  # channel -> entry re-homing its value


class ThreadIndex:
    """One LangGraph thread: its session and an in-memory index of its checkpoints."""

    def __init__(self, thread_id: str, session: Session) -> None:
        self.thread_id = thread_id
        self.session = session
        self.cps: dict[str, dict[str, CheckpointInfo]] = {}  # ns -> checkpoint id -> info
        # writes that came before their checkpoint (LangGraph saves checkpoints in the
        # background while the next tasks' writes arrive): (ns, checkpoint id) -> holder
        self.orphans: dict[tuple[str, str], CheckpointInfo] = {}
        self.checkpoint_entries: set[str] = set()
        # (ns, channel, version) -> [(checkpoint id, entry id holding the value)]
        self.blobs: dict[tuple[str, str, Any], list[tuple[str, str]]] = {}
        self.data: dict[str, dict[str, Any]] = {}  # entry id -> its custom data
        self.values: dict[tuple[str, str], tuple[Any, ...]] = {}  # decoded message lists
        # the last messages written: id(obj) -> (obj, entry id, message id when written)
        self.recent: dict[int, tuple[Any, str, Any]] = {}
        self.main_leaf: str | None = session.leaf_id
        for meta in session.metadata(content_types=False):
            if meta.type == "custom":
                rec = session.entry(meta.id)
                if isinstance(rec, CustomEntry):
                    self.ingest(rec)

    def ingest(self, rec: CustomEntry) -> None:
        kind = rec.custom.custom_type
        data = rec.custom.data
        if kind not in (CHECKPOINT, WRITES, BLOBS) or not isinstance(data, dict):
            return
        self.data[rec.id] = data
        ns = data.get("ns", "")
        if kind == CHECKPOINT:
            self.checkpoint_entries.add(rec.id)
            cid = data.get("id", rec.id)
            cp = CheckpointInfo(entry=rec.id, ns=ns, id=cid, parent=data.get("p"), tail=rec.id)
            cps = self.cps.setdefault(ns, {})
            old = cps.get(cid) or self.orphans.pop((ns, cid), None)
            if old is not None:  # the writes made before (or for an earlier put of) it stay
                cp.writes = old.writes
            cps[cid] = cp
            versions = {**data["cv"], **data.get("bv", {})}
            for ch in data.get("b", {}):
                key = (ns, ch, versions.get(ch))
                self.blobs.setdefault(key, []).append((cid, rec.id))
            return
        cp = self.target(ns, data["cp"])
        cp.tail = rec.id
        if kind == BLOBS:
            for ch in data["b"]:
                cp.blobs[ch] = rec.id
            return
        for idx, channel, spec in data["w"]:
            wkey = (data["task"], idx)
            if idx >= 0 and wkey in cp.writes:
                continue
            cp.writes[wkey] = (data["task"], channel, spec, data.get("path", ""), rec.id)

    def target(self, ns: str, cid: str) -> CheckpointInfo:
        """The checkpoint that writes for ``cid`` belong to (a holder until it is put)."""
        cp = self.cps.get(ns, {}).get(cid)
        if cp is None:
            cp = self.orphans.get((ns, cid))
            if cp is None:
                cp = self.orphans[(ns, cid)] = CheckpointInfo(
                    entry="", ns=ns, id=cid, parent=None, tail=None
                )
        return cp

    def remember(self, written: dict[int, tuple[Any, str, Any]]) -> None:
        self.recent.update(written)
        while len(self.recent) > 256:
            self.recent.pop(next(iter(self.recent)))

    def follow(self, start: str | None, lineage: Set[str] = frozenset()) -> str | None:
        """Where a root-namespace record that belongs after ``start`` goes: after the main
        leaf when only writes and messages lie between them (LangGraph saves a checkpoint in
        the background, so the next steps' writes can arrive before it), else after ``start``
        (time travel: a new branch). Checkpoints in ``lineage`` (the new one's ancestors) may
        lie between too."""
        leaf = self.main_leaf
        if start is None or leaf is None or leaf == start:
            return start if start is not None else leaf
        cur: str | None = leaf
        for _ in range(64):
            if cur == start:
                return leaf
            if cur is None or (cur in self.checkpoint_entries and cur not in lineage):
                return start
            cur = self.session.entry(cur).parent_id
        return start

    def lineage(self, cp: CheckpointInfo | None, limit: int = 8) -> set[str]:
        """The entries of ``cp`` and its nearest ancestor checkpoints."""
        out: set[str] = set()
        cps = self.cps.get(cp.ns, {}) if cp else {}
        while cp is not None and len(out) < limit and cp.entry not in out:
            out.add(cp.entry)
            cp = cps.get(cp.parent) if cp.parent else None
        return out

    def ancestors(self, start: str | None, limit: int = 64) -> set[str]:
        """``start`` and its nearest ancestors in the tree (a step's messages are reused by
        the next few steps, never by ones far away)."""
        out: set[str] = set()
        cur = start
        session = self.session
        while cur is not None and cur not in out and len(out) < limit:
            out.add(cur)
            cur = session.entry(cur).parent_id
        return out

    def latest(self, ns: str) -> CheckpointInfo | None:
        cps = self.cps.get(ns)
        return cps[max(cps)] if cps else None

    def holder(self, cp: CheckpointInfo, channel: str, version: Any) -> str | None:
        """The entry holding ``channel`` at ``version`` as seen from checkpoint ``cp``: the
        nearest ancestor that stored it (versions repeat across branches), else the latest."""
        rehomed = cp.blobs.get(channel)
        if rehomed is not None:
            return rehomed
        found = self.blobs.get((cp.ns, channel, version))
        if not found:
            return None
        if len(found) == 1:
            return found[0][1]
        owners = dict(found)
        cps = self.cps.get(cp.ns, {})
        seen: set[str] = set()
        cur: CheckpointInfo | None = cp
        while cur is not None and cur.id not in seen:
            if cur.id in owners:
                return owners[cur.id]
            seen.add(cur.id)
            cur = cps.get(cur.parent) if cur.parent else None
        return found[-1][1]


def thread_session_id(thread_id: str) -> str:
    if SESSION_ID_RE.match(thread_id) and not thread_id.startswith("lg-"):
        return thread_id
    return "lg-" + hashlib.sha256(thread_id.encode()).hexdigest()[:40]


def delta_chain(t: ThreadIndex, holder: str, channel: str) -> list[str]:
    """The entries a stored message-list delta depends on, newest first."""
    out = []
    cur: str | None = holder
    while cur is not None and cur not in out:
        out.append(cur)
        spec = t.data[cur]["b"][channel]
        cur = spec[1] if spec[0] == "m" else None
    return out


def delta_refs(t: ThreadIndex, holder: str, channel: str) -> list[Any]:
    """The message references a stored value adds, in order."""
    spec = t.data[holder]["b"][channel]
    if spec[0] == "m":
        return list(spec[2])
    return ordered_refs(spec[1]) if spec[0] == "x" else []


def ordered_refs(tree: Any) -> list[Any]:
    out: list[Any] = []
    stack = [tree]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if MSG_KEY in v:
                out.append(v[MSG_KEY])
            else:
                stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return out


def collect_refs(spec: list[Any], out: set[str]) -> None:
    """Collect the message entries a stored value refers to."""
    refs = spec[2] if spec[0] == "m" else ordered_refs(spec[1]) if spec[0] == "x" else []
    out.update(r if isinstance(r, str) else r[0] for r in refs)


def message_ids(t: ThreadIndex, cp: CheckpointInfo) -> set[str]:
    """Message entries written with a checkpoint's values or writes."""
    out: set[str] = set()
    for spec in t.data[cp.entry]["b"].values():
        collect_refs(spec, out)
    for w in cp.writes.values():
        collect_refs(w[2], out)
    return out
