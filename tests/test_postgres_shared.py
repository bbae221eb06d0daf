"""PostgreSQL writers of one shared session: a writer that waited for the lock hands it on after
its append and waits for the WAL flush outside it (issue 19). The server is never stopped here
(other engineers use it); a killed client and the server's own WAL positions stand in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import threadline as tl
from conftest import PG_URL, pg_schema
from threadline.store.postgres import PostgresLog, PostgresStore


def _log(s: tl.Session) -> PostgresLog:
    log = s.state.log
    assert isinstance(log, PostgresLog)
    return log


def _waiting(conn: Any, key: str, count: int) -> None:
    """Return once ``count`` sessions wait in the server's queue for the lock of ``key``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND "
            "((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)",
            (key,),
        ).fetchone()
        if row[0] >= count:
            return
        time.sleep(0.005)
    raise AssertionError(f"{count} writer(s) never queued for the lock")


def _chain(st: tl.Store, sid: str) -> list[str]:
    """The texts of the session in stored order, after checking that every entry's parent is
    the entry stored before it (one chain: no two entries share a parent)."""
    entries = st.open(sid).entries()
    parents = [e.parent_id for e in entries]
    assert parents == [None, *[e.id for e in entries[:-1]]]
    return [e.message.text for e in entries]  # type: ignore[union-attr]


def test_a_writer_that_waited_returns_only_once_the_wal_is_flushed_past_its_append() -> None:
    """Its append commits with synchronous_commit off; it is acknowledged only after the
    barrier, so the server's flush position (read from another connection) is already past
    the WAL position taken after the append's commit. Without the barrier the flush lags it
    (the WAL writer runs every 200 ms), so five appends in a row would not all pass."""
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=2, lock_timeout=10.0)
    try:
        holder = st.create()
        waiter = st.open(holder.id)
        key = _log(waiter)._key
        with psycopg.connect(PG_URL, autocommit=True) as other:
            for i in range(5):
                holder.append_message("user", f"held {i}")  # takes the free lock: keeps it
                thread = threading.Thread(target=waiter.append_message, args=("user", f"w {i}"))
                thread.start()
                _waiting(other, key, 1)
                holder.close()
                thread.join()
                log = _log(waiter)
                assert (log.let_go, log._conn) == (True, None)  # handed on, connection back
                row = other.execute(
                    "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (log.handed_on_lsn,)
                ).fetchone()
                assert row == (True,)
        assert _chain(st, holder.id) == [t for i in range(5) for t in (f"held {i}", f"w {i}")]
        waiter.close()
    finally:
        st.close()


def test_the_lock_is_free_while_the_writer_that_waited_waits_for_its_flush() -> None:
    """The waiting writer's connection delays its WAL flushes by 100 ms (commit_delay, set as
    the superuser on that connection only). A probe queued behind it gets the lock, sees its
    entry, and finds its backend still inside the barrier transaction (an xid, not yet
    committed): the lock went before the flush."""
    schema = pg_schema()
    st = tl.open_store(
        PG_URL, tenant="t", schema=schema, max_size=1, max_writers=1, lock_timeout=10.0
    )
    other_store = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        backend = st.backend
        assert isinstance(backend, PostgresStore)
        conn = backend.writer_connection()  # max_writers=1: the waiter's acquire gets it back
        conn.execute("RESET ROLE")
        conn.execute("SET commit_delay = 100000")  # µs, the most the server allows
        conn.execute("SET commit_siblings = 0")
        conn.execute("SET ROLE threadline_app")
        slow_pid = conn.info.backend_pid
        backend.writer_done(conn)
        holder = other_store.create()
        holder.append_message("user", "first")
        w = st.open(holder.id)
        key = _log(w)._key
        seen: dict[str, Any] = {}
        with (
            psycopg.connect(PG_URL, autocommit=True) as watch,
            psycopg.connect(PG_URL, autocommit=True) as probe,
        ):
            probe.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            thread = threading.Thread(target=w.append_message, args=("user", "second"))
            thread.start()
            _waiting(watch, key, 1)

            def take() -> None:
                probe.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
                seen["returned"] = not thread.is_alive()
                seen["barrier"] = probe.execute(
                    "SELECT backend_xid IS NOT NULL, query FROM pg_stat_activity WHERE pid = %s",
                    (slow_pid,),
                ).fetchone()
                seen["rows"] = probe.execute(
                    "SELECT count(*) FROM tl_records WHERE session_id = %s", (holder.id,)
                ).fetchone()[0]

            prober = threading.Thread(target=take)
            prober.start()
            _waiting(watch, key, 2)  # the probe queues behind the waiting writer
            holder.close()
            thread.join()
            prober.join()
            probe.execute("SELECT pg_advisory_unlock_all()")
        assert seen["returned"] is False
        assert seen["barrier"][0] is True
        assert "pg_logical_emit_message" in seen["barrier"][1]
        assert seen["rows"] == 2  # visible before durable, as any asynchronous commit
        assert _chain(st, holder.id) == ["first", "second"]
        w.close()
    finally:
        other_store.close()
        st.close()


