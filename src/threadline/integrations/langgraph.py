"""A LangGraph checkpointer over any threadline store: ``ThreadlineSaver``.

    from threadline.integrations.langgraph import ThreadlineSaver
    saver = ThreadlineSaver("sqlite:///agent.db")       # a Store, a URL, or None ($THREADLINE_HOME)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

One LangGraph thread is one threadline session (its id is the thread id when that is a valid
session id, else ``lg-`` and a hash; the header's ``metadata.langgraph.thread_id`` names it).
Checkpoints, their pending writes and the channel values live in that session's tree:

- a checkpoint is a ``custom`` entry (``custom_type="lg.s"``, its id the checkpoint id packed;
  ``"lg.c"``, ``"lg.cp"`` and ``"langgraph.checkpoint"`` before; the saver's other entries have
  short ids)
  whose tree parent is the last entry of its parent checkpoint (time travel appends under an
  earlier checkpoint, so it branches; ``copy_thread`` copies the whole tree into a new
  session). It holds only what the
  checkpoint changed: its fields as changes to its parent's, and no parent id when the tree says
  it (the format is in ``_langgraph_index``);
- ``put_writes`` appends its writes after their checkpoint: when it writes new messages, the
  last message entry carries them (``provider_details["langgraph"]``), else a
  ``lg.w`` entry (``langgraph.writes`` before) holds them;
- a channel value is stored once, when its version is new; a list of LangChain messages that
  grew from its previous version (``add_messages``) is stored as the messages added, each an
  ordinary threadline ``message`` entry written once (a message a node wrote as a pending write is
  the same entry the next checkpoint refers to). So the current branch of the session *is* the
  conversation: ``threadline show``, search, tags, the web viewer and every export format read it.
  Anything else is stored whole: JSON values as JSON, other values through LangGraph's serializer.

Deleting (``delete_thread``, ``prune``, ``delete_for_runs``) really deletes: a thread's session is
removed, and pruned checkpoints are purged (content gone, tree shape kept; see threadline's purge).

Needs the ``langgraph`` extra: ``pip install 'threadline[langgraph]'``.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import msgspec

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        PendingWrite,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "threadline's LangGraph checkpointer needs langgraph-checkpoint: "
        "pip install 'threadline[langgraph]'"
    ) from None

from threadline.errors import SessionLockedError, StoreError, UserError
from threadline.formats import langchain as lc
from threadline.integrations._langgraph_index import (
    BLOBS,
    CARRIED,
    CHAIN,
    CHECKPOINT,
    EMPTY_DOC,
    INPUT_PATH,
    MAX_DEPTH,
    MSG_KEY,
    NEAR,
    PACKED,
    SEGMENT,
    STEP,
    TRIGGER,
    WRITES,
    WRITES_KEY,
    Batch,
    CheckpointInfo,
    Incomplete,
    PathIndex,
    ThreadIndex,
    collect_refs,
    compact,
    compact_writes,
    delta_chain,
    delta_refs,
    derived_task,
    diff_doc,
    input_rows,
    message_ids,
    near_refs,
    pack,
    pack_uuid,
    plain,
    predict,
    same,
    swap_refs,
    thread_session_id,
)
from threadline.model.entries import Custom as CustomPayload
from threadline.model.entries import CustomEntry, MessageEntry, new_id, now
from threadline.session import Session
from threadline.store.base import bulk_load
from threadline.stores import Store, open_store

__all__ = ["ThreadlineSaver"]

# (``list`` is a method name inside the saver)
_Tuples = list[CheckpointTuple]
_Spec = list[Any]
_Rows = list[list[Any]]
_Names = list[str]


class ThreadlineSaver(BaseCheckpointSaver[int]):
    """A LangGraph ``BaseCheckpointSaver`` (sync and async) over a threadline store.

    ``store`` is a threadline Store, a store URL (a directory, ``sqlite:///…``,
    ``postgresql://…``) or None for the default store (``$THREADLINE_HOME`` or ~/.threadline).
    The saver becomes the writer of each thread it writes (threadline's one-writer-per-session
    lock) and keeps at most ``max_open_threads`` threads open: the least recently used one is
    closed (its lock released, its index dropped) when another opens, and every one at
    :meth:`close`; another process can read or write a thread once the saver let it go.
    """

    # how long writes that arrive before their checkpoint wait for it (seconds)
    writes_wait = 2.0

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        serde: SerializerProtocol | None = None,
        max_open_threads: int = 32,
    ) -> None:
        super().__init__(serde=serde)
        if type(max_open_threads) is not int or max_open_threads < 1:
            raise UserError(f"max_open_threads must be a positive int, not {max_open_threads!r}")
        self.store: Store = (
            store if store is not None and not isinstance(store, str) else open_store(store)
        )
        self.max_open_threads = max_open_threads
        self._threads: OrderedDict[str, ThreadIndex] = OrderedDict()
        self.path_reads = 0  # entries the last branch-only read of a latest checkpoint read
        self._lock = threading.RLock()
        self._put_done = threading.Condition(self._lock)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Release every thread's writer lock (the saver can still be used afterwards)."""
        with self._lock:
            for t in self._threads.values():
                t.session.close()
            self._threads.clear()

    def __enter__(self) -> ThreadlineSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ThreadlineSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def session(self, thread_id: str) -> Session | None:
        """The threadline session of a LangGraph thread (None when it has no checkpoint)."""
        with self._lock:
            t = self._thread(thread_id, create=False, lazy=True)
            return t.session if t else None

    # -- threads -------------------------------------------------------------------------------

    def _thread(self, thread_id: str, *, create: bool, lazy: bool = False) -> ThreadIndex | None:
        """The thread's index (None: no such thread and not ``create``); ``lazy``: the session
        may be open without its checkpoints indexed yet (``index_all`` before using them)."""
        t = self._threads.get(thread_id)
        if t is not None:
            self._threads.move_to_end(thread_id)
            if not lazy:
                t.index_all()
            return t
        if not isinstance(thread_id, str) or not thread_id:
            raise UserError(f"LangGraph thread id {thread_id!r} must be a non-empty string")
        sid = thread_session_id(thread_id)
        if self.store.exists(sid):
            session = self.store.open(sid)
            meta = (session.header.metadata or {}).get("langgraph")
            if not isinstance(meta, dict) or meta.get("thread_id") != thread_id:
                raise UserError(
                    f"Session '{sid}' exists but is not LangGraph thread {thread_id!r}; "
                    "use another thread id or another store"
                )
        elif create:
            try:
                session = self.store.create(
                    session_id=sid, metadata={"langgraph": {"thread_id": thread_id}}
                )
            except UserError:
                if not self.store.exists(sid):
                    raise
                # another saver created the thread meanwhile: open it (writing it may then
                # meet that saver's lock: SessionLockedError)
                return self._thread(thread_id, create=False, lazy=lazy)
        else:
            return None
        return self._keep(ThreadIndex(thread_id, session, index=not lazy))

    def _writer(self, t: ThreadIndex) -> ThreadIndex:
        """Become the writer of ``t``'s session (``SessionLockedError`` while another saver or
        process is); when another writer appended to it since this saver indexed it (it let
        the thread go meanwhile, or only read it), index it again, so what this saver writes
        is computed against every checkpoint of the thread."""
        state = t.session.state
        if state.writer:
            return t
        before = (len(state.tree), len(state.purged))
        try:
            state.ensure_writer()
        except SessionLockedError:
            raise
        except StoreError:  # another writer replaced the log (a purge): read it again
            self._threads.pop(t.thread_id, None)
            t.session.close()
            again = self._thread(t.thread_id, create=True)
            assert again is not None
            again.session.state.ensure_writer()
            return again
        if (len(state.tree), len(state.purged)) == before:
            return t
        return self._keep(ThreadIndex(t.thread_id, t.session))

    def _current(self, thread_id: str) -> ThreadIndex | None:
        """The thread as the store holds it now (None: no such thread): a thread this saver
        has open without being its writer is read again (another saver may have written it)."""
        t = self._threads.get(thread_id)
        if t is not None and not t.session.state.writer:
            del self._threads[thread_id]
            t.session.close()
        return self._thread(thread_id, create=False)

    def _keep(self, t: ThreadIndex) -> ThreadIndex:
        """Index ``t``; close the least recently used threads beyond ``max_open_threads`` (a
        closed thread is opened again, from its session, when it is next used)."""
        self._threads[t.thread_id] = t
        self._threads.move_to_end(t.thread_id)
        while len(self._threads) > self.max_open_threads:
            _, old = self._threads.popitem(last=False)
            old.session.close()
        return t

    def _thread_ids(self) -> list[str]:
        """Every LangGraph thread of the store (opens each session's header)."""
        out = []
        for row in self.store.list():
            known = [tid for tid, t in self._threads.items() if t.session.id == row.id]
            if known:
                out.extend(known)
                continue
            try:
                session = self.store.open(row.id, read_only=True)
            except Exception:  # a session another writer is replacing: not a thread of ours
                continue
            meta = (session.header.metadata or {}).get("langgraph")
            if isinstance(meta, dict) and isinstance(meta.get("thread_id"), str):
                out.append(meta["thread_id"])
        return out

    def _append(self, t: ThreadIndex, batch: Batch, *, main: bool) -> None:
        """Write one batch durably; keep the session's leaf on the root namespace's latest
        checkpoint so the session reads as the conversation."""
        session = t.session
        if batch.records:
            session.append_records(batch.records)
            for rec in batch.records:
                t.parents[rec.id] = rec.parent_id
                if isinstance(rec, CustomEntry):
                    t.ingest(rec)
                elif isinstance(rec, MessageEntry) and rec.message.provider_details:
                    t.ingest_message(rec)
            if main:
                t.main_leaf = batch.records[-1].id
            t.remember(batch.written)
        if t.main_leaf is not None and session.leaf_id != t.main_leaf:
            session.branch(t.main_leaf)

    # -- values --------------------------------------------------------------------------------

    def _encode(self, value: Any, batch: Batch) -> list[Any]:
        if plain(value):
            return ["j", value]
        tree = self._tree(value, batch)
        if tree is not None:
            if type(tree) is list and all(type(v) is dict and MSG_KEY in v for v in tree):
                return ["l", [v[MSG_KEY] for v in tree]]  # a list of messages, the usual case
            return ["x", tree]
        kind, data = self.serde.dumps_typed(value)
        return ["s", kind, base64.b64encode(data).decode("ascii")]

    def _tree(self, value: Any, batch: Batch, depth: int = 0) -> Any:
        """``value`` as JSON with messages as entry references, or None if it is not that."""
        if isinstance(value, BaseMessage):
            batch.message(value)
            ref = batch.message(value)
            return None if ref is None else {MSG_KEY: ref}
        if depth >= MAX_DEPTH:
            return None
        if type(value) is list:
            out = []
            for v in value:
                enc = self._tree(v, batch, depth + 1)
                if enc is None:
                    return None
                out.append(enc)
            return out
        if type(value) is dict:
            obj = {}
            for k, v in value.items():
                if type(k) is not str or k == MSG_KEY or not plain(k):
                    return None
                enc = self._tree(v, batch, depth + 1)
                if enc is None:
                    return None
                obj[k] = enc
            return obj
        return value if plain(value) else None

    def _decode(self, t: ThreadIndex, spec: list[Any]) -> Any:
        kind = spec[0]
        if kind == "j":
            return spec[1]
        if kind == "l":
            return [self._message(t, ref) for ref in spec[1]]
        if kind == "x":
            return self._untree(t, spec[1])
        if kind == "s":
            return self.serde.loads_typed((spec[1], base64.b64decode(spec[2])))
        raise UserError(f"Unknown stored LangGraph value kind {kind!r}")

    def _untree(self, t: ThreadIndex, tree: Any) -> Any:
        if isinstance(tree, dict):
            if MSG_KEY in tree:
                return self._message(t, tree[MSG_KEY])
            return {k: self._untree(t, v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [self._untree(t, v) for v in tree]
        return tree

    def _message(self, t: ThreadIndex, ref: Any) -> Any:
        entry_id = ref if isinstance(ref, str) else ref[0]
        rec = t.session.entry(entry_id)
        if not isinstance(rec, MessageEntry):
            raise UserError(
                f"Entry '{entry_id}' of session '{t.session.id}' is not a message "
                "(was it purged?); the checkpoint that refers to it cannot load"
            )
        msg = lc.from_message(rec.message)
        if not isinstance(ref, str):
            msg.id = ref[1]
        return msg

    def _messages_at(self, t: ThreadIndex, holder: str, channel: str) -> tuple[Any, ...]:
        """The message list stored (as a chain of deltas) for ``channel`` in entry ``holder``."""
        cached = t.values.get((holder, channel))
        if cached is not None:
            return cached
        chain: list[list[str]] = []
        cur: str | None = holder
        base: tuple[Any, ...] = ()
        while cur is not None:
            hit = t.values.get((cur, channel))
            if hit is not None:
                base = hit
                break
            spec = t.entry_data(cur)["b"][channel]
            if spec[0] != "m":
                decoded = self._decode(t, spec)
                if type(decoded) is not list:
                    raise UserError(f"Channel {channel!r} of entry '{cur}' is not a list")
                base = tuple(decoded)
                break
            if len(spec) > 3:  # the value SEGMENT links back + every message added since
                chain.append(spec[3][1])
                cur = str(spec[3][0])
                continue
            chain.append(spec[1])
            cur = t.spec_base(cur, channel, spec)
            if cur is None:
                raise UserError(
                    f"Channel {channel!r} of entry '{holder}' in session "
                    f"'{t.session.id}' adds to a value that is gone; restore it from a backup"
                )
        out = list(base)
        for ids in reversed(chain):
            out.extend(self._message(t, e) for e in ids)
        value = tuple(out)
        self._cache(t, holder, channel, value)
        return value

    @staticmethod
    def _cache(t: ThreadIndex, holder: str, channel: str, value: tuple[Any, ...]) -> None:
        if len(t.values) >= 16:
            t.values.pop(next(iter(t.values)))
        t.values[(holder, channel)] = value

    def _value(self, t: ThreadIndex, holder: str, channel: str) -> tuple[bool, Any]:
        spec = t.data[holder]["b"][channel]
        if spec[0] == "e":
            return False, None
        if spec[0] == "m":
            return True, list(self._messages_at(t, holder, channel))
        return True, self._decode(t, spec)

    # -- reading -------------------------------------------------------------------------------

    def _metadata(self, t: ThreadIndex, cp: CheckpointInfo) -> Any:
        doc = t.doc(cp)
        if "mj" in doc:  # a copy: the doc is shared with the checkpoint's neighbours
            return msgspec.json.decode(msgspec.json.encode(doc["mj"]))
        return self._decode(t, doc["md"])

    def _tuple(self, t: ThreadIndex, cp: CheckpointInfo) -> CheckpointTuple:
        doc = t.doc(cp)
        values: dict[str, Any] = {}
        for ch, ver in doc["cv"].items():
            holder = t.holder(cp, ch, ver)
            if holder is None:
                continue
            present, value = self._value(t, holder, ch)
            if present:
                values[ch] = value
        checkpoint: dict[str, Any] = {
            "v": doc.get("v", 1),
            "id": cp.id,
            "ts": cp.ts,
            "channel_values": values,
            "channel_versions": dict(doc["cv"]),
            "versions_seen": {k: dict(v) for k, v in doc["vs"].items()},
        }
        stored = t.data[cp.entry]["b"]
        for key, spec in doc["o"].items():
            if spec == ["u"]:  # the channels this checkpoint stored a value of
                checkpoint[key] = sorted(ch for ch, s in stored.items() if s[0] != "e")
            else:
                checkpoint[key] = self._decode(t, spec)
        writes = sorted(cp.writes.items(), key=lambda kv: writes_sort_key(kv[1][3], *kv[0]))
        pending: list[PendingWrite] = [
            (task, channel, self._decode(t, spec)) for _, (task, channel, spec, _p, _e) in writes
        ]
        config = {
            "configurable": {
                "thread_id": t.thread_id,
                "checkpoint_ns": cp.ns,
                "checkpoint_id": cp.id,
            }
        }
        parent = (
            {
                "configurable": {
                    "thread_id": t.thread_id,
                    "checkpoint_ns": cp.ns,
                    "checkpoint_id": cp.parent,
                }
            }
            if cp.parent
            else None
        )
        return CheckpointTuple(
            config=config,  # type: ignore[arg-type]
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=self._metadata(t, cp),
            parent_config=parent,  # type: ignore[arg-type]
            pending_writes=pending,
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        # reading builds many small objects and no cycles: the cyclic GC waits (as in loads)
        with self._lock, bulk_load():
            t = self._thread(conf["thread_id"], create=False, lazy=True)
            if t is None:
                return None
            ns = conf.get("checkpoint_ns", "")
            cid = get_checkpoint_id(config)
            if not t.complete and not ns and not cid:
                found = self._latest_on_path(t)
                if found is not None:
                    return found
            t.index_all()
            cp = t.cps.get(ns, {}).get(cid) if cid else t.latest(ns)
            return self._tuple(t, cp) if cp is not None else None

    def _latest_on_path(self, t: ThreadIndex) -> CheckpointTuple | None:
        """The root namespace's latest checkpoint read from the session's branch alone (a
        thread not indexed yet: a fresh saver resuming it), or None when the branch cannot
        settle it exactly (see :class:`PathIndex`)."""
        view = PathIndex(t.thread_id, t.session)
        self.path_reads = 0
        try:
            found = self._tuple(view, view.latest_on_path())
        except (Incomplete, UserError):  # the whole index answers (or names the problem)
            return None
        finally:
            self.path_reads = view.reads
        return found

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        with self._lock, bulk_load():
            found = self._list(config, filter, before, limit)
        yield from found

    def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Tuples:
        conf = config["configurable"] if config else {}
        thread_ids = [conf["thread_id"]] if conf.get("thread_id") else self._thread_ids()
        want_ns = conf.get("checkpoint_ns")
        want_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        out: _Tuples = []
        for tid in thread_ids:
            t = self._thread(tid, create=False)
            if t is None:
                continue
            for ns, cps in t.cps.items():
                if want_ns is not None and ns != want_ns:
                    continue
                for cid in sorted(cps, reverse=True):
                    if want_id and cid != want_id:
                        continue
                    if before_id and cid >= before_id:
                        continue
                    cp = cps[cid]
                    if filter:
                        meta = self._metadata(t, cp)
                        if not all(meta.get(k) == v for k, v in filter.items()):
                            continue
                    if limit is not None and len(out) >= limit:
                        return out
                    out.append(self._tuple(t, cp))
        return out

    # -- writing -------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        parent_id = conf.get("checkpoint_id")
        cid = checkpoint["id"]
        with self._lock:
            t = self._thread(thread_id, create=True)
            assert t is not None
            t = self._writer(t)
            cps = t.cps.setdefault(ns, {})
            parent = cps.get(parent_id) if parent_id else None
            start = parent.tail if parent is not None else t.main_leaf if ns == "" else None
            if not ns:
                start = t.follow(start, t.lineage(parent))
            batch = Batch(start, t.recent, t.ancestors(start), t.taken)
            values = checkpoint["channel_values"]
            blobs: dict[str, Any] = {}
            deltas: dict[str, tuple[Any, ...]] = {}
            for ch in new_versions:
                if ch not in values:
                    blobs[ch] = ["e"]
                    continue
                value = values[ch]
                spec = self._delta(t, parent, ch, value, batch) if parent else None
                if spec is None:
                    spec = self._encode(value, batch)
                elif type(value) is list:
                    deltas[ch] = tuple(value)
                blobs[ch] = spec
            data: dict[str, Any] = {}
            if ns:
                data["ns"] = ns
            else:  # what a fresh saver needs to trust the checkpoint nearest the leaf
                newest = t.newest.get("")
                if newest is not None and cid <= newest:
                    data["x"] = 1  # not the newest: the latest is elsewhere
                early = cps.get(cid) or t.orphans.get((ns, cid))
                if early is not None and early.writes:
                    data["w"] = 1  # writes that came before it, on a side branch
            # a channel named like a short trigger (">x") keeps the earlier kind: no shorthands
            stepped = not any(ch[:1] == ">" for ch in blobs)
            packed = pack_uuid(cid) if stepped else None
            kind = PACKED if packed is not None else STEP if stepped else CHECKPOINT
            entry_id = packed or cid  # the checkpoint id, packed when it is a UUID
            if ns or t.session.has_entry(entry_id):
                entry_id = batch.new_id()
                data["id"] = cid
            above = t.owner_of(start)
            # no "p" when the tree says which parent it is
            if (parent is None or above is not parent) and (parent_id or above is not None):
                data["p"] = parent_id or None
            ts = checkpoint.get("ts")
            if not isinstance(ts, str) or not ts:
                data["ts"] = ts
                ts = now()
            elif kind == PACKED and ts.endswith("+00:00"):
                ts = ts[:-6] + "Z"  # LangGraph's UTC offset, as threadline writes it
            elif kind == PACKED and ts.endswith("Z"):
                data["ts"] = ts  # (a "Z" of a ``PACKED`` entry reads as "+00:00")
            doc = self._doc(checkpoint, blobs, config, metadata, batch)
            if not (plain(doc["cv"]) and plain(doc["vs"]) and plain(new_versions)):
                raise UserError("LangGraph channel versions must be strings or numbers")
            # stored as what changed since the parent, a whole doc every CHAIN checkpoints
            prev = t.doc(parent) if parent is not None and parent.depth + 1 < CHAIN else EMPTY_DOC
            if parent_id and prev is EMPTY_DOC:
                data["f"] = 1
            change = data["d"] = diff_doc(predict(prev, blobs) if stepped else prev, doc)
            near = batch.ancestors(t.parents, NEAR)

            def short(ch: str) -> str:  # a node's trigger: ">" + node
                return ">" + ch[len(TRIGGER) :] if stepped and ch.startswith(TRIGGER) else ch

            data["b"] = {short(ch): compact(near_refs(spec, near)) for ch, spec in blobs.items()}
            step = [new_versions[ch] for ch in blobs]
            if step and all(
                same(v, step[0]) and ch in doc["cv"] and same(doc["cv"][ch], v)
                for ch, v in zip(blobs, step, strict=True)
            ):  # one version for the step's channels (LangGraph's way): said once
                data["n"] = step[0]
                cv = change.pop("cv", None)
                if cv is not None:
                    rest = {k: v for k, v in cv[0].items() if k not in blobs}
                    if rest or len(cv) > 1:
                        change["cv"] = [rest, *cv[1:]]
            else:
                changed = change.get("cv", [{}])[0]
                odd = {
                    ch: v
                    for ch, v in new_versions.items()
                    if not (ch in changed and same(changed[ch], v))
                }
                if odd:
                    data["bv"] = odd
            if not change:
                del data["d"]  # nothing but what the step predicts
            batch.custom(kind, data, entry_id=entry_id, timestamp=ts)
            self._append(t, batch, main=not ns)
            self._put_done.notify_all()
            cp = cps[cid]
            for ch, value in deltas.items():
                self._cache(t, cp.entry, ch, value)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def _doc(
        self,
        checkpoint: Checkpoint,
        blobs: dict[str, Any],
        config: RunnableConfig,
        metadata: CheckpointMetadata,
        batch: Batch,
    ) -> dict[str, Any]:
        """The checkpoint's fields but its id, ts and values (see the index's format)."""
        doc: dict[str, Any] = {
            "v": checkpoint.get("v", 1),
            "cv": dict(checkpoint.get("channel_versions", {})),
            "vs": {k: dict(v) for k, v in checkpoint.get("versions_seen", {}).items()},
        }
        stored = sorted(ch for ch, spec in blobs.items() if spec[0] != "e")
        skip = ("v", "id", "ts", "channel_values", "channel_versions", "versions_seen")
        doc["o"] = {
            k: ["u"]
            if k == "updated_channels" and type(v) is list and v == stored
            else self._encode(v, batch)
            for k, v in checkpoint.items()
            if k not in skip
        }
        meta = self._encode(get_checkpoint_metadata(config, metadata), batch)
        if meta[0] == "j" and type(meta[1]) is dict:
            doc["mj"] = meta[1]
        else:
            doc["md"] = meta
        return doc

    def _delta(
        self, t: ThreadIndex, parent: CheckpointInfo, channel: str, value: Any, batch: Batch
    ) -> _Spec | None:
        """``value`` as the messages added to the parent's version of ``channel``, or None."""
        if type(value) is not list or not value or not isinstance(value[-1], BaseMessage):
            return None
        version = t.doc(parent)["cv"].get(channel)
        holder = t.holder(parent, channel, version) if version is not None else None
        if holder is None or t.data[holder]["b"][channel][0] not in ("m", "l", "x"):
            return None
        try:
            prev = self._messages_at(t, holder, channel)
        except Exception:  # the previous value is not a message list after all
            return None
        n = len(prev)
        if len(value) < n:
            return None
        for a, b in zip(prev, value, strict=False):  # identity first: add_messages keeps them
            if a is not b and not (isinstance(a, BaseMessage) and a == b):
                return None
        ids = []
        for msg in value[n:]:
            if not isinstance(msg, BaseMessage):
                return None
            ref = batch.message(msg)
            if ref is None:
                return None
            ids.append(ref)
        spec: _Spec = (
            ["m", ids] if t.stored_above(parent, channel) == holder else ["m", ids, holder]
        )
        segment = self._segment(t, holder, channel)
        if segment is not None:  # every SEGMENT links: where the chain was, and what it added
            spec += [None] if len(spec) == 2 else []
            spec.append(pack(segment[0], segment[1] + ids))
        return spec

    @staticmethod
    def _segment(t: ThreadIndex, holder: str, channel: str) -> tuple[str, _Spec] | None:
        """When the message list in ``holder`` ends ``SEGMENT - 1`` links without a segment:
        the entry where they start and the messages they add (a new link then says both)."""
        added: _Spec = []
        cur = holder
        while len(added) < SEGMENT - 1:
            spec = t.data[cur]["b"][channel]
            if spec[0] != "m" or len(spec) > 3:
                return None
            added.append(spec[1])
            found = t.spec_base(cur, channel, spec)
            if found is None:
                return None
            cur = found
        return cur, [ref for ids in reversed(added) for ref in ids]

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        conf = config["configurable"]
        ns = conf.get("checkpoint_ns", "")
        cid = conf["checkpoint_id"]
        with self._lock:
            t = self._thread(conf["thread_id"], create=True)
            assert t is not None
            t = self._writer(t)
            latest = t.latest(ns)
            if cid not in t.cps.get(ns, {}) and latest is not None and cid > latest.id:
                # a checkpoint LangGraph is saving in the background right now: its writes
                # wait for it (briefly), so they can go after it and hold its messages once
                waiting = t
                self._put_done.wait_for(
                    lambda: cid in waiting.cps.get(ns, {}), timeout=self.writes_wait
                )
                t = self._thread(conf["thread_id"], create=True)
                assert t is not None
                t = self._writer(t)
            cp = t.target(ns, cid)
            # Writes go after their checkpoint. Writes that arrive before it (LangGraph saves
            # checkpoints in the background) or after its child wait on a side branch, so the
            # session's branch keeps the conversation's order; a message they hold is written
            # again where its checkpoint needs it.
            start = cp.tail
            if start is None:
                latest = t.latest(ns)
                start = t.main_leaf if ns == "" else (latest.tail if latest else None)
                on_main = False
            elif not ns:
                start = t.follow(start)
                on_main = start == t.main_leaf
            else:
                on_main = False
            batch = Batch(start, t.recent, taken=t.taken)
            rows: list[list[Any]] = []
            for idx, (channel, value) in enumerate(writes):
                key_idx = WRITES_IDX_MAP.get(channel, idx)
                if key_idx >= 0 and (task_id, key_idx) in cp.writes:
                    continue
                rows.append([key_idx, channel, self._encode(value, batch)])
            if not rows:
                return
            data: dict[str, Any] = {"task": task_id, "w": rows}
            if task_path:
                data["path"] = task_path
                # no task id when LangGraph's can be derived (see the index's format)
                if not ns and cp.entry and derived_task(cid, t.doc(cp), task_path) == task_id:
                    del data["task"]
            last = batch.records[-1] if batch.records else None
            if isinstance(last, MessageEntry) and WRITES_KEY not in (
                last.message.provider_details or {}
            ):
                # the last message written carries the writes: no writes entry
                if len(batch.records) > 1 or start is None or t.owner.get(start) != (ns, cid):
                    data["cp"] = cid  # else its tree parent says (see the index's format)
                    if ns:
                        data["ns"] = ns
                data["w"] = [[i, ch, swap_refs(spec, last.id, "")] for i, ch, spec in rows]
                details = dict(last.message.provider_details or {})
                carried = compact_writes(data)
                if "pp" in carried and carried["w"] == CARRIED:
                    del carried["w"]  # a node's usual rows: said by leaving them out
                details[WRITES_KEY] = carried
                batch.records[-1] = msgspec.structs.replace(
                    last, message=msgspec.structs.replace(last.message, provider_details=details)
                )
            else:
                if t.owner_of(start) is not cp:  # else the tree says which checkpoint
                    data["cp"] = cid
                    if ns:
                        data["ns"] = ns
                nodes = self._input_nodes(t, cp, data, rows)
                if nodes is not None:  # the input task's usual rows: its nodes say them
                    data = {k: v for k, v in data.items() if k not in ("w", "path")}
                    data["in"] = nodes
                    batch.custom(WRITES, data)
                else:
                    near = batch.ancestors(t.parents, NEAR)
                    data["w"] = [[i, ch, near_refs(spec, near)] for i, ch, spec in rows]
                    batch.custom(WRITES, compact_writes(data))
            self._append(t, batch, main=on_main)

    @staticmethod
    def _input_nodes(
        t: ThreadIndex, cp: CheckpointInfo, data: dict[str, Any], rows: _Rows
    ) -> _Names | None:
        """The nodes the input task's ``rows`` trigger, when the rows are exactly what
        ``input_rows`` rebuilds from the checkpoint's stored input, and its task id is
        derived; else None (the rows are stored)."""
        if "task" in data or data.get("path") != INPUT_PATH or not cp.entry or "ns" in data:
            return None
        nodes: _Names = []
        for _i, ch, spec in rows[::-1]:
            if not (ch.startswith(TRIGGER) and spec == ["j", None]):
                break
            nodes.append(ch[len(TRIGGER) :])
        nodes.reverse()
        start = t.data[cp.entry].get("b", {}).get("__start__")
        want = input_rows(start, nodes)
        return nodes if want is not None and same(want, rows) else None

    # -- deleting and copying ------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            t = self._threads.pop(thread_id, None)
            if t is not None:
                t.session.close()
            sid = thread_session_id(thread_id)
            if self.store.exists(sid):
                session = self.store.open(sid, read_only=True)
                meta = (session.header.metadata or {}).get("langgraph")
                if isinstance(meta, dict) and meta.get("thread_id") == thread_id:
                    self.store.delete(sid)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and message of a thread into a new thread (a fork of
        its session: same entry ids, ``parent_session`` naming the source)."""
        with self._lock:
            src = self._thread(source_thread_id, create=False)
            if src is None:
                return
            existing = self._thread(target_thread_id, create=False)
            if existing is not None and existing.cps:
                raise UserError(
                    f"Thread {target_thread_id!r} already has checkpoints; "
                    "delete_thread it first or copy into a new thread id"
                )
            if existing is not None:
                self.delete_thread(target_thread_id)
            records = []
            for rec in src.session.entries():
                if isinstance(rec, (MessageEntry, CustomEntry)):
                    records.append(rec)
                else:  # purged or foreign entries keep their place in the tree
                    records.append(
                        CustomEntry(
                            id=rec.id or new_id(),
                            parent_id=rec.parent_id,
                            timestamp=rec.timestamp or now(),
                            custom=CustomPayload(custom_type="langgraph.gap"),
                        )
                    )
            session = self.store.create(
                session_id=thread_session_id(target_thread_id),
                parent_session=src.session.id,
                metadata={"langgraph": {"thread_id": target_thread_id}},
                records=records,
            )
            t = self._keep(ThreadIndex(target_thread_id, session))
            t.main_leaf = src.main_leaf
            if t.main_leaf is not None and session.leaf_id != t.main_leaf:
                session.branch(t.main_leaf)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's latest checkpoint (with its writes and the
        messages its values hold) and purge the rest; ``delete``: delete the threads."""
        if strategy not in ("keep_latest", "delete"):
            raise UserError(f"Unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        with self._lock:
            for tid in thread_ids:
                if strategy == "delete":
                    self.delete_thread(tid)
                    continue
                t = self._current(tid)
                if t is None:
                    continue
                self._drop(t, lambda t, cp: cp is not t.latest(cp.ns))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Purge every checkpoint (and its writes) whose metadata ``run_id`` is one of these."""
        runs = set(run_ids)
        if not runs:
            return
        with self._lock:
            for tid in self._thread_ids():
                t = self._current(tid)
                if t is None:
                    continue

                def doomed(t: ThreadIndex, cp: CheckpointInfo) -> bool:
                    meta = self._metadata(t, cp)
                    return isinstance(meta, dict) and meta.get("run_id") in runs

                self._drop(t, doomed)

    def _drop(self, t: ThreadIndex, doomed: Any) -> None:
        """Purge the checkpoints ``doomed(t, cp)`` picks; survivors whose values were held by
        a purged entry get them re-written first; messages no survivor refers to go too."""
        if not any(doomed(t, cp) for cps in t.cps.values() for cp in cps.values()):
            return
        t = self._writer(t)  # (which checkpoints go is decided again if others wrote)
        gone = [cp for cps in t.cps.values() for cp in cps.values() if doomed(t, cp)]
        if not gone:
            return
        gone_entries = {cp.entry for cp in gone}
        for cp in gone:  # (a message carrying writes goes below, unless a survivor needs it)
            gone_entries.update(w[4] for w in cp.writes.values() if w[4] not in t.carriers)
            gone_entries.update(cp.blobs.values())
        survivors = [cp for cps in t.cps.values() for cp in cps.values() if not doomed(t, cp)]
        refs: set[str] = set()
        for cp in survivors:
            self._rehome(t, cp, gone_entries, refs)
            for w in cp.writes.values():
                collect_refs(w[2], refs)
        doomed_ids = set(gone_entries)
        for cp in gone:
            for rid in message_ids(t, cp):
                if rid not in refs:
                    doomed_ids.add(rid)
        t.session.purge(sorted(doomed_ids), dry_run=False)
        t.forget(gone_entries | {w[4] for cp in gone for w in cp.writes.values()})
        # a message object put again (one a purged write held) is written again, not referred to
        t.recent = {k: hit for k, hit in t.recent.items() if hit[1] not in doomed_ids}
        t.main_leaf = t.session.leaf_id

    def _rehome(self, t: ThreadIndex, cp: CheckpointInfo, gone: set[str], refs: set[str]) -> None:
        """Re-write what survivor ``cp`` keeps in a purged entry: its doc, when it is stored
        as a change to a purged checkpoint's, and values held or added to there."""
        doc = t.doc(cp)
        moved: dict[str, Any] = {}
        for ch, ver in doc["cv"].items():
            holder = t.holder(cp, ch, ver)
            if holder is None:
                continue
            deps = delta_chain(t, holder, ch)
            spec = t.data[holder]["b"][ch]
            if gone.intersection(deps):
                if spec[0] == "m":
                    ids = [eid for h in reversed(deps) for eid in delta_refs(t, h, ch)]
                    spec = ["l", ids]
                moved[ch] = spec
            for h in deps:
                collect_refs(t.data[h]["b"][ch], refs)
        base = cp.base
        lost_parent = "p" not in t.data[cp.entry] and base is not None and base.entry in gone
        keeps_doc = False  # its doc is rebuilt through a purged checkpoint's
        cur: CheckpointInfo | None = cp
        while cur is not None and not keeps_doc:
            keeps_doc = cur is not cp and cur.entry in gone
            if cur.doc is not None:  # whole here (a re-homed doc; gone too if its cp is)
                break
            cur = None if "f" in t.data[cur.entry] else cur.base
        if not moved and not keeps_doc and not lost_parent:
            return
        batch = Batch(cp.tail, {}, taken=t.taken)
        data_b: dict[str, Any] = {"cp": cp.id, "b": moved}
        if keeps_doc:
            data_b["doc"] = doc
        if lost_parent:  # the tree no longer says which checkpoint it was
            data_b["p"] = cp.parent
        if cp.ns:
            data_b["ns"] = cp.ns
        batch.custom(BLOBS, data_b)
        self._append(t, batch, main=False)

    # -- async -----------------------------------------------------------------------------------
    # The work is file or database I/O: it runs in a worker thread, never on the event loop.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(self._locked_list, config, filter, before, limit)
        for item in found:
            yield item

    def _locked_list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Tuples:
        with self._lock, bulk_load():
            return self._list(config, filter, before, limit)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)
