"""The storage side of the LangGraph checkpointer (:mod:`threadline.integrations.langgraph`):
how values are encoded in entries, and the in-memory index of one thread's checkpoints."""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import os
import string
import uuid
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from typing import Any

import msgspec

from threadline.errors import UserError
from threadline.formats import langchain as lc
from threadline.model.entries import Custom, CustomEntry, MessageEntry, now
from threadline.session import Session
from threadline.store.base import SESSION_ID_RE, bulk_load

CHECKPOINT = "lg.cp"
STEP = "lg.c"  # a checkpoint stored as changes to its parent's next step (``predict``)
PACKED = "lg.s"  # a ``STEP`` entry whose id is its checkpoint id packed (``pack_uuid``)
STEPPED = (STEP, PACKED)
WRITES = "lg.w"
# the names the saver wrote before (read as ever)
KINDS = {
    "langgraph.checkpoint": CHECKPOINT,
    "langgraph.writes": WRITES,
    STEP: CHECKPOINT,
    PACKED: CHECKPOINT,
}
PULL_PATH = "~__pregel_pull, "  # LangGraph's task path of a node it runs (PULL, name)
TRIGGER = "branch:to:"  # LangGraph's channel that triggers a node: TRIGGER + its name
BLOBS = "langgraph.blobs"  # channel values re-homed by prune / delete_for_runs
MSG_KEY = "$m"  # a message entry reference inside a stored value
WRITES_KEY = "langgraph"  # a message entry's provider_details key holding the writes it carries
MAX_DEPTH = 40  # threadline refuses records nested deeper than 64
NEAR = 8  # a checkpoint refers to a message among the entries this near above it by its place


# -- value encoding ------------------------------------------------------------------------------
# A stored value ("spec") is a short list: ["j", json] a JSON value; ["x", tree] JSON whose
# {"$m": entry_id} leaves are LangChain messages kept as message entries; ["l", [ids]] a list of
# such messages (the usual pending write); ["m", [ids]] a message list = the parent checkpoint's
# value of the same channel + these message entries (["m", [ids], base]: the value stored in
# entry ``base`` + these; base null: the parent's). Every ``SEGMENT``th link of such a chain
# also says where the chain was ``SEGMENT`` links back: ["m", [ids], base, [entry, [every id
# added since]]], so a read follows one link in ``SEGMENT``; ["s", type, base64] LangGraph's
# serializer; ["e"] no value (a channel cleared at this version); ["u"] (``updated_channels``
# only) the checkpoint's stored channels that have a value, sorted. Where a checkpoint's "b" or a
# writes row holds a spec, new entries write ["e"] as 0 and ["j", null] as null (``compact``;
# since short ids also ["m", [place]], one message added by its place, as the place, and an
# ["x", tree] whose keys each hold a list of messages as {key: [refs]}),
# and a segment's ids that are UUIDs (as 22 characters: ``pack_uuid``) or the saver's short ids
# (``short_id``) as one string, each ended by ".", the others as [place in the list, ref] rows:
# [entry, string, rows] (``pack``; before short ids, the string held UUIDs only, without ".").
#
# Entry ids: a root-namespace checkpoint's entry is its checkpoint id (``PACKED`` entries,
# ``lg.s``: its 16 bytes as 22 characters of URL-safe base64 when it is a UUID; ``lg.c`` and
# earlier: as it is); every other entry the saver writes (messages, writes, a checkpoint whose
# id is taken or in a subgraph namespace, whose data then says "id") gets ``short_id``.
#
# A checkpoint entry's data (every key but "d" optional):
#   "d"  its fields as a change to its parent checkpoint's (``diff_doc``); in an ``STEP`` entry
#        (``lg.c``; ``lg.s``, ``PACKED``, the one written now; no "d": no change; written as
#        ``lg.cp`` when a channel it stores starts with ">") to what ``predict`` makes of its
#        parent's: "v", "cv"
#        (channel_versions), "vs" (versions_seen), "o" (other checkpoint keys, as specs), "mj"
#        (metadata, a JSON object) or "md" (metadata, a spec);
#   "f"  1: "d" is against nothing (a new chain: every 64th checkpoint, or an unknown parent);
#   "b"  channel -> spec, the values of ``new_versions`` (in a ``STEP`` entry a channel
#        ``TRIGGER`` + node written ">" + node; a message among the ``NEAR`` entries
#        above referred to by its place, 1: the tree parent, in "m", "l" and, in new entries,
#        "x" specs; the same in a writes entry's rows); "n" their one version (not in "d"),
#        else "bv" their versions where "d" does not hold them;
#   "p"  the parent checkpoint id (null: none), unless it is the checkpoint that the nearest
#        indexed ancestor in the tree belongs to; "ns" the namespace; "id" the checkpoint id
#        when it is not the entry id; "ts" the checkpoint's ts when it is not the entry's
#        (in a ``PACKED`` entry a timestamp ending "Z" says "+00:00": ``stamp``);
#   "x"  1: a root-namespace checkpoint whose id was not the thread's greatest when put;
#   "w"  1: a root-namespace checkpoint that had pending writes before it was put (they wait
#        on a side branch). Without these two, the root checkpoint nearest the session's leaf
#        is the thread's latest and its writes follow it on the branch (``PathIndex``).
# A writes entry: "task", "w" ([idx, channel, spec] rows), "path" (or "pp": a node's name, for
# the path ``PULL_PATH`` + name, LangGraph's usual one; then no "task" when it is the id
# LangGraph derives for that node's task on its root-namespace checkpoint: ``derived_task``);
# "cp" and "ns" name its
# checkpoint unless it is the one owning its nearest indexed ancestor in the tree. The input
# task's writes (path ``INPUT_PATH``, derived task id) whose rows are what ``input_rows``
# rebuilds from the checkpoint's own ``__start__`` value say "in" (the nodes they trigger)
# instead of "w" and "pp".
# A put_writes that writes new messages needs no writes entry: the last message entry it writes
# carries the same data in ``provider_details["langgraph"]``, "" in a reference standing for
# that entry itself (no "w" when it has "pp" and its rows are ``CARRIED``, a node's usual);
# its "cp" and "ns" are left out only when its tree parent is an entry of that checkpoint (its
# checkpoint entry, or a writes entry or carrier that belongs to it).

