"""PostgreSQL store benchmarks: concurrent writers, and catalog listing of many sessions.

    .venv/bin/python bench/bench_postgres.py [--writers 8] [--appends 300] [--sessions 10000]

1. ``--writers`` processes, each with its own store (own pool) and its own session, append
   ``--appends`` messages as fast as they can (``durability="fsync"``: synchronous commit).
   Reports total appends per second and the p50/p99 latency of one append.
2. Creates ``--sessions`` sessions of 3 messages each and times ``store.list()`` and
   ``store.catalog.sessions()`` (listing with tags) on the PostgreSQL and the SQLite store.

Each run uses a fresh schema (``bench_<pid>``) in the ``test`` database, dropped at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def writer(schema: str, appends: int, start: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import threadline as tl

    st = tl.open_store(URL, tenant=f"tenant{os.getpid() % 3}", schema=schema, max_size=2)
    s = st.create()
    s.append_message("user", "warm-up")  # takes the writer lock outside the timed loop
    while time.time() < start:
        time.sleep(0.001)
    lat = []
    t0 = time.perf_counter()
    for i in range(appends):
        a = time.perf_counter()
        s.append_message(
            "assistant" if i % 2 else "user",
            f"message {i} of a benchmark run with a few words of text so that the row is realistic",
        )
        lat.append(time.perf_counter() - a)
    out.put((time.perf_counter() - t0, lat))
    s.close()
    st.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def bench_writers(schema: str, writers: int, appends: int) -> None:
    out: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    start = time.time() + 2.0
    procs = [mp.Process(target=writer, args=(schema, appends, start, out)) for _ in range(writers)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    wall = max(r[0] for r in results)
    lat = [x for r in results for x in r[1]]
    print(
        f"{writers} writers x {appends} appends (fsync): "
        f"{writers * appends / wall:,.0f} appends/s, "
        f"p50 {percentile(lat, 50) * 1000:.2f} ms, p99 {percentile(lat, 99) * 1000:.2f} ms, "
        f"max {max(lat) * 1000:.1f} ms"
    )


def bench_listing(name: str, store: object, n: int) -> None:
    t0 = time.perf_counter()
    ids = []
    for i in range(n):
        s = store.create(records=_records(i))  # type: ignore[attr-defined]
        ids.append(s.id)
    for sid in ids[::10]:
        store.catalog.add_tags(sid, ["tenth"])  # type: ignore[attr-defined]
    build = time.perf_counter() - t0
    times = {}
    for label, fn in (
        ("store.list()", store.list),  # type: ignore[attr-defined]
        ("catalog.sessions()", store.catalog.sessions),
    ):  # type: ignore[attr-defined]
        runs = []
        for _ in range(5):
            a = time.perf_counter()
            rows = fn()
            runs.append(time.perf_counter() - a)
        assert len(rows) == n, (label, len(rows))
        times[label] = statistics.median(runs)
    print(
        f"{name}: {n:,} sessions created in {build:.1f} s; "
        + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in times.items())
        + " (median of 5)"
    )


def _records(i: int) -> list[object]:
    from threadline.model.content import Message, text
    from threadline.model.entries import MessageEntry, SessionInfo, SessionInfoEntry, new_id, now

    recs: list[object] = []
    parent = None
    for j, role in enumerate(("user", "assistant", "user")):
        rec = MessageEntry(
            id=new_id(),
            parent_id=parent,
            timestamp=now(),
            message=Message(role=role, content=[text(f"session {i} msg {j}")]),
        )
        recs.append(rec)
        parent = rec.id
    recs.append(
        SessionInfoEntry(
            id=new_id(),
            parent_id=parent,
            timestamp=now(),
            session_info=SessionInfo(name=f"session {i}"),
        )
    )
    return recs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--appends", type=int, default=300)
    ap.add_argument("--sessions", type=int, default=10_000)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import psycopg
    from psycopg import sql

    import threadline as tl
    from threadline.store.postgres import upgrade

    schema = f"bench_{os.getpid()}"
    upgrade(URL, schema)
    try:
        bench_writers(schema, args.writers, args.appends)
        st = tl.open_store(URL, tenant="listing", schema=schema, durability="flush")
        bench_listing("postgres", st, args.sessions)
        st.close()
        with tempfile.TemporaryDirectory() as d:
            lite = tl.open_store(f"sqlite:///{d}/bench.db", durability="flush")
            bench_listing("sqlite", lite, args.sessions)
            lite.close()
    finally:
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
