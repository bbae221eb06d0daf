"""PostgreSQL sessions opened ``shared=True`` (issue 19): each append takes the session's lock
for its own transaction only, in one round trip, and places its entry under the session's latest
entry, whoever wrote it. Real server, real writers (threads and processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq, sql

import threadline as tl
from conftest import PG_URL, pg_schema
from test_postgres_shared import _waiting
from threadline.errors import NotFoundError, SessionLockedError, UserError
from threadline.model.content import Message, text
from threadline.model.entries import MessageEntry
from threadline.store import postgres
from threadline.store.base import summarize_records
from threadline.store.postgres import PostgresLog, PostgresStore

SRC = Path(__file__).resolve().parents[1] / "src"


def _log(s: tl.Session) -> PostgresLog:
    log = s.state.log
    assert isinstance(log, PostgresLog)
    return log


def _chain(st: tl.Store, sid: str) -> list[str]:
    """The texts of the session's messages (the type of other entries) in stored order, after
    checking that every entry's parent is the entry stored before it (one chain)."""
    entries = st.open(sid).entries()
    assert [e.parent_id for e in entries] == [None, *[e.id for e in entries[:-1]]]
    return [e.message.text if isinstance(e, MessageEntry) else e.type for e in entries]


def _stored(schema: str, sid: str) -> list[tuple[int, str, str | None, bytes]]:
    """seq, id, parent_id and raw of every record, as the owner reads them."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT seq, id, parent_id, raw FROM {}.tl_records WHERE session_id = %s "
                "ORDER BY seq"
            ).format(sql.Identifier(schema)),
            (sid,),
        ).fetchall()
    return [(r[0], r[1], r[2], bytes(r[3])) for r in rows]


def _session_row(schema: str, sid: str) -> tuple[int, bool, int, str | None]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT next_seq, open_tail, message_count, name FROM {}.tl_sessions WHERE "
                "session_id = %s"
            ).format(sql.Identifier(schema)),
            (sid,),
        ).fetchone()
    assert row is not None
    return row


def _traced(st: tl.Store, append: Any) -> list[list[str]]:
    """libpq's protocol trace (direction, length, message, fields) of what ``append`` sends and
    receives on the store's one writer connection (the store has max_writers=1)."""
    backend = st.backend
    assert isinstance(backend, PostgresStore)
    conn = backend.writer_connection()
    backend.writer_done(conn)  # max_writers=1: the append gets this one back
    with tempfile.TemporaryFile() as f:
        conn.pgconn.trace(f.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        append()
        conn.pgconn.untrace()
        f.seek(0)
        return [line.split("\t") for line in f.read().decode().splitlines()]


def test_a_shared_append_is_one_round_trip_and_keeps_no_lock() -> None:
    """libpq's trace of one shared append with no other writer about: one Bind of a prepared
    statement (the plain INSERT of the uncontended case) and one Sync, then the server's reply
    and nothing more (it commits synchronously: no flush to wait for); afterwards the session
    holds no lock: a writer with no lock_timeout takes it at once."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1, max_writers=1)
    try:
        sid = st.create().id
        s = st.open(sid, shared=True)
        s.append_message("user", "one")  # prepares the statements on the writer connection
        traced = _traced(st, lambda: s.append_message("user", "two"))
        first_reply = next(i for i, m in enumerate(traced) if m[0] == "B")
        sent = [m[2] for m in traced[:first_reply] if m[2] not in ("Describe", "Execute", "Flush")]
        assert sent == ["Bind", "Sync"]
        # no other writer about: the plain INSERT of _append_alone, not tl_append_at_leaf
        assert '"threadline_append_alone"' in traced[0][3]
        assert all(m[0] == "B" for m in traced[first_reply:])  # nothing sent after
        assert [m[2] for m in traced].count("ReadyForQuery") == 1
        assert s.state.writer is False
        other = st.open(sid)
        other.append_message("user", "three")  # lock_timeout 0: a held lock would refuse it
        other.close()
        assert _chain(st, sid) == ["one", "two", "three"]
    finally:
        st.close()


def test_a_shared_append_goes_under_what_other_writers_appended_meanwhile() -> None:
    """Two shared sessions opened on the same state: the second's append is placed under the
    first's entry, in the JSON as stored and in the session as it goes on; the session it
    holds reads exactly like a fresh open (entries, context, stored lines)."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        sid = st.create().id
        a = st.open(sid, shared=True)
        b = st.open(sid, shared=True)
        root = a.append_message("user", "from a")
        a.append_model_change("anthropic", "claude")
        reply = b.append_message("assistant", "from b, under a's entries")
        # b has not read a's entries yet: it does when it is next read, not in the append
        assert b._state.behind is True and b._state.pending_leaf == reply
        assert root not in b._state.slots
        ids = [r[1] for r in _stored(schema, sid)]
        parents = [r[2] for r in _stored(schema, sid)]
        assert ids[0] == root and ids[2] == reply
        assert parents == [None, root, ids[1]]
        assert b'"parent_id":"' + ids[1].encode() + b'"' in _stored(schema, sid)[2][3]
        assert b.leaf_id == reply
        fresh = st.open(sid)
        assert [e.id for e in b.entries()] == [e.id for e in fresh.entries()]
        assert b.raw_lines() == fresh.raw_lines() == [r[3] for r in _stored(schema, sid)]
        assert [m.text for m in b.context().messages] == ["from a", "from b, under a's entries"]
        assert b.context().model == fresh.context().model
        a.append_message("user", "a again")  # a had not seen b's entry either
        assert _chain(st, sid) == ["from a", "model_change", "from b, under a's entries", "a again"]
        assert [m.text for m in a.context().messages] == [
            "from a",
            "from b, under a's entries",
            "a again",
        ]
    finally:
        st.close()


def _listed(st: tl.Store, sid: str) -> tuple[Any, ...]:
    """The listing's row and the summary, checked equal to the summary of every entry."""
    s = st.open(sid)
    want = summarize_records(s.header, s.entries())
    for got in (st.list()[0], st.backend.summary(sid)):
        assert (got.name, got.message_count, got.first_message, got.modified) == (
            want.name,
            want.message_count,
            want.first_message,
            want.modified,
        )
    return (want.name, want.message_count, want.first_message)


def test_a_shared_session_keeps_the_listing_exact_and_its_open_tail_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shared appends leave their records in the session row's open tail (the listing adds
    them); once FOLD_RECORDS are there, the next append of the writer told so folds them, and
    a writer that closes instead folds them as it closes. The listing is exact throughout."""
    monkeypatch.setattr(postgres, "FOLD_RECORDS", 8)
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        sid = st.create().id
        a = st.open(sid, shared=True)
        b = st.open(sid, shared=True)
        a.append_session_info("shared chat")
        assert _session_row(schema, sid) == (1, True, 0, None)  # one record in the tail
        assert _listed(st, sid) == ("shared chat", 0, None)
        for i in range(20):
            (a if i % 3 else b).append_message("user", f"m{i}")
            next_seq, open_tail, _count, _name = _session_row(schema, sid)
            assert open_tail is True
            # the writer told to fold does so with its next append, at most two later here
            assert 2 + i - next_seq <= 8 + 2
            assert _listed(st, sid) == ("shared chat", i + 1, "m0")
        assert _session_row(schema, sid)[0] > 8  # folded at least twice
        # a writer told to fold that closes instead folds as it closes
        c = st.open(sid, shared=True)
        for i in range(20, 40):
            c.append_message("user", f"m{i}")
            if c.state.log._carry is not None:  # type: ignore[attr-defined]
                break
        folded_to = c.state.log._carry[1]  # type: ignore[attr-defined]
        c.close()
        assert _session_row(schema, sid)[0] == folded_to + 1
        assert _listed(st, sid)[:2] == ("shared chat", i + 1)
    finally:
        st.close()


def test_a_shared_writer_alone_folds_its_tail_in_the_append_that_fills_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One shared writer with no other writer about (appending and closing, as a shared writer
    does): the append that makes the open tail FOLD_RECORDS long folds it in its own
    transaction, one round trip (Bind, Sync), and nothing is left to fold at close; the
    listing is exact after every append. (The first tail holds the record that opened it,
    written by tl_append_at_leaf: its fold is carried and done at close.)"""
    monkeypatch.setattr(postgres, "FOLD_RECORDS", 8)
    carried: list[Any] = []
    real = PostgresLog._fold_carried
    monkeypatch.setattr(
        PostgresLog, "_fold_carried", lambda log, c: (carried.append(c), real(log, c))
    )
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1, max_writers=1)
    try:
        sid = st.create().id
        s = st.open(sid, shared=True)
        s.append_session_info("alone")  # opens the tail: record 1
        s.close()
        nexts = []
        for i in range(30):
            if i == 14:  # seq 16: the tail (9-16) is 8 records long, all of them this writer's
                traced = _traced(st, lambda: s.append_message("user", "m14"))
                first_reply = next(k for k, m in enumerate(traced) if m[0] == "B")
                sent = [m[2] for m in traced[:first_reply] if m[2] in ("Bind", "Sync")]
                assert sent == ["Bind", "Sync"]
                assert all(m[0] == "B" for m in traced[first_reply:])
            else:
                s.append_message("user", f"m{i}")
            assert (_log(s)._carry is None) == (i != 6)
            s.close()
            nexts.append(_session_row(schema, sid)[0])
            assert _listed(st, sid) == ("alone", i + 1, "m0")
        # records 2..31: the one that makes the tail 8 long (seq 8) carries its fold to the
        # close, then every eighth (16, 24) folds in its own call
        assert nexts == [1] * 6 + [9] * 8 + [17] * 8 + [25] * 8
        assert [c[:2] for c in carried] == [(1, 8)]
    finally:
        st.close()