CARRIED: list[Any] = [[0, "messages", ["l", [""]]]]  # the rows of a node that wrote a message
DOC_KEYS = ("cv", "vs", "o", "mj")  # the doc's dict fields, stored as changes
CHAIN = 64  # a checkpoint's doc is rebuilt from at most this many changes
SEGMENT = 64  # a message list is read through at most this many links per segment
EMPTY_DOC: dict[str, Any] = {"cv": {}, "vs": {}, "o": {}}


_ID_CHARS = string.ascii_letters + string.digits


def short_id(taken: Callable[[str], bool]) -> str:
    """A new id for an entry the saver writes (a message, writes, re-homed values): 8 random
    letters and digits (~47 bits), not ``taken`` in the session. An id only has to be unique
    in its session; a UUID's 36 characters, in the entry and in its child's ``parent_id``,
    were a tenth of a thread's bytes."""
    while True:
        eid = "".join(_ID_CHARS[b % 62] for b in os.urandom(8))
        if not taken(eid):
            return eid


def checkpoint_id(entry_id: str, kind: str, data: dict[str, Any]) -> str:
    """The checkpoint id of a checkpoint entry: its "id", else its entry id (unpacked in a
    ``PACKED`` entry)."""
    if "id" in data:
        return str(data["id"])
    return unpack_uuid(entry_id) if kind == PACKED else entry_id


def stamp(kind: str, timestamp: str) -> str:
    """The checkpoint ts a checkpoint entry's timestamp says: in a ``PACKED`` entry a "Z"
    stands for LangGraph's "+00:00"."""
    if kind == PACKED and timestamp.endswith("Z"):
        return timestamp[:-1] + "+00:00"
    return timestamp


def same(a: Any, b: Any) -> bool:
    """Equal as stored (1, 1.0 and True are three values here)."""
    return type(a) is type(b) and msgspec.json.encode(a) == msgspec.json.encode(b)


