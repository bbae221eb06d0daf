"""The session row's per-append update with and without an index on ``modified``, side by side.

    .venv/bin/python bench/bench_pg_session_row.py [--appends 1500] [--rounds 8]

Two fresh schemas at the current migration; one gets back the index that migration 3 dropped
(``tl_sessions_modified``). One connection per schema, as ``threadline_app`` through row-level
security, runs threadline's append statement (``_APPEND_ONE``: the session-row UPDATE and the
record INSERT) on one session, alternating the schemas round by round, with a later
``modified`` on every append (as appends a few milliseconds apart have). Reports the server
backend's CPU per append (``/proc/<pid>/stat``, so the server must run on this machine) and how
many of the session-row updates PostgreSQL made HOT (from ``pg_stat_user_tables``).

A transaction held open elsewhere in the database (another client's long import) keeps the dead
row versions from being pruned; both sides then slow down, the indexed one far more.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import psycopg
from psycopg import sql

from threadline.model.entries import now
from threadline.store.postgres import _APPEND_ONE, upgrade

URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
TEXT = "message {i} of a benchmark run with a few words of text so that the row is realistic"
TICK = os.sysconf("SC_CLK_TCK")
VARIANTS = {
    "index on modified (schema 2)": (
        "CREATE INDEX tl_sessions_modified ON tl_sessions (tenant_id, modified DESC)"
    ),
    "no index (schema 3)": None,
}


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def params(sid: str, stamp: str, i: int) -> tuple[Any, ...]:
    eid, text = str(uuid.uuid4()), TEXT.format(i=i)
    line = (
        f'{{"type":"message","id":"{eid}","parent_id":"p","timestamp":"{stamp}",'
        f'"message":{{"role":"user","content":[{{"type":"text","text":{{"content":"{text}"'
        "}}]}}"
    )
    head = (1, stamp, 1, None, text, "bench", sid)
    return (*head, eid, "p", "message", stamp, "user", text, text, line.encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=1500, help="per side and round")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    sides: dict[str, tuple[Any, int, str]] = {}
    try:
        for k, (label, ddl) in enumerate(VARIANTS.items()):
            schema = f"benchrow_{os.getpid()}_{k}"
            upgrade(URL, schema)
            conn = psycopg.connect(URL, autocommit=True)
            sides[label] = (conn, 0, schema)
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            if ddl:
                conn.execute(ddl)
            conn.execute("SET synchronous_commit TO off")  # CPU, not the WAL flush
            # twenty sessions on the page, as a tenant has; the benchmark appends to one
            for n in range(20):
                conn.execute(
                    "INSERT INTO tl_sessions (tenant_id, session_id, header, created, modified) "
                    "VALUES ('bench', %s, %s, '', '')",
                    (f"s{n}", b"{" + b"x" * 300 + b"}"),
                )
            conn.execute("SET ROLE threadline_app")
            conn.execute("SELECT set_config('threadline.tenant', 'bench', false)")
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            sides[label] = (conn, pid, schema)
        spent = dict.fromkeys(VARIANTS, 0.0)
        for r in range(args.rounds):
            for label, (conn, pid, _schema) in sides.items():
                cur = conn.cursor()
                c0 = backend_cpu(pid)
                for i in range(args.appends):
                    # a later modified every time: the indexed column changes on every append
                    stamp = f"{now()}{r * args.appends + i:08d}"
                    cur.execute(_APPEND_ONE, params("s5", stamp, i), prepare=True).fetchall()
                spent[label] += backend_cpu(pid) - c0
        n = args.rounds * args.appends
        print(
            f"load average {os.getloadavg()[0]:.1f}; {n} appends a side, {args.rounds} "
            "alternated rounds; server CPU per append"
        )
        for label, (conn, _pid, schema) in sides.items():
            conn.execute("SELECT pg_stat_force_next_flush()")
            with psycopg.connect(URL, autocommit=True) as owner:
                upd, hot = owner.execute(
                    "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE "
                    "schemaname = %s AND relname = 'tl_sessions'",
                    (schema,),
                ).fetchone() or (0, 0)
            print(f"  {label:<30} {spent[label] / n * 1e6:6.0f} µs   HOT updates {hot}/{upd}")
    finally:
        with psycopg.connect(URL, autocommit=True) as owner:
            for conn, _pid, schema in sides.values():
                conn.close()
                owner.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