def test_a_fold_in_the_append_applies_only_where_the_tail_still_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The append that would fold the tail it wrote alone folds nothing when the session row's
    tail moved meanwhile (another writer folded part of it): its records are counted once, and
    the fold is carried from where the tail now starts."""
    monkeypatch.setattr(postgres, "FOLD_RECORDS", 8)
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1, max_writers=1)
    try:
        sid = st.create().id
        s = st.open(sid, shared=True)
        s.append_session_info("moved")  # opens the tail (tl_append_at_leaf)
        for i in range(7):  # records 2-8: the eighth carries the fold of 1-8, done at close
            s.append_message("user", f"m{i}")
        s.close()
        for i in range(7, 14):  # records 9-15, this writer's alone
            s.append_message("user", f"m{i}")
        assert _log(s)._tail_from == 9 and _session_row(schema, sid)[:3] == (9, True, 7)
        # another writer folds records 9-11 (m7-m9) meanwhile
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {}.tl_sessions SET next_seq = 12, message_count = 10 "
                    "WHERE session_id = %s"
                ).format(sql.Identifier(schema)),
                (sid,),
            )
        s.append_message("user", "m14")  # seq 16: a fold from 9 was due; the tail starts at 12
        assert _session_row(schema, sid)[:3] == (12, True, 10)
        assert _listed(st, sid) == ("moved", 15, "m0")
        for i in range(15, 18):  # seq 19 makes the tail 12-19 eight long: read and carried
            s.append_message("user", f"m{i}")
        assert _log(s)._carry is not None and _log(s)._carry[:2] == (12, 19)
        s.close()
        assert _session_row(schema, sid)[:3] == (20, True, 18)
        assert _listed(st, sid) == ("moved", 18, "m0")
    finally:
        st.close()


def test_a_shared_append_after_a_leaf_move_or_a_meta_record_takes_the_lock() -> None:
    """When the session's last record is not a tree entry (a leaf move, a tag), the latest
    entry is not the leaf: the append takes the lock, reads what was written and goes under
    the leaf those records set, as any writer's append would."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        sid = st.create().id
        a = st.open(sid, shared=True)
        b = st.open(sid, shared=True)
        first = a.append_message("user", "first")
        a.append_message("assistant", "second")
        a.branch(first)  # a leaf record: the leaf is "first" again
        reply = b.append_message("user", "on a branch")
        assert b.entry(reply).parent_id == first
        assert st.open(sid).entry(reply).parent_id == first
        assert b.state.writer is False  # the lock was taken for that write only
        other = st.open(sid)
        other.append_message("user", "no lock held")  # lock_timeout 0
        other.close()
    finally:
        st.close()


