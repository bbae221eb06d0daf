"""Where a PostgreSQL append spends its time: client and server CPU per append, side by side.

    .venv/bin/python bench/bench_pg_cpu.py [--durability fsync|flush] [--appends 3000]

One process alternates (6 rounds) threadline's ``Session.append_message`` with a raw prepared
single-row ``INSERT`` into the same ``tl_records`` table (same indexes, the keyword index's
``tsvector`` among them, same ``synchronous_commit``) and, as a third side, a session opened
``shared=True`` (its own store) appending and closing after each append as bench_pg_writers.py's
shared writers do (``tl_append_alone``, schema version 7, while no other writer is about). It
reports per append: the client's CPU (``time.process_time``), the server backend's CPU
(``utime + stime`` of the backend process in ``/proc``, so the server must run on this
machine), and the wall time. Then the server CPU of the statement's parts on their own: the
folding append's CTE (schema version 5: a writer's append is a plain INSERT, and every
FOLD_RECORDS-th of them this CTE), the bare INSERT through row-level security (the raw side's
row, whose ``body`` holds the text, and the row threadline stores, whose ``body`` is ``''`` so
that the keyword index reads the text from the JSON), the session-row UPDATE, and ``SELECT 1``
(the cost of any round trip). With many writers on few cores the CPU total, not the wall time,
decides the throughput.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import psycopg
from psycopg import sql

import threadline as tl
from threadline.model.entries import now
from threadline.store.postgres import _APPEND_ONE, upgrade

URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
TEXT = "message {i} of a benchmark run with a few words of text so that the row is realistic"
TICK = os.sysconf("SC_CLK_TCK")
INSERT = (
    "INSERT INTO tl_records (tenant_id, session_id, seq, id, parent_id, type, timestamp, role, "
    "body, etext, raw) VALUES (%s, %s, %s, %s, %s, 'message', %s, 'user', %s, %s, %s)"
)


def row(tenant: str, sid: str, seq: int, parent: str, text: str) -> tuple[Any, ...]:
    """The row threadline stores for one message: the same columns and the same JSON line."""
    eid, stamp = str(uuid.uuid4()), now()
    line = (
        f'{{"type":"message","id":"{eid}","parent_id":"{parent}","timestamp":"{stamp}",'
        f'"message":{{"role":"user","content":[{{"type":"text","text":{{"content":"{text}"'
        "}}]}}"
    )
    # etext NULL: the text to embed is the body's (schema version 4)
    return (tenant, sid, seq, eid, parent, stamp, text, None, line.encode())


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--durability", choices=("fsync", "flush"), default="fsync")
    ap.add_argument("--appends", type=int, default=3000)
    args = ap.parse_args()
    schema = f"benchcpu_{os.getpid()}"
    upgrade(URL, schema)
    per = args.appends // 6
    try:
        st = tl.open_store(
            URL, tenant="bench", schema=schema, max_size=1, durability=args.durability
        )
        s = st.create()
        s.append_message("user", "warm-up")  # takes the writer lock
        writer: Any = s.state.log._conn  # type: ignore[attr-defined]
        tl_pid = writer.execute("SELECT pg_backend_pid()").fetchone()[0]
        shared_store = tl.open_store(
            URL,
            tenant="bench",
            schema=schema,
            max_size=1,
            max_writers=1,
            durability=args.durability,
        )
        sid = shared_store.create().id
        shared = shared_store.open(sid, shared=True)
        shared.append_message("user", "warm-up")
        shared.close()
        backend: Any = shared_store.backend
        pooled = backend.writer_connection()  # max_writers=1: the one its appends take
        shared_pid = pooled.execute("SELECT pg_backend_pid()").fetchone()[0]
        backend.writer_done(pooled)
        conn = psycopg.connect(URL, autocommit=True)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        off = args.durability == "flush"
        conn.execute("SET synchronous_commit TO " + ("off" if off else "on"))
        conn.execute(
            "INSERT INTO tl_sessions (tenant_id, session_id, header, created, modified) "
            "VALUES ('raw', 'raw', '\\x7b7d', '', '')"
        )
        # as the application role, through the row-level security policies (as threadline)
        conn.execute("SET ROLE threadline_app")
        conn.execute("SELECT set_config('threadline.tenant', 'raw', false)")
        raw_pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        cur = conn.cursor()  # reused, as threadline's writer reuses its cursor
        seq = [0]

        def raw(i: int) -> None:
            seq[0] += 1
            cur.execute(INSERT, row("raw", "raw", seq[0], "p", TEXT.format(i=i)), prepare=True)

        def ours(i: int) -> None:
            s.append_message("user", TEXT.format(i=i))

        def ours_shared(i: int) -> None:
            shared.append_message("user", TEXT.format(i=i))
            shared.close()

        sides: list[tuple[str, Callable[[int], None], int]] = [
            ("threadline", ours, tl_pid),
            ("shared", ours_shared, shared_pid),
            ("raw INSERT", raw, raw_pid),
        ]
        totals = {name: [0.0, 0.0, 0.0] for name, _, _ in sides}
        for _ in range(6):
            for name, fn, pid in sides:
                c0, s0, w0 = time.process_time(), backend_cpu(pid), time.perf_counter()
                for i in range(per):
                    fn(i)
                t = totals[name]
                t[0] += time.process_time() - c0
                t[1] += backend_cpu(pid) - s0
                t[2] += time.perf_counter() - w0
        n = per * 6
        print(
            f"load average {os.getloadavg()[0]:.1f}; durability {args.durability}; "
            f"{n} appends a side, 6 alternated rounds (µs per append)"
        )
        print(f"  {'':<12} {'client CPU':>10} {'server CPU':>10} {'CPU total':>10} {'wall':>8}")
        for name, (c, sv, w) in totals.items():
            print(
                f"  {name:<12} {c / n * 1e6:10.0f} {sv / n * 1e6:10.0f} "
                f"{(c + sv) / n * 1e6:10.0f} {w / n * 1e6:8.0f}"
            )
        s.close()
        st.close()
        shared_store.close()
        # the parts of the append statement, server CPU only, as threadline_app under RLS
        st = tl.open_store(URL, tenant="bench", schema=schema, max_size=1)
        sids = [st.create().id for _ in range(5)]
        st.close()
        conn.execute("SELECT set_config('threadline.tenant', 'bench', false)")

        def cte(sid: str, i: int) -> None:
            seq[0] += 1
            r = row("bench", sid, seq[0], "p", TEXT.format(i=i))
            # the fold that a writer's append makes every FOLD_RECORDS appends (schema 5)
            params = (seq[0] + 1, now(), 1, None, r[6], True, "bench", sid, seq[0], r[3], r[4])
            params += ("message", r[5], "user", r[6], r[7], r[8])
            conn.execute(_APPEND_ONE, params, prepare=True)

        def insert(sid: str, i: int) -> None:
            seq[0] += 1
            conn.execute(INSERT, row("bench", sid, seq[0], "p", TEXT.format(i=i)), prepare=True)

        def insert_lean(sid: str, i: int) -> None:
            seq[0] += 1
            r = row("bench", sid, seq[0], "p", TEXT.format(i=i))
            # body '' as threadline stores a message of text blocks: tl_body reads the JSON
            conn.execute(INSERT, (*r[:6], "", *r[7:]), prepare=True)

        def update(sid: str, i: int) -> None:
            conn.execute(
                "UPDATE tl_sessions SET next_seq = next_seq + 1, modified = greatest(modified, "
                "%s), message_count = message_count + 1 WHERE tenant_id = 'bench' AND "
                "session_id = %s",
                (now(), sid),
                prepare=True,
            )

        def select1(sid: str, i: int) -> None:
            conn.execute("SELECT 1", prepare=True)

        parts: list[tuple[str, Callable[[str, int], None]]] = [
            ("folding append (UPDATE session row + INSERT)", cte),
            ("INSERT alone (the raw side's statement)", insert),
            ("INSERT, body '' (the text read from raw)", insert_lean),
            ("session-row UPDATE alone", update),
            ("SELECT 1 (a round trip)", select1),
        ]
        spent = dict.fromkeys((p for p, _ in parts), 0.0)
        for _ in range(3):
            for (label, fn), sid in zip(parts, sids, strict=True):
                s0 = backend_cpu(raw_pid)
                for i in range(per):
                    fn(sid, i)
                spent[label] += backend_cpu(raw_pid) - s0
        print("  server CPU of the parts (synchronous_commit as above):")
        for label, v in spent.items():
            print(f"    {label:<44} {v / (per * 3) * 1e6:6.0f}")
        conn.close()
    finally:
        with psycopg.connect(URL, autocommit=True) as c:
            c.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