def test_sixteen_writers_of_one_session_keep_every_acknowledged_entry_once_in_one_chain() -> None:
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=2, lock_timeout=30.0)
    try:
        sid = st.create().id
        acked: list[list[str]] = [[] for _ in range(16)]
        texts: list[list[str]] = [[] for _ in range(16)]
        handed_on = [0] * 16
        errors: list[BaseException] = []

        def writer(k: int) -> None:
            try:
                s = st.open(sid)
                for i in range(12):
                    text = f"{k}-{i}"
                    acked[k].append(s.append_message("user", text))
                    texts[k].append(text)
                    handed_on[k] += _log(s).let_go
                    if i % 3 != 2:  # mostly append-and-close; sometimes keep the session
                        s.close()
                s.close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        stored = st.open(sid).entries()
        ids = [e.id for e in stored]
        assert sorted(ids) == sorted(i for a in acked for i in a)  # each exactly once
        order = _chain(st, sid)
        for k in range(16):  # each writer's own entries in the order it wrote them
            assert [t for t in order if t.startswith(f"{k}-")] == texts[k]
        assert sum(handed_on) > 0  # the writers did queue for the lock and hand it on
    finally:
        st.close()


WRITER = """
import sys, threadline as tl
st = tl.open_store(sys.argv[1], tenant="t", schema=sys.argv[2], max_size=1, lock_timeout=30.0)
s = st.open(sys.argv[3])
with open(sys.argv[4], "a", buffering=1) as out:
    for i in range(int(sys.argv[5])):
        eid = s.append_message("user", f"{sys.argv[6]}-{i}")
        out.write(eid + "\\n")  # acknowledged: written only after append_message returned
        s.close()
"""


def test_a_writer_killed_mid_loop_loses_nothing_it_acknowledged(tmp_path: Path) -> None:
    """Two writer processes append to one session (each append then close, so the lock moves
    between them and every append of a writer that waited is handed on); one is SIGKILLed
    mid-loop. Everything either acknowledged is stored once, in one chain, and the survivor
    finishes: the killed writer's lock went with its connection."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        sid = st.create().id
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

        def spawn(name: str, count: int) -> tuple[subprocess.Popen[bytes], Path]:
            out = tmp_path / f"{name}.acked"
            cmd = [sys.executable, "-c", WRITER, PG_URL, schema, sid, str(out), str(count), name]
            return subprocess.Popen(cmd, env=env), out

        victim, victim_out = spawn("victim", 100_000)
        survivor, survivor_out = spawn("survivor", 150)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not victim_out.exists() or len(victim_out.read_text().splitlines()) < 40
        ):
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        assert survivor.wait(timeout=60) == 0
        acked = victim_out.read_text().split() + survivor_out.read_text().split()
        assert len(victim_out.read_text().split()) >= 40
        assert len(survivor_out.read_text().split()) == 150
        stored = [e.id for e in st.open(sid).entries()]
        assert len(stored) == len(set(stored))
        assert set(acked) <= set(stored)
        # at most the one append in flight when the kill came is stored unacknowledged
        assert len(set(stored) - set(acked)) <= 1
        texts = _chain(st, sid)
        assert [t for t in texts if t.startswith("survivor-")] == [
            f"survivor-{i}" for i in range(150)
        ]
    finally:
        st.close()


def test_a_handed_on_writer_appends_records_under_the_leaf_another_writer_moved() -> None:
    """``Session.append`` and the adapters' chains take the lock (and read what others wrote)
    before they read the leaf: after a hand-on the session's own leaf is stale."""
    from threadline.integrations._common import append_chain
    from threadline.model.content import Message, text

    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=2, lock_timeout=10.0)
    try:
        holder = st.create()
        waiter = st.open(holder.id)
        key = _log(waiter)._key
        holder.append_message("user", "one")
        with psycopg.connect(PG_URL, autocommit=True) as other:
            thread = threading.Thread(
                target=waiter.append, args=({"type": "message", "message": _msg("two")},)
            )
            thread.start()
            _waiting(other, key, 1)
            holder.close()
            thread.join()
        assert _log(waiter).let_go
        holder.append_message("user", "three")  # under "two"; the waiter has not seen it
        holder.close()
        waiter.append({"type": "message", "message": _msg("four")})
        waiter.close()
        holder.append_message("user", "five")
        holder.close()
        append_chain(waiter, [Message(role="user", content=[text(t)]) for t in ("six", "seven")])
        waiter.close()
        assert _chain(st, holder.id) == ["one", "two", "three", "four", "five", "six", "seven"]
    finally:
        st.close()


def _msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": {"content": text}}]}