def test_a_shared_append_waits_for_a_writer_holding_the_lock_and_refuses_after_the_timeout() -> (
    None
):
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)  # lock_timeout 0
    try:
        holder = st.create()
        holder.append_message("user", "held")  # an ordinary session keeps the lock
        s = st.open(holder.id, shared=True)
        t0 = time.monotonic()
        with pytest.raises(SessionLockedError) as err:
            s.append_message("user", "refused")
        assert time.monotonic() - t0 >= 0.2  # the grace of a writer that just died
        assert str(os.getpid()) in str(err.value)  # names the holder
        assert [r[1] for r in _stored(schema, holder.id)] == [holder.leaf_id]
        holder.close()
        s.append_message("user", "now")
        assert _chain(st, holder.id) == ["held", "now"]
    finally:
        st.close()


def test_a_shared_append_that_waited_is_acknowledged_only_after_the_wal_flush() -> None:
    """A shared append that waited for the lock commits with synchronous_commit off and waits
    for the flush in the pipeline's next transaction: when append returns, the server's flush
    position is past the WAL position read after its commit. Without the barrier the WAL
    writer's 200 ms lag would leave it behind."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2, lock_timeout=10.0)
    try:
        holder = st.create()
        waiter = st.open(holder.id, shared=True)
        key = _log(waiter)._key
        with psycopg.connect(PG_URL, autocommit=True) as other:
            for i in range(5):
                holder.append_message("user", f"held {i}")  # keeps the lock
                thread = threading.Thread(target=waiter.append_message, args=("user", f"w {i}"))
                thread.start()
                _waiting(other, key, 1)
                holder.close()
                thread.join()
                row = other.execute(
                    "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn",
                    (_log(waiter).handed_on_lsn,),
                ).fetchone()
                assert row == (True,)
        assert _chain(st, holder.id) == [t for i in range(5) for t in (f"held {i}", f"w {i}")]
    finally:
        st.close()


def test_sixteen_shared_writers_keep_every_acknowledged_entry_once_in_one_chain() -> None:
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=2, lock_timeout=30.0)
    try:
        sid = st.create().id
        acked: list[list[str]] = [[] for _ in range(16)]
        texts: list[list[str]] = [[] for _ in range(16)]
        errors: list[BaseException] = []

        def writer(k: int) -> None:
            try:
                s = st.open(sid, shared=True)
                for i in range(15):
                    text = f"{k}-{i}"
                    acked[k].append(s.append_message("user", text))
                    texts[k].append(text)
                    if i % 5 == 4:
                        s.close()  # nothing to give back; the session goes on
                    # read, the session is the stored one (its entry and whatever followed)
                    path = [e.id for e in s.path()]
                    assert acked[k][-1] in path
                    assert path == [e.id for e in s.entries()][: len(path)]
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        stored = [e.id for e in st.open(sid).entries()]
        assert sorted(stored) == sorted(i for a in acked for i in a)  # each exactly once
        order = _chain(st, sid)
        for k in range(16):
            assert [t for t in order if t.startswith(f"{k}-")] == texts[k]
        assert _listed(st, sid)[1] == 240
    finally:
        st.close()


WRITER = """
import sys, threadline as tl
st = tl.open_store(sys.argv[1], tenant="t", schema=sys.argv[2], max_size=1, lock_timeout=30.0)
s = st.open(sys.argv[3], shared=True)
with open(sys.argv[4], "a", buffering=1) as out:
    for i in range(int(sys.argv[5])):
        eid = s.append_message("user", f"{sys.argv[6]}-{i}")
        out.write(eid + "\\n")  # acknowledged: written only after append_message returned