def diff_doc(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What ``new`` changes in ``old``: dict fields as [changed] or [changed, removed keys]."""
    out: dict[str, Any] = {}
    if "v" in new and not ("v" in old and same(old["v"], new["v"])):
        out["v"] = new["v"]
    if "md" in new and ("mj" in old or not same(old.get("md"), new["md"])):
        out["md"] = new["md"]
    for key in DOC_KEYS:
        if key not in new:
            continue
        was = old.get(key, {})
        now_ = new[key]
        changed = {k: v for k, v in now_.items() if k not in was or not same(was[k], v)}
        removed = [k for k in was if k not in now_]
        if changed or removed or (key == "mj" and "mj" not in old):
            out[key] = [changed, removed] if removed else [changed]
    return out


def apply_doc(old: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``old`` with ``change`` (from :func:`diff_doc`) applied; ``old`` is not modified (the
    docs share their unchanged fields: treat them as read-only)."""
    doc = dict(old)
    for key, value in change.items():
        if key == "v":
            doc["v"] = value
        elif key == "md":
            doc["md"] = value
            doc.pop("mj", None)
        elif key in DOC_KEYS:
            if key == "mj":
                doc.pop("md", None)
            merged = dict(old.get(key, {}))
            merged.update(value[0])
            for k in value[1] if len(value) > 1 else ():
                merged.pop(k, None)
            doc[key] = merged
    return doc


def predict(doc: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The fields LangGraph's next step usually gives a checkpoint whose parent's are ``doc``
    and that stores the values ``stored`` (its "b"): the same, with the metadata's ``step`` one
    more and its ``source`` (if any) ``"input"`` when it stores a value of ``__start__`` (the
    graph's input), else ``"loop"``, and every channel it cleared (a node's trigger,
    ``branch:to:<node>``, or ``__start__``) seen by that node at the parent's version. An
    ``STEP`` entry stores its fields as changes to these, so a step says none of them."""
    out = doc
    meta = doc.get("mj")
    if meta is not None and type(meta.get("step")) is int:
        meta = {**meta, "step": meta["step"] + 1}
        if "source" in meta:
            meta["source"] = "input" if stored.get("__start__", ["e"]) != ["e"] else "loop"
        out = {**doc, "mj": meta}
    seen = None
    for ch, spec in stored.items():
        if spec == ["e"] and ch in doc["cv"]:
            node = ch[len(TRIGGER) :] if ch.startswith(TRIGGER) else ch
            if seen is None:
                seen = dict(doc["vs"])
            seen[node] = {**seen.get(node, {}), ch: doc["cv"][ch]}
    if seen is not None:
        out = {**out, "vs": seen}
    return out


def compact(spec: list[Any]) -> Any:
    """A spec as a new entry writes it: ["e"] as 0, ["j", null] as null, ["m", [place]] (one
    message added, by its place above) as the place (see the format)."""
    if spec == ["e"]:
        return 0
    if len(spec) == 2 and spec[0] == "j" and spec[1] is None:
        return None
    if len(spec) == 2 and spec[0] == "m" and len(spec[1]) == 1:
        place = spec[1][0]
        if type(place) is int and place > 0:
            return place
    if len(spec) == 2 and spec[0] == "x" and type(spec[1]) is dict and spec[1]:
        tree = spec[1]
        if all(
            type(v) is list
            and v
            and all(type(m) is dict and len(m) == 1 and MSG_KEY in m for m in v)
            for v in tree.values()
        ):  # an input: its keys' lists of messages, as their references
            return {k: [m[MSG_KEY] for m in v] for k, v in tree.items()}
    return spec


def pack_uuid(ref: Any) -> str | None:
    """A canonical UUID string as 22 characters of URL-safe base64 (its 16 bytes), else None."""
    if type(ref) is not str or len(ref) != 36:
        return None
    try:
        raw = uuid.UUID(ref)
    except ValueError:
        return None
    return base64.urlsafe_b64encode(raw.bytes)[:22].decode("ascii") if str(raw) == ref else None


def unpack_uuid(packed: str) -> str:
    return str(uuid.UUID(bytes=base64.urlsafe_b64decode(packed + "==")))


def _short(ref: Any) -> bool:
    return type(ref) is str and len(ref) == 8 and ref.isascii() and ref.isalnum()


def pack(entry: str, ids: list[Any]) -> list[Any]:
    """A segment link's [entry, ids] as it is written (see the format): the canonical UUIDs
    (22 characters each) and the saver's short ids (``short_id``) among ``ids`` as one string,
    each ended by ".", the others as [place, ref] rows."""
    packed = []
    rows = []
    for n, ref in enumerate(ids):
        raw = pack_uuid(ref)
        if raw is not None:
            packed.append(raw + ".")
        elif _short(ref):
            packed.append(ref + ".")
        else:
            rows.append([n, ref])
    return [entry, "".join(packed), rows] if rows else [entry, "".join(packed)]


def unpack(link: list[Any]) -> list[Any]:
    """[entry, ids] from a segment link written by :func:`pack` (or, before short ids, with
    the UUIDs' 22 characters one after the other, no ".")."""
    packed = link[1]
    if "." in packed:
        parts = packed.split(".")
        if parts[-1] or any(len(p) not in (8, 22) for p in parts[:-1]):
            raise UserError(f"A stored LangGraph message list segment is damaged: {packed[:40]!r}")
        ids: list[Any] = [unpack_uuid(p) if len(p) == 22 else p for p in parts[:-1]]
    else:
        if len(packed) % 22:
            raise UserError(f"A stored LangGraph message list segment is damaged: {packed[:40]!r}")
        ids = [unpack_uuid(packed[i : i + 22]) for i in range(0, len(packed), 22)]
    for n, ref in link[2] if len(link) > 2 else ():
        ids.insert(n, ref)
    return [link[0], ids]


def _packed(spec: Any) -> bool:
    return (
        type(spec) is list
        and len(spec) > 3
        and spec[0] == "m"
        and type(spec[3]) is list
        and len(spec[3]) in (2, 3)
        and type(spec[3][1]) is str
    )


def _full(spec: Any) -> Any:
    if spec is None:
        return ["j", None]
    if type(spec) is int:
        return ["m", [spec]] if spec > 0 else ["e"]
    if type(spec) is dict:
        return ["x", {k: [{MSG_KEY: r} for r in v] for k, v in spec.items()}]
    if _packed(spec):
        return [*spec[:3], unpack(spec[3]), *spec[4:]]
    return spec


def expand(data: dict[str, Any], stepped: bool = False) -> dict[str, Any]:
    """A checkpoint's or writes entry's data with its compact parts (``compact`` specs, "pp",
    and in a ``STEP`` entry, ``stepped``, a trigger channel in "b" as ">" + node) written out
    in full; ``data`` is not modified."""
    stored = data.get("b")
    rows = data.get("w")
    out = None
    if isinstance(stored, dict):
        full = {}
        changed = "d" not in data
        for ch, spec in stored.items():
            if type(spec) is not list or (len(spec) > 3 and _packed(spec)):
                spec = _full(spec)
                changed = True
            if stepped and ch[:1] == ">":
                ch = TRIGGER + ch[1:]
                changed = True
            full[ch] = spec
        if changed:
            out = dict(data)
            out["b"] = full
            out.setdefault("d", {})
    if isinstance(rows, list) and any(
        isinstance(row, list) and type(row[-1]) is not list for row in rows
    ):
        out = out or dict(data)
        out["w"] = [[*row[:-1], _full(row[-1])] if isinstance(row, list) else row for row in rows]
    if "pp" in data:
        out = out or dict(data)
        out["path"] = PULL_PATH + str(out.pop("pp"))
    return data if out is None else out


def compact_writes(data: dict[str, Any]) -> dict[str, Any]:
    """A writes entry's data as it is written: its specs ``compact``, a node's path as "pp"."""
    out = dict(data)
    out["w"] = [[i, ch, compact(spec)] for i, ch, spec in data["w"]]
    path = out.get("path")
    if isinstance(path, str) and path.startswith(PULL_PATH):
        out["pp"] = path[len(PULL_PATH) :]
        del out["path"]
    return out


INPUT_PATH = PULL_PATH + "__start__"  # the task that writes the graph's input


def input_rows(start: Any, nodes: Any) -> list[list[Any]] | None:
    """The rows LangGraph's input task writes (path ``INPUT_PATH``) for a checkpoint whose
    ``__start__`` value is ``start`` (a spec, message references as entry ids): each of the
    input's keys in order (a list of messages as ["l", refs], JSON as ["j", value]), then
    ``TRIGGER`` + node with null for each of ``nodes``; None when that is not how they look.
    A writes entry whose rows are these says ``"in": nodes`` instead of its rows and path."""
    if not (isinstance(start, list) and len(start) == 2 and start[0] in ("x", "j")):
        return None
    if type(start[1]) is not dict or not isinstance(nodes, list):
        return None
    rows: list[list[Any]] = []
    for key, value in start[1].items():
        refs = ordered_refs(value) if start[0] == "x" else []
        if not refs:
            rows.append([len(rows), key, ["j", value]])
        elif type(value) is list and all(
            type(v) is dict and len(v) == 1 and MSG_KEY in v for v in value
        ):
            rows.append([len(rows), key, ["l", refs]])
        else:
            return None
    for node in nodes:
        if type(node) is not str:
            return None
        rows.append([len(rows), TRIGGER + node, ["j", None]])
    return rows


def derived_task(cid: str, doc: dict[str, Any], path: str) -> str | None:
    """The id LangGraph (checkpoint format v2 and later) gives the task that runs node ``name``
    (``path`` is ``PULL_PATH`` + name) of root-namespace checkpoint ``cid`` whose fields are
    ``doc``, when the node's trigger is its usual one (``branch:to:<name>``; ``__start__`` for
    the input): a hash of the checkpoint id, the node, the step and the trigger. None when it
    cannot be derived (the writer then stores the id)."""
    meta = doc.get("mj")
    step = meta.get("step") if meta is not None else None
    if type(step) is not int or not path.startswith(PULL_PATH):
        return None
    try:
        from xxhash import xxh3_128_hexdigest  # LangGraph's own dependency
    except ImportError:  # pragma: no cover - langgraph-checkpoint without langgraph
        return None
    try:
        key = binascii.unhexlify(cid.replace("-", ""))
    except (binascii.Error, ValueError):
        return None
    name = path[len(PULL_PATH) :]
    trigger = name if name == "__start__" else TRIGGER + name
    hexed = xxh3_128_hexdigest(key + f"{name}{step + 1}{name}__pregel_pull{trigger}".encode())
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


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
    # whether an id is in use in the session (new entries get short ids: ``short_id``)
    taken: Callable[[str], bool] = lambda _eid: False
    records: list[Any] = field(default_factory=list)
    written: dict[int, tuple[Any, str, Any]] = field(default_factory=dict)

    def new_id(self) -> str:
        """A short id unused in the session and in this batch."""
        return short_id(lambda eid: self.taken(eid) or any(r.id == eid for r in self.records))

    def add(self, rec: Any) -> str:
        self.records.append(rec)
        self.parent = rec.id
        return str(rec.id)

    def custom(
        self, kind: str, data: Any, entry_id: str | None = None, timestamp: str | None = None
    ) -> str:
        """Chain a ``custom`` entry of ``kind`` (a checkpoint, writes, blobs) holding ``data``."""
        return self.add(
            CustomEntry(
                id=entry_id or self.new_id(),
                parent_id=self.parent,
                timestamp=timestamp or now(),
                custom=Custom(custom_type=kind, data=data),
            )
        )

    def ancestors(self, parents: dict[str, str | None], limit: int) -> list[str]:
        """The next record's ``limit`` nearest ancestors, its parent first."""
        local = {rec.id: rec.parent_id for rec in self.records}
        out: list[str] = []
        cur = self.parent
        while cur is not None and len(out) < limit:
            out.append(cur)
            cur = local[cur] if cur in local else parents.get(cur)
        return out

    def message(self, msg: Any) -> Any:
        """A reference to the entry holding LangChain message ``msg`` (written now if new):
        the entry id, or ``[entry id, message id]`` when ``add_messages`` gave the message its
        id after it was stored. None when it would not come back identical from an entry."""
        hit = self.written.get(id(msg)) or self.known.get(id(msg))
        msg_id = msg.id  # read once: LangGraph may give it an id in another thread meanwhile
        if (
            hit is not None
            and hit[0] is msg
            and (self.allowed is None or hit[1] in self.allowed or id(msg) in self.written)
        ):
            if msg_id == hit[2]:
                return hit[1]
            if hit[2] is None and isinstance(msg_id, str):
                return [hit[1], msg_id]
        converted = lc.to_message(msg)
        if not lc.round_trips(msg, converted):
            return None
        eid = self.add(
            MessageEntry(
                id=self.new_id(), parent_id=self.parent, timestamp=now(), message=converted
            )
        )
        # the id the entry holds, not the message's now: the add_messages reducer gives a
        # message without one (a tool result) its id while a background put_writes stores it
        self.written[id(msg)] = (msg, eid, lc.stored_id(converted))
        return eid


# -- per-thread index ----------------------------------------------------------------------------


@dataclass(eq=False)
class CheckpointInfo:
    entry: str  # the checkpoint's custom entry
    ns: str
    id: str
    parent: str | None  # parent checkpoint id
    tail: str | None  # last entry of its linear suffix: where writes and children attach
    ts: str = ""
    base: CheckpointInfo | None = None  # the parent as it was when this was put
    depth: int = 0  # changes to apply to rebuild its doc
    doc: dict[str, Any] | None = None  # its whole doc, when prune re-homed it
    # (task_id, idx) -> (task_id, channel, spec, task_path, entry id)
    writes: dict[tuple[str, int], tuple[str, str, Any, str, str]] = field(default_factory=dict)
    blobs: dict[str, str] = field(default_factory=dict)  # channel -> entry re-homing its value


class ThreadIndex:
    """One LangGraph thread: its session and an in-memory index of its checkpoints."""

    def __init__(self, thread_id: str, session: Session, *, index: bool = True) -> None:
        self.thread_id = thread_id
        self.session = session
        self.cps: dict[str, dict[str, CheckpointInfo]] = {}  # ns -> checkpoint id -> info
        self.newest: dict[str, str] = {}  # ns -> its greatest checkpoint id
        # writes that came before their checkpoint (LangGraph saves checkpoints in the
        # background while the next tasks' writes arrive): (ns, checkpoint id) -> holder
        self.orphans: dict[tuple[str, str], CheckpointInfo] = {}
        self.by_entry: dict[str, CheckpointInfo] = {}  # checkpoint entry -> info
        self.owner: dict[str, tuple[str, str]] = {}  # indexed entry -> (ns, checkpoint id)
        self.parents: dict[str, str | None] = {}  # every entry's tree parent
        # (ns, channel, version) -> [(checkpoint id, entry id holding the value)]
        self.blobs: dict[tuple[str, str, Any], list[tuple[str, str]]] = {}
        self.data: dict[str, dict[str, Any]] = {}  # entry id -> its custom data
        self.docs: dict[str, dict[str, Any]] = {}  # checkpoint entry -> its rebuilt doc
        self.values: dict[tuple[str, str], tuple[Any, ...]] = {}  # decoded message lists
        # the last messages written: id(obj) -> (obj, entry id, message id when written)
        self.recent: dict[int, tuple[Any, str, Any]] = {}
        self.carriers: set[str] = set()  # message entries that carry writes
        self.stepped: set[str] = set()  # ``STEP`` checkpoint entries (see ``predict``)
        # writes whose task id is derived from their checkpoint's fields, indexed once every
        # entry is (a re-homed doc that the fields come from is appended after them)
        self.derive: list[tuple[CheckpointInfo, dict[str, Any], str]] = []
        self.main_leaf: str | None = session.leaf_id
        self.complete = False  # every entry indexed (else: only the session is open)
        self.rehomed = False  # some checkpoint's values were re-homed (``BLOBS``)
        if index:
            self.index_all()

    def taken(self, entry_id: str) -> bool:
        """Whether ``entry_id`` is an entry of the session (for new ids)."""
        return entry_id in self.parents or self.session.has_entry(entry_id)

    def index_all(self) -> None:
        """Index every checkpoint, write and blob entry of the session (once)."""
        if self.complete:
            return
        session = self.session
        with bulk_load():
            for meta in session.metadata(content_types=False):
                self.parents[meta.id] = meta.parent_id
                if meta.type in ("custom", "message"):
                    rec = session.entry(meta.id)
                    if isinstance(rec, CustomEntry):
                        self.ingest(rec)
                    elif isinstance(rec, MessageEntry):
                        self.ingest_message(rec)
            self.complete = True
            for cp, data, entry_id in self.derive:
                add_writes(cp, data, entry_id, self.task(cp, data))
            self.derive.clear()

    def ingest(self, rec: CustomEntry) -> None:
        kind = rec.custom.custom_type
        kind = KINDS.get(kind, kind)
        data = rec.custom.data
        self.parents[rec.id] = rec.parent_id
        if kind not in (CHECKPOINT, WRITES, BLOBS) or not isinstance(data, dict):
            return
        if kind in (CHECKPOINT, WRITES):
            data = resolve_near(expand(data, rec.custom.custom_type in STEPPED), rec.id, self.up)
        self.data[rec.id] = data
        if kind == CHECKPOINT:
            if rec.custom.custom_type in STEPPED:
                self.stepped.add(rec.id)
            ns = data.get("ns", "")
            cid = checkpoint_id(rec.id, rec.custom.custom_type, data)
            cps = self.cps.setdefault(ns, {})
            if "p" in data:
                parent = data["p"]
            else:  # the checkpoint its nearest indexed ancestor belongs to
                above = self.owner_of(rec.parent_id)
                parent = above.id if above is not None else None
            base = cps.get(parent) if parent else None
            cp = CheckpointInfo(
                entry=rec.id,
                ns=ns,
                id=cid,
                parent=parent,
                tail=rec.id,
                ts=data.get("ts", stamp(rec.custom.custom_type, rec.timestamp)),
                base=base,
                depth=base.depth + 1 if base is not None and "f" not in data else 0,
            )
            old = cps.get(cid) or self.orphans.pop((ns, cid), None)
            if old is not None:  # the writes made before (or for an earlier put of) it stay
                cp.writes = old.writes
            cps[cid] = cp
            if cid > self.newest.get(ns, ""):
                self.newest[ns] = cid
            self.by_entry[rec.id] = cp
            self.owner[rec.id] = (ns, cid)
            changed = data["d"].get("cv", [{}])[0]
            versions = data.get("bv", {})
            for ch in data.get("b", {}):
                if ch in versions:
                    version = versions[ch]
                else:
                    version = data["n"] if "n" in data else changed.get(ch)
                key = (ns, ch, version)
                self.blobs.setdefault(key, []).append((cid, rec.id))
            return
        if "cp" in data:
            cp = self.target(data.get("ns", ""), data["cp"])
        else:
            found = self.owner_of(rec.parent_id)
            if found is None:  # not written by this saver: nothing to attach it to
                return
            cp = found
        self.owner[rec.id] = (cp.ns, cp.id)
        cp.tail = rec.id
        if "in" in data:
            data = self.data[rec.id] = self.inputs(cp, data)
        if kind == BLOBS:
            self.rehomed = True
            for ch in data["b"]:
                cp.blobs[ch] = rec.id
            if "doc" in data:
                cp.doc = data["doc"]
            if "p" in data:
                cp.parent = data["p"]
            self.docs.clear()
            return
        self.add_writes(cp, data, rec.id)

    def ingest_message(self, rec: MessageEntry) -> None:
        """Index the writes a message entry carries (see the format above), if any."""
        self.parents[rec.id] = rec.parent_id
        data = carried_writes(rec)
        if data is None:
            return
        if "cp" in data:
            cp = self.target(data.get("ns", ""), data["cp"])
        else:  # the checkpoint its tree parent belongs to (none: purged with it)
            key = self.owner.get(rec.parent_id) if rec.parent_id else None
            found = key and (self.cps.get(key[0], {}).get(key[1]) or self.orphans.get(key))
            if not found:
                return
            cp = found
        self.data[rec.id] = data
        self.carriers.add(rec.id)
        self.owner[rec.id] = (cp.ns, cp.id)
        cp.tail = rec.id
        self.add_writes(cp, data, rec.id)

    def inputs(self, cp: CheckpointInfo, data: dict[str, Any]) -> dict[str, Any]:
        """Writes ``data`` of ``cp`` that say ``"in"`` with their rows and path written out
        (``input_rows``, from the ``__start__`` value in the checkpoint's own entry)."""
        stored = self.entry_data(cp.entry).get("b", {}) if cp.entry else {}
        rows = input_rows(stored.get("__start__"), data["in"])
        if rows is None:
            raise UserError(
                f"The input writes of checkpoint '{cp.id}' in session '{self.session.id}' "
                "cannot be rebuilt: the checkpoint's input is not stored with it"
            )
        out = {k: v for k, v in data.items() if k != "in"}
        return {**out, "path": INPUT_PATH, "w": rows}

    def add_writes(self, cp: CheckpointInfo, data: dict[str, Any], entry_id: str) -> None:
        if "task" not in data and not self.complete:
            self.derive.append((cp, data, entry_id))
        else:
            add_writes(cp, data, entry_id, self.task(cp, data))

    def task(self, cp: CheckpointInfo, data: dict[str, Any]) -> str | None:
        """The task id of writes ``data`` for ``cp``: its "task", else the one LangGraph derives
        (``derived_task``); None for writes of a checkpoint that is gone (pruned)."""
        task = data.get("task")
        if isinstance(task, str):
            return task
        if not cp.entry:
            return None
        found = derived_task(cp.id, self.doc(cp), data.get("path", ""))
        if found is None:
            raise UserError(
                f"Writes of checkpoint '{cp.id}' in session '{self.session.id}' name no task "
                "and it cannot be derived; is the xxhash package (a LangGraph dependency) "
                "installed?"
            )
        return found

    def up(self, entry_id: str) -> str | None:
        """The tree parent of an indexed entry."""
        if entry_id not in self.parents:
            raise UserError(
                f"Entry '{entry_id}' of session '{self.session.id}' is missing; "
                "a checkpoint above it refers to messages by their place in the tree"
            )
        return self.parents[entry_id]

    def owner_of(self, start: str | None) -> CheckpointInfo | None:
        """The checkpoint that the nearest indexed entry at or above ``start`` belongs to.

        The walk has no length limit: a checkpoint entry without "p" names its parent by
        this walk from its tree parent, which the writer takes from where its batch starts,
        below any number of new message entries (a step that adds 64 messages or more)."""
        cur = start
        while cur is not None:
            key = self.owner.get(cur)
            if key is not None:
                return self.cps.get(key[0], {}).get(key[1]) or self.orphans.get(key)
            cur = self.parents.get(cur)
        return None

    def doc(self, cp: CheckpointInfo) -> dict[str, Any]:
        """The checkpoint's fields (see the format above), rebuilt from at most ``CHAIN``
        changes; shared with its neighbours: read-only."""
        chain: list[CheckpointInfo] = []
        cur: CheckpointInfo | None = cp
        doc = EMPTY_DOC
        while cur is not None:
            if cur.doc is not None:
                doc = cur.doc
                break
            hit = self.docs.get(cur.entry)
            if hit is not None:
                doc = hit
                break
            chain.append(cur)
            data = self.data[cur.entry]
            if "f" in data:
                break
            if cur.base is None and data.get("p"):
                raise UserError(
                    f"Checkpoint '{cur.id}' of session '{self.session.id}' is stored as a "
                    f"change to checkpoint '{data['p']}', which is gone; restore the session "
                    "from a backup"
                )
            cur = cur.base
        for c in reversed(chain):
            data = self.data[c.entry]
            base = predict(doc, data.get("b", {})) if c.entry in self.stepped else doc
            doc = apply_doc(base, data["d"])
            if "n" in data:  # the version of every channel it stored
                doc["cv"] = {**doc["cv"], **dict.fromkeys(data["b"], data["n"])}
            self.docs[c.entry] = doc
        return doc

    def entry_data(self, entry_id: str) -> dict[str, Any]:
        """The data of an indexed checkpoint, writes or blobs entry."""
        return self.data[entry_id]

    def spec_base(self, holder: str, channel: str, spec: list[Any]) -> str | None:
        """The entry whose value of ``channel`` a ["m", ...] spec in ``holder`` adds to."""
        if len(spec) > 2 and spec[2] is not None:
            return str(spec[2])
        cp = self.by_entry.get(holder)
        return self.stored_above(cp.base, channel) if cp is not None else None

    def stored_above(self, cp: CheckpointInfo | None, channel: str) -> str | None:
        """The entry holding ``channel`` for ``cp``: its own, or its nearest ancestor's that
        stored one (what a ["m", ids] spec's base is)."""
        for _ in range(4 * CHAIN):
            if cp is None:
                return None
            rehomed = cp.blobs.get(channel)
            if rehomed is not None:
                return rehomed
            if channel in self.data[cp.entry].get("b", ()):
                return cp.entry
            cp = cp.base
        return None

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
            if cur is None or (cur in self.by_entry and cur not in lineage):
                return start
            cur = self.parents.get(cur)
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
        while cur is not None and cur not in out and len(out) < limit:
            out.add(cur)
            cur = self.parents.get(cur)
        return out

    def latest(self, ns: str) -> CheckpointInfo | None:
        cid = self.newest.get(ns)
        return self.cps[ns][cid] if cid is not None else None

    def forget(self, gone: Set[str]) -> None:
        """Drop the checkpoints whose entries are in ``gone`` from the index."""
        for ns, cps in self.cps.items():
            for cid in [c for c, cp in cps.items() if cp.entry in gone]:
                del self.by_entry[cps[cid].entry]
                del cps[cid]
            if cps:
                self.newest[ns] = max(cps)
            else:
                self.newest.pop(ns, None)
        for key in list(self.blobs):
            self.blobs[key] = [(c, e) for c, e in self.blobs[key] if e not in gone]
        for entry in gone:  # purged entries say nothing about which checkpoint is above
            self.owner.pop(entry, None)
        self.docs.clear()
        self.values.clear()

    def holder(self, cp: CheckpointInfo, channel: str, version: Any) -> str | None:
        """The entry holding ``channel`` at ``version`` as seen from checkpoint ``cp``: the
        nearest ancestor that stored it (versions repeat across branches), else the latest."""
        rehomed = cp.blobs.get(channel)
        if rehomed is not None:
            return rehomed
        found = self.blobs.get((cp.ns, channel, version)) or []
        if len(found) == 1 and not self.rehomed:
            return found[0][1]
        owners = dict(found)
        cps = self.cps.get(cp.ns, {})
        seen: set[str] = set()
        cur: CheckpointInfo | None = cp
        while cur is not None and cur.id not in seen:
            kept = cur.blobs.get(channel)
            if kept is not None and same(self.doc(cur)["cv"].get(channel), version):
                return kept  # an ancestor's value, re-homed when the entry holding it went
            if cur.id in owners:
                return owners[cur.id]
            seen.add(cur.id)
            cur = cps.get(cur.parent) if cur.parent else None
        return found[-1][1] if found else None


def add_writes(cp: CheckpointInfo, data: dict[str, Any], entry_id: str, task: str | None) -> None:
    """Index the rows of a writes entry's ``data`` (or a message's carried writes) of task
    ``task`` (None: nothing to index)."""
    if task is None:
        return
    for idx, channel, spec in data["w"]:
        wkey = (task, idx)
        if idx >= 0 and wkey in cp.writes:
            continue
        cp.writes[wkey] = (task, channel, spec, data.get("path", ""), entry_id)


def near_refs(spec: list[Any], above: list[str]) -> list[Any]:
    """``spec`` (a checkpoint's ["m", …], ["l", …] or ["x", …]) with the messages that are
    among the entries ``above`` its entry (``above[0]``: its tree parent) referred to by their
    place there (1: the parent), which is shorter than an id; the others as they are."""
    if spec[0] not in ("m", "l", "x"):
        return spec
    place = {eid: n for n, eid in enumerate(above, 1)}

    def near(ref: Any) -> Any:
        if isinstance(ref, str):
            return place.get(ref, ref)
        if isinstance(ref, list) and ref and isinstance(ref[0], str):  # [entry id, message id]
            return [place.get(ref[0], ref[0]), *ref[1:]]
        return ref

    if spec[0] == "x":
        return ["x", _fix_tree(spec[1], near)]
    return [spec[0], [near(r) for r in spec[1]], *spec[2:]]


def _placed(ref: Any) -> bool:
    return type(ref) is int or (isinstance(ref, list) and bool(ref) and type(ref[0]) is int)


def resolve_near(data: dict[str, Any], entry_id: str, up: Any) -> dict[str, Any]:
    """A checkpoint's or writes entry's data with its references by place (its "b" values,
    its "w" rows: see :func:`near_refs`) made entry ids again, ``up(id)`` giving an entry's
    tree parent; ``data`` is not modified."""
    stored = data.get("b")
    rows = data.get("w")
    specs = list(stored.values()) if isinstance(stored, dict) else []
    if isinstance(rows, list):
        specs += [row[2] for row in rows if isinstance(row, list) and len(row) == 3]
    if not any(
        isinstance(spec, list)
        and len(spec) > 1
        and (
            (spec[0] in ("m", "l") and isinstance(spec[1], list) and any(map(_placed, spec[1])))
            or (spec[0] == "x" and any(map(_placed, ordered_refs(spec[1]))))
        )
        for spec in specs
    ):
        return data
    chain: list[str] = []

    def at(n: int) -> str:
        while len(chain) < n:
            parent = up(chain[-1] if chain else entry_id)
            if parent is None:
                raise UserError(f"Checkpoint entry '{entry_id}' refers to a message above the root")
            chain.append(parent)
        return chain[n - 1]

    def ref(r: Any) -> Any:
        if type(r) is int:
            return at(r)
        if isinstance(r, list) and r and type(r[0]) is int:
            return [at(r[0]), *r[1:]]
        return r

    def spec_ids(spec: list[Any]) -> list[Any]:
        if spec[0] in ("m", "l"):
            return [spec[0], [ref(r) for r in spec[1]], *spec[2:]]
        if spec[0] == "x":
            return ["x", _fix_tree(spec[1], ref)]
        return spec

    out = dict(data)
    if isinstance(stored, dict):
        out["b"] = {ch: spec_ids(spec) for ch, spec in stored.items()}
    if isinstance(rows, list):
        out["w"] = [[i, ch, spec_ids(spec)] for i, ch, spec in rows]
    return out


def carried_writes(rec: MessageEntry) -> dict[str, Any] | None:
    """The writes data message entry ``rec`` carries, its "" references made its own id; None
    when it carries none."""
    details = rec.message.provider_details
    data = details.get(WRITES_KEY) if isinstance(details, dict) else None
    if isinstance(data, dict) and "w" not in data and isinstance(data.get("pp"), str):
        data = {**data, "w": CARRIED}
    if not (
        isinstance(data, dict)
        and isinstance(data.get("task", data.get("pp")), str)
        and isinstance(data.get("cp", ""), str)
        and isinstance(data.get("w"), list)
    ):
        return None
    data = expand(data)
    return {**data, "w": [[i, ch, swap_refs(spec, "", rec.id)] for i, ch, spec in data["w"]]}


def swap_refs(spec: list[Any], old: str, new: str) -> list[Any]:
    """``spec`` with its references to message entry ``old`` made ``new`` (a carrying entry
    writes "" for itself)."""

    def fix(ref: Any) -> Any:
        if ref == old:
            return new
        if isinstance(ref, list) and ref and ref[0] == old:
            return [new, *ref[1:]]
        return ref

    if spec[0] == "l":
        return ["l", [fix(r) for r in spec[1]]]
    if spec[0] == "x":
        return ["x", _fix_tree(spec[1], fix)]
    return spec


def _fix_tree(tree: Any, fix: Any) -> Any:
    if isinstance(tree, dict):
        if MSG_KEY in tree:
            return {MSG_KEY: fix(tree[MSG_KEY])}
        return {k: _fix_tree(v, fix) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_fix_tree(v, fix) for v in tree]
    return tree


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
        cur = t.spec_base(cur, channel, spec) if spec[0] == "m" else None
    return out


def delta_refs(t: ThreadIndex, holder: str, channel: str) -> list[Any]:
    """The message references a stored value adds, in order."""
    spec = t.data[holder]["b"][channel]
    if spec[0] == "m":
        return list(spec[1])
    if spec[0] == "l":
        return list(spec[1])
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
    refs = spec[1] if spec[0] in ("m", "l") else ordered_refs(spec[1]) if spec[0] == "x" else []
    out.update(r if isinstance(r, str) else r[0] for r in refs)


def message_ids(t: ThreadIndex, cp: CheckpointInfo) -> set[str]:
    """Message entries written with a checkpoint's values or writes."""
    out: set[str] = set()
    for spec in t.data[cp.entry]["b"].values():
        collect_refs(spec, out)
    for w in cp.writes.values():
        collect_refs(w[2], out)
    return out


# -- the latest checkpoint from the session's branch ----------------------------------------------


class Incomplete(Exception):
    """The branch alone cannot answer exactly: index the whole thread instead."""


class PathIndex(ThreadIndex):
    """Enough of a thread to answer its root namespace's latest checkpoint, read from the
    session's current branch: the checkpoint nearest the leaf, the writes after it, the
    changes its fields are rebuilt from (at most ``CHAIN``) and the values it refers to.

    Nothing is indexed up front; every entry is read when a walk needs it. Whatever the
    branch cannot settle exactly (another namespace, a checkpoint put out of id order or with
    writes that came before it, purged or foreign entries on a walk, a value older than the
    walks reach) raises :class:`Incomplete`, and the caller indexes the whole thread."""

    WALK = 4 * CHAIN  # the longest walk from one checkpoint to the one holding a value

    def __init__(self, thread_id: str, session: Session) -> None:
        super().__init__(thread_id, session, index=False)
        self.stamps: dict[str, str] = {}  # entry id -> its timestamp
        self.reads = 0  # checkpoint, writes and blobs entries read (tests count them)
        self.kinds: dict[str, str] = {}  # entry id -> custom type, or the entry type
        self.owners: dict[str, str | None] = {}  # entry id -> owner_id(entry id)
        self.cids: dict[str, str] = {}  # checkpoint entry id -> its checkpoint id

    # entries

    def load(self, entry_id: str) -> str:
        """The kind of an entry (its custom type for ours); reads its data once."""
        kind = self.kinds.get(entry_id)
        if kind is not None:
            return kind
        try:
            rec = self.session.entry(entry_id)
        except Exception as exc:
            raise Incomplete(entry_id) from exc
        self.parents[entry_id] = rec.parent_id
        if isinstance(rec, MessageEntry):
            kind = "message"
            data = carried_writes(rec)
            if data is not None:  # a message carrying writes: read as a writes entry
                kind = WRITES
                self.reads += 1
                self.data[entry_id] = data
        elif isinstance(rec, CustomEntry) and isinstance(rec.custom.data, dict):
            kind = rec.custom.custom_type
            kind = KINDS.get(kind, kind)
            if kind in (CHECKPOINT, WRITES, BLOBS):
                self.reads += 1
                data = rec.custom.data
                if kind in (CHECKPOINT, WRITES):
                    stepped = rec.custom.custom_type in STEPPED
                    data = resolve_near(expand(data, stepped), entry_id, self.up)
                if rec.custom.custom_type in STEPPED:
                    self.stepped.add(entry_id)
                if kind == CHECKPOINT and "id" not in data:
                    self.cids[entry_id] = checkpoint_id(entry_id, rec.custom.custom_type, data)
                self.data[entry_id] = data
                self.stamps[entry_id] = stamp(rec.custom.custom_type, rec.timestamp)
        else:
            kind = "other"
        self.kinds[entry_id] = kind
        return kind

    def up(self, entry_id: str) -> str | None:
        if entry_id not in self.parents:
            self.load(entry_id)
        return self.parents[entry_id]

    def checkpoint(self, entry_id: str) -> dict[str, Any]:
        """The data of a root-namespace checkpoint entry whose id says its checkpoint id
        (``checkpoint_id``: the id itself, or packed)."""
        if self.load(entry_id) != CHECKPOINT:
            raise Incomplete(entry_id)
        data = self.data[entry_id]
        if "ns" in data or "id" in data:
            raise Incomplete(entry_id)
        return data

    def entry_of(self, cid: str) -> str:
        """The entry of root-namespace checkpoint ``cid`` (its id packed, or itself)."""
        packed = pack_uuid(cid)
        entry = packed if packed is not None and self.session.has_entry(packed) else cid
        self.checkpoint(entry)
        if self.cids[entry] != cid:
            raise Incomplete(cid)
        return entry

    def owner_id(self, start: str | None) -> str | None:
        """The checkpoint id ``ThreadIndex.owner_of(start)`` finds, from the entries alone."""
        if start in self.owners:
            return self.owners[start]
        cur = start
        found: str | None = None
        for _ in range(64):
            if cur is None:
                return None
            kind = self.load(cur)
            if kind == CHECKPOINT:
                self.checkpoint(cur)
                found = self.cids[cur]
                break
            if kind in (WRITES, BLOBS):
                data = self.data[cur]
                if "ns" in data:
                    raise Incomplete(cur)
                if "cp" in data:
                    found = str(data["cp"])
                    break
                found = self.owner_id(self.parents[cur])
                if found is not None:
                    break
            elif kind != "message":
                raise Incomplete(cur)
            cur = self.parents[cur]
        else:  # further up than the walk goes: the whole index walks on (``owner_of``)
            raise Incomplete(str(start))
        if start is not None:
            self.owners[start] = found
        return found

    def base_of(self, entry_id: str) -> str | None:
        """The entry of checkpoint ``entry_id``'s parent (None: it has none)."""
        data = self.checkpoint(entry_id)
        parent = data["p"] if "p" in data else self.owner_id(self.parents[entry_id])
        if parent is None:
            return None
        return self.entry_of(str(parent))

    def info(self, entry_id: str) -> CheckpointInfo:
        data = self.checkpoint(entry_id)
        parent = data["p"] if "p" in data else self.owner_id(self.parents[entry_id])
        return CheckpointInfo(
            entry=entry_id,
            ns="",
            id=self.cids[entry_id],
            parent=parent,
            tail=entry_id,
            ts=data.get("ts", self.stamps[entry_id]),
        )

    # the latest checkpoint

    def latest_on_path(self) -> CheckpointInfo:
        """The root namespace's latest checkpoint (with its writes): the one nearest the leaf,
        when it was the newest when put and no other root checkpoint came after it."""
        leaf = self.session.leaf_id
        after: list[str] = []
        cur = leaf
        while cur is not None:
            kind = self.load(cur)
            if kind == CHECKPOINT:
                break
            if kind == WRITES:
                after.append(cur)
            elif kind != "message":
                raise Incomplete(cur)
            cur = self.parents[cur]
        if cur is None:
            raise Incomplete("no checkpoint on the branch")
        if "x" in self.checkpoint(cur) or "w" in self.data[cur]:
            raise Incomplete(cur)
        cp = self.info(cur)
        for wid in reversed(after):
            data = self.data[wid]
            if "ns" in data or data.get("cp", cp.id) != cp.id:
                raise Incomplete(wid)
            if "in" in data:
                data = self.data[wid] = self.inputs(cp, data)
            add_writes(cp, data, wid, self.task(cp, data))
        return cp

    # what ThreadIndex answers from its index, answered by walks

    def doc(self, cp: CheckpointInfo) -> dict[str, Any]:
        hit = self.docs.get(cp.entry)
        if hit is not None:
            return hit
        chain = []
        cur: str | None = cp.entry
        while cur is not None:
            chain.append(cur)
            if len(chain) > CHAIN + 1:
                raise Incomplete(cp.entry)
            if "f" in self.checkpoint(cur):
                break
            cur = self.base_of(cur)
        doc = EMPTY_DOC
        for entry in reversed(chain):
            data = self.data[entry]
            base = predict(doc, data.get("b", {})) if entry in self.stepped else doc
            doc = apply_doc(base, data["d"])
            if "n" in data:
                doc["cv"] = {**doc["cv"], **dict.fromkeys(data["b"], data["n"])}
        self.docs[cp.entry] = doc
        return doc

    def entry_data(self, entry_id: str) -> dict[str, Any]:
        return self.checkpoint(entry_id)

    def holder(self, cp: CheckpointInfo, channel: str, version: Any) -> str | None:
        cur: str | None = cp.entry
        for _ in range(self.WALK):
            if cur is None:
                break
            data = self.checkpoint(cur)
            if channel in data.get("b", {}) and same(stored_version(data, channel), version):
                return cur
            cur = self.base_of(cur)
        raise Incomplete(f"{channel} {version!r}")

    def spec_base(self, holder: str, channel: str, spec: list[Any]) -> str | None:
        if len(spec) > 2 and spec[2] is not None:
            base = str(spec[2])
            self.checkpoint(base)
            return base
        cur = self.base_of(holder)
        for _ in range(self.WALK):
            if cur is None:
                return None
            if channel in self.checkpoint(cur).get("b", ()):
                return cur
            cur = self.base_of(cur)
        raise Incomplete(holder)


def stored_version(data: dict[str, Any], channel: str) -> Any:
    """The version of ``channel`` a checkpoint entry's "b" holds (as ``ingest`` reads it)."""
    versions = data.get("bv", {})
    if channel in versions:
        return versions[channel]
    if "n" in data:
        return data["n"]
    return data["d"].get("cv", [{}])[0].get(channel)
