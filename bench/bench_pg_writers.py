"""PostgreSQL appends against raw INSERTs into the same table and indexes, side by side.

    .venv/bin/python bench/bench_pg_writers.py [--writers 1 4 16] [--seconds 3]

For each writer count, alternating (threadline, raw, threadline, raw…) in one run:

- distinct sessions: every writer process appends to a session of its own (``durability="fsync"``,
  synchronous commit) through ``Session.append_message``; the raw side is a prepared single-row
  ``INSERT`` into ``tl_records`` in autocommit with synchronous commit: same table and indexes,
  the same row (threadline's JSON line of one message and the columns threadline stores for it:
  ``body`` ``''`` and ``etext`` NULL since schema version 4, so the text index reads the JSON on
  both sides), as the same role through the same row-level security policies;
- one shared session: every writer process opens the same session with ``shared=True`` and
  appends, closing the session after each append: each append is one round trip (a plain
  INSERT while the writer is alone; else ``tl_append_at_leaf``, which waits for the session's
  lock for its own transaction, in the server's queue up to ``lock_timeout``, and goes under the
  latest entry whoever wrote it); the raw side is one process running the INSERT loop on one
  session. ``--handover`` also measures ordinary sessions (``shared=False``) doing the same:
  each append takes the writer lock with a catch-up read, appends, and ``close()`` hands the
  lock on (three round trips).

Appends per second over the whole run and p50/p99 of one append. ``--slices K`` (shared
mode): the writers are started once and kept; threadline's writers and the raw loop take turns
in K short slices of ``--seconds`` each (the order swapped every slice), and the ratio is the
median of the K slice pairs' ratios, with their quartiles: a moment of noise on this machine
(its disk's sync latency moves by 2x from one minute to the next) then falls on both sides of a
pair instead of deciding a whole round. A fresh schema per run; the raw
side's session ids are UUIDs, as threadline's. ``BENCH_CPU=1`` prints each threadline writer's
client CPU per append (shared mode), ``BENCH_PROF=PATH`` writes a CPU profile of each
(``PATH.<pid>``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
import uuid
from pathlib import Path

URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
TEXT = "message {i} of a benchmark run with a few words of text so that the row is realistic"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def tl_distinct(schema: str, seconds: float, start: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import threadline as tl

    st = tl.open_store(URL, tenant="bench", schema=schema, max_size=1)
    s = st.create()
    s.append_message("user", "warm-up")  # takes the writer lock outside the timed loop
    lat = _loop(start, seconds, lambda i: s.append_message("user", TEXT.format(i=i)))
    out.put(lat)
    s.close()
    st.close()


def _shared_writer(schema: str, sid: str, shared: bool = True) -> tuple[object, object]:
    """A writer of the shared session: its ``once(i)`` (append, close) and its ``done()``."""
    import threadline as tl

    st = tl.open_store(URL, tenant="bench", schema=schema, max_size=1, lock_timeout=30.0)
    s = st.open(sid, shared=shared)

    def once(i: int) -> None:
        s.append_message("user", TEXT.format(i=i))  # takes the lock, reads what others wrote
        s.close()  # and hands it to the next writer in the server's queue

    def done() -> None:
        s.close()
        st.close()

    return once, done


def tl_shared(
    schema: str,
    sid: str,
    seconds: float,
    start: float,
    out: mp.Queue,  # type: ignore[type-arg]
    shared: bool = True,
) -> None:
    once, done = _shared_writer(schema, sid, shared)
    once(-1)  # type: ignore[operator]
    c0 = time.thread_time()
    if os.environ.get("BENCH_PROF"):
        import cProfile

        prof = cProfile.Profile(time.thread_time)
        prof.enable()
    lat = _loop(start, seconds, once)
    if os.environ.get("BENCH_PROF"):
        prof.disable()
        prof.dump_stats(f"{os.environ['BENCH_PROF']}.{os.getpid()}")
    if os.environ.get("BENCH_CPU"):
        print(f"    client cpu per append {1e6 * (time.thread_time() - c0) / len(lat):.0f} us")
    out.put(lat)
    done()  # type: ignore[operator]


def tl_handover(schema: str, sid: str, seconds: float, start: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    tl_shared(schema, sid, seconds, start, out, shared=False)


def raw(schema: str, sid: str, seconds: float, start: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    once, done = _raw_writer(schema, sid)
    once(-1)  # type: ignore[operator]
    out.put(_loop(start, seconds, once))
    done()  # type: ignore[operator]


def _raw_writer(schema: str, sid: str) -> tuple[object, object]:
    """The raw INSERT loop's ``once(i)`` on session ``sid`` and its ``done()``."""

    import psycopg
    from psycopg import sql

    from threadline.model.entries import now

    conn = psycopg.connect(URL, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    conn.execute(
        "INSERT INTO tl_sessions (tenant_id, session_id, header, created, modified) "
        "VALUES ('raw', %s, '\\x7b7d', '', '') ON CONFLICT DO NOTHING",
        (sid,),
    )
    # the same table as threadline's writers see it: as the application role, through the
    # row-level security policies, with the tenant set on the connection
    conn.execute("SET ROLE threadline_app")
    conn.execute("SELECT set_config('threadline.tenant', 'raw', false)")
    cur = conn.cursor()  # reused, as threadline's writer reuses its cursor
    seq = [1_000_000 * os.getpid()]
    parent = [str(uuid.uuid4())]

    def line_of(eid: str, parent_id: str, stamp: str, text: str) -> bytes:
        # the JSON line threadline writes for append_message("user", text)
        return (
            f'{{"type":"message","id":"{eid}","parent_id":"{parent_id}","timestamp":"{stamp}",'
            f'"message":{{"role":"user","content":[{{"type":"text","text":{{"content":"{text}"'
            "}}]}}"
        ).encode()

    # The row threadline stores for such a line, column for column: its own _row says what
    # body and etext hold (since schema 4, body '' and etext NULL for a message of text blocks:
    # the text index reads the text from raw), so both sides pay the same index expressions.
    from threadline.store.postgres import _row

    probe = _row(line_of(parent[0], parent[0], now(), TEXT.format(i=0)))
    body, etext = probe[5], probe[6]
    assert body == "" and etext is None, probe  # what a text-only message stores

    def once(i: int) -> None:
        seq[0] += 1
        eid, stamp = str(uuid.uuid4()), now()
        cur.execute(
            "INSERT INTO tl_records (tenant_id, session_id, seq, id, parent_id, type, "
            "timestamp, role, body, etext, raw) VALUES ('raw', %s, %s, %s, %s, "
            "'message', %s, 'user', %s, %s, %s)",
            (
                sid,
                seq[0],
                eid,
                parent[0],
                stamp,
                body,
                etext,
                line_of(eid, parent[0], stamp, TEXT.format(i=i)),
            ),
            prepare=True,
        )
        parent[0] = eid

    return once, conn.close


def _loop(start: float, seconds: float, fn: object) -> list[float]:
    while time.time() < start:
        time.sleep(0.001)
    lat = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end:
        a = time.perf_counter()
        fn(i)  # type: ignore[operator]
        lat.append(time.perf_counter() - a)
        i += 1
    return lat


def run(target: object, args_of: object, n: int, seconds: float) -> tuple[float, float, float]:
    out: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    start = time.time() + 1.5
    procs = [
        mp.Process(target=target, args=(*args_of(k), seconds, start, out))  # type: ignore[operator]
        for k in range(n)
    ]
    for p in procs:
        p.start()
    lats = [out.get() for _ in procs]
    for p in procs:
        p.join()
    flat = [x for lat in lats for x in lat]
    return len(flat) / seconds, _pct(flat, 50) * 1000, _pct(flat, 99) * 1000


def _slice_worker(make: object, args: tuple[object, ...], conn: object) -> None:
    """A writer kept for the whole sliced measurement: it appends for each slice it is sent
    (a start time and a duration) and sends back its latencies; None ends it."""
    once, done = make(*args)  # type: ignore[operator]
    once(-1)
    while (msg := conn.recv()) is not None:  # type: ignore[attr-defined]
        conn.send(_loop(msg[0], msg[1], once))  # type: ignore[attr-defined]
    done()


def run_sliced(
    sides: list[tuple[object, list[tuple[object, ...]]]], slices: int, seconds: float
) -> list[list[tuple[float, list[float]]]]:
    """Each side (a writer factory and the arguments of each of its writers) runs in short
    slices, the sides taking turns (the order swapped every slice), so that the machine's
    moments of noise fall on both: per side, each slice's appends/s and latencies."""
    groups = []
    for make, args_list in sides:
        conns = []
        for args in args_list:
            here, there = mp.Pipe()
            mp.Process(target=_slice_worker, args=(make, args, there)).start()
            conns.append(here)
        groups.append(conns)
    results: list[list[tuple[float, list[float]]]] = [[] for _ in sides]
    try:
        for k in range(slices):
            order = range(len(sides)) if k % 2 == 0 else reversed(range(len(sides)))
            for g in order:
                start = time.time() + 0.1  # every writer of the side starts at once
                for c in groups[g]:
                    c.send((start, seconds))
                lats = [x for c in groups[g] for x in c.recv()]
                results[g].append((len(lats) / seconds, lats))
    finally:
        for conns in groups:
            for c in conns:
                c.send(None)
        for p in mp.active_children():
            p.join()
    return results


def show_sliced(
    label: str, a: list[tuple[float, list[float]]], b: list[tuple[float, list[float]]]
) -> None:
    pairs = sorted(x[0] / y[0] for x, y in zip(a, b, strict=True))
    for name, side in ((label, a), ("raw INSERT loop, 1 writer", b)):
        flat = [x for _rate, lat in side for x in lat]
        rates = sorted(rate for rate, _lat in side)
        print(
            f"  {name:<44} {rates[len(rates) // 2]:>8,.0f} appends/s (median slice)  "
            f"p50 {_pct(flat, 50) * 1000:6.2f} ms  p99 {_pct(flat, 99) * 1000:7.2f} ms"
        )
    print(
        f"  ratio, median of {len(pairs)} slice pairs {pairs[len(pairs) // 2]:.2f} "
        f"(quartiles {pairs[len(pairs) // 4]:.2f}-{pairs[3 * len(pairs) // 4]:.2f}); "
        f"all appends {sum(x[0] for x in a) / sum(y[0] for y in b):.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mode", choices=("both", "distinct", "shared"), default="both")
    ap.add_argument("--handover", action="store_true", help="also ordinary sessions, shared")
    ap.add_argument(
        "--slices",
        type=int,
        default=0,
        help="shared mode: writers kept running, threadline and raw taking turns in this many "
        "short slices each (--seconds each); the median of the slice pairs' ratios",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import psycopg
    from psycopg import sql

    import threadline as tl
    from threadline.store.postgres import upgrade

    schema = f"benchw_{os.getpid()}"
    upgrade(URL, schema)
    print(
        f"load average {os.getloadavg()[0]:.1f}; {args.seconds:g} s per measurement, "
        + (
            f"{args.slices} alternated slices (shared mode)"
            if args.slices
            else f"best of {args.rounds} alternated rounds"
        )
    )

    def show(label: str, results: list[tuple[float, float, float]]) -> tuple[float, float, float]:
        best = max(results)
        print(
            f"  {label:<44} {best[0]:>8,.0f} appends/s  p50 {best[1]:6.2f} ms  "
            f"p99 {best[2]:7.2f} ms"
        )
        return best

    try:
        for n in args.writers if args.mode != "shared" else []:
            print(f"{n} writer(s), distinct sessions:")
            a: list[tuple[float, float, float]] = []
            b: list[tuple[float, float, float]] = []
            for _ in range(args.rounds):
                a.append(run(tl_distinct, lambda k: (schema,), n, args.seconds))
                # session ids as long as threadline's (UUIDs): the same row, byte for byte
                b.append(run(raw, lambda k: (schema, str(uuid.uuid4())), n, args.seconds))
            ta, tb = show("threadline append_message", a), show("raw single-row INSERT", b)
            print(f"  ratio {ta[0] / tb[0]:.2f}")
        st = tl.open_store(URL, tenant="bench", schema=schema, max_size=1)
        shared = st.create().id
        st.close()
        raw_shared = str(uuid.uuid4())
        for n in args.writers if args.mode != "distinct" and args.slices else []:
            print(f"{n} writer(s), one shared session (append, close), {args.slices} slices:")
            a_res, b_res = run_sliced(
                [(_shared_writer, [(schema, shared)] * n), (_raw_writer, [(schema, raw_shared)])],
                args.slices,
                args.seconds,
            )
            show_sliced("threadline shared=True append+close", a_res, b_res)
        for n in args.writers if args.mode != "distinct" and not args.slices else []:
            print(f"{n} writer(s), one shared session (append, close):")
            a, b, c = [], [], []
            for _ in range(args.rounds):
                a.append(run(tl_shared, lambda k: (schema, shared), n, args.seconds))
                b.append(run(raw, lambda k: (schema, raw_shared), 1, args.seconds))
                if args.handover:
                    c.append(run(tl_handover, lambda k: (schema, shared), n, args.seconds))
            ta = show("threadline shared=True append+close", a)
            tb = show("raw INSERT loop, 1 writer", b)
            print(f"  ratio {ta[0] / tb[0]:.2f}")
            if c:
                tc = show("threadline shared=False append+close", c)
                print(f"  ratio {tc[0] / tb[0]:.2f}")
    finally:
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