"""


def test_a_shared_writer_killed_mid_loop_loses_nothing_acknowledged(tmp_path: Path) -> None:
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        sid = st.create().id
        env = {**os.environ, "PYTHONPATH": str(SRC)}

        def spawn(name: str, count: int) -> tuple[subprocess.Popen[bytes], Path]:
            out = tmp_path / f"{name}.acked"
            cmd = [sys.executable, "-c", WRITER, PG_URL, schema, sid, str(out), str(count), name]
            return subprocess.Popen(cmd, env=env), out

        victim, victim_out = spawn("victim", 100_000)
        survivor, survivor_out = spawn("survivor", 200)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not victim_out.exists() or len(victim_out.read_text().splitlines()) < 40
        ):
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        assert survivor.wait(timeout=60) == 0
        victim_acked = victim_out.read_text().split()
        acked = victim_acked + survivor_out.read_text().split()
        assert len(victim_acked) >= 40
        stored = [e.id for e in st.open(sid).entries()]
        assert len(stored) == len(set(stored))
        assert set(acked) <= set(stored)
        assert len(set(stored) - set(acked)) <= 1  # the one in flight at the kill, at most
        texts = _chain(st, sid)
        assert [t for t in texts if t.startswith("survivor-")] == [
            f"survivor-{i}" for i in range(200)
        ]
        assert _listed(st, sid)[1] == len(stored)
    finally:
        st.close()


KILLED = """
import sys, time
import threadline as tl
st = tl.open_store(sys.argv[1], tenant="t", schema=sys.argv[2], max_size=1)
s = st.open(sys.argv[3])
for i in range(4):
    s.append_message("user", f"unfolded {i}")
print("ready", flush=True)
time.sleep(60)
"""


def test_shared_appends_after_a_killed_writer_fold_its_tail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer killed without closing leaves records the session row does not count (an
    open tail). Shared appends fold them with their own once the tail is long enough."""
    monkeypatch.setattr(postgres, "FOLD_RECORDS", 8)
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2, lock_timeout=5.0)
    try:
        sid = st.create().id
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED, PG_URL, schema, sid],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SRC)},
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        assert _session_row(schema, sid)[:2] == (3, True)  # two records left unfolded
        s = st.open(sid, shared=True)
        for i in range(10):
            s.append_message("user", f"shared {i}")
            assert _listed(st, sid)[1] == 5 + i
        assert _session_row(schema, sid)[0] > 3  # the dead writer's records were folded
        assert _chain(st, sid) == [
            *(f"unfolded {i}" for i in range(4)),
            *(f"shared {i}" for i in range(10)),
        ]
    finally:
        st.close()


def test_a_shared_append_to_a_deleted_or_read_only_session_is_refused() -> None:
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        sid = st.create().id
        ro = st.open(sid, read_only=True, shared=True)
        with pytest.raises(UserError, match="read-only"):
            ro.append_message("user", "no")
        s = st.open(sid, shared=True)
        s.append_message("user", "kept")
        st.delete(sid)
        with pytest.raises(NotFoundError):
            s.append_message("user", "gone")
        assert _stored(schema, sid) == []
    finally:
        st.close()


def test_a_shared_append_after_another_writer_rewrote_the_session_takes_the_lock() -> None:
    """A purge rewrites the session (its generation moves on): the shared append statement
    inserts nothing against the old reading, and the session's write takes the lock."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        sid = st.create().id
        a = st.open(sid)
        secret = a.append_message("user", "secret")
        a.append_message("assistant", "ok")
        s = st.open(sid, shared=True)
        log = _log(s)
        a.purge([secret], dry_run=False)
        a.close()
        before = _stored(schema, sid)
        rec, line = s.state.new_record("message", _message("probe"), s.leaf_id)
        assert log.append_at_leaf(line, rec, s.leaf_id) is None
        assert _stored(schema, sid) == before  # nothing inserted
        s.append_message("user", "after the purge")  # through the lock
        fresh = st.open(sid)
        assert [e.id for e in fresh.entries()][-1] == s.leaf_id
        assert fresh.entry(secret).type == "message"  # purged: its place kept
        assert [m.text for m in fresh.context().messages] == ["ok", "after the purge"]
    finally:
        st.close()


def _message(words: str) -> Message:
    return Message(role="user", content=[text(words)])


def test_other_stores_take_the_lock_for_each_shared_write(tmp_path: Path) -> None:
    """JSONL has no shared append statement: a shared session takes the lock for each write
    and gives it back, so a second writer is never refused between writes."""
    st = tl.open_store(tmp_path)
    sid = st.create().id
    a = st.open(sid, shared=True)
    b = st.open(sid, shared=True)
    a.append_message("user", "a")
    b.append_message("user", "b")
    a.append_message("user", "a again")
    assert not a.state.writer and not b.state.writer
    assert [m.text for m in a.context().messages] == ["a", "b", "a again"]
    assert _chain(st, sid) == ["a", "b", "a again"]


def test_the_plain_insert_gives_way_when_the_tail_was_closed_or_another_writer_appended() -> None:
    """The uncontended shared append (a plain INSERT) inserts nothing when the session row's
    tail is closed (an ordinary writer folded it at close) or when another writer appended the
    number it would take: ``tl_append_at_leaf`` then appends, and the listing counts it."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1, max_writers=1)
    try:
        writer = st.create()
        for i in range(3):
            writer.append_message("user", f"w{i}")
        writer.close()  # folds: the tail is closed
        assert _session_row(schema, writer.id)[:2] == (4, False)
        s = st.open(writer.id, shared=True)

        def statements(append: Any) -> list[str]:
            traced = _traced(st, append)
            names = [
                name
                for m in traced
                if m[0] == "F" and m[2] == "Bind"
                for name in ("threadline_append_alone", "threadline_append_at_leaf")
                if f'"{name}"' in m[3]
            ]
            # a statement the connection did not know yet is bound again once prepared
            return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]

        assert statements(lambda: s.append_message("user", "s0")) == [
            "threadline_append_alone",
            "threadline_append_at_leaf",
        ]
        assert _session_row(schema, writer.id)[:2] == (4, True)  # the tail is open again
        assert statements(lambda: s.append_message("user", "s1")) == ["threadline_append_alone"]
        other = st.open(writer.id, shared=True)
        other.append_message("user", "other")
        # s's number is taken: the INSERT gives way, the function places it after "other"
        assert statements(lambda: s.append_message("user", "s2")) == [
            "threadline_append_alone",
            "threadline_append_at_leaf",
        ]
        assert _chain(st, writer.id) == ["w0", "w1", "w2", "s0", "s1", "other", "s2"]
        assert _listed(st, writer.id)[1] == 7
    finally:
        st.close()


def test_a_pipelined_shared_append_refused_by_the_lock_timeout_writes_nothing() -> None:
    """After an append that waited, the next one sends the flush barrier in the same pipeline.
    When that one times out in the lock queue it is refused (SessionLockedError, nothing
    written, the connection usable) and the next append goes through."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    other = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2, lock_timeout=1.0)
    try:
        holder = st.create()
        waiter = other.open(holder.id, shared=True)
        key = _log(waiter)._key
        holder.append_message("user", "held")  # keeps the lock
        thread = threading.Thread(target=waiter.append_message, args=("user", "waited"))
        thread.start()
        with psycopg.connect(PG_URL, autocommit=True) as watch:
            _waiting(watch, key, 1)
        holder.close()
        thread.join()
        assert _log(waiter)._waited is True  # its next append pipelines the barrier
        holder.append_message("user", "held again")  # takes the lock again and keeps it
        before = _stored(schema, holder.id)
        with pytest.raises(SessionLockedError):
            waiter.append_message("user", "refused")
        assert _stored(schema, holder.id) == before
        holder.close()
        waiter.append_message("user", "after")
        assert _chain(st, holder.id) == ["held", "waited", "held again", "after"]
    finally:
        other.close()
        st.close()
