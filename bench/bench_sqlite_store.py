"""The SQLite store's records table, one threadline against another (bytes on disk and speed).

    git archive <base> src | tar -x -C /tmp/tl-before     # the store before the change
    THREADLINE_EMBEDDER=none .venv/bin/python bench/bench_sqlite_store.py \\
        --before /tmp/tl-before/src --after src [--rounds 5] [--messages 1000] [--big 10000]

Every measurement is a fresh process (``PYTHONPATH`` set to ``--before`` or ``--after``), the two
alternated round by round; the figures are medians over ``--rounds``:

- ``bytes``: one session of ``--messages`` messages of ~500 B, ~2 KB, ~8 KB of text (and a mix
  drawn log-uniformly from 100 B to 8 KB), appended one by one (a transaction each, as an
  application appends), ``durability="flush"``. The database file after a WAL checkpoint, and
  the JSON of the records (what a JSONL file would hold).
- ``append``: 300 appends of ~500 B messages to a session, ``durability`` fsync and flush:
  median and p90 of one append.
- ``open`` / ``context``: a session of ``--big`` ~500 B messages, built once per side; a fresh
  process opens it (``store.open``), builds its ``context()`` and reads every message's text.
- ``upgrade``: ``--before`` writes ``--upgrade-sessions`` sessions of ``--messages`` mixed
  messages; ``--after`` opens the store (its migrations run): the time and the file's size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ["the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be"]


def text_of(size: int, rnd: random.Random) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = rnd.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def sizes_for(kind: str, n: int) -> list[int]:
    if kind == "mix":
        rnd = random.Random(7)
        return [int(math.exp(rnd.uniform(math.log(100), math.log(8000)))) for _ in range(n)]
    return [int(kind)] * n


def child(op: str, db: str, arg: str, n: int) -> dict[str, object]:
    import threadline as tl

    rnd = random.Random(1)
    if op == "bytes":
        st = tl.open_store(f"sqlite:///{db}", durability="flush")
        s = st.create()
        for i, size in enumerate(sizes_for(arg, n)):
            s.append_message("user" if i % 2 == 0 else "assistant", text_of(size, rnd))
        json_bytes = sum(len(line) + 1 for line in s.raw_lines())
        s.close()
        st.close()
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        [(records,)] = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN "
            "(SELECT name FROM sqlite_master WHERE tbl_name = 'tl_records')"
        ).fetchall()
        conn.close()
        return {"file": os.path.getsize(db), "records": records, "json": json_bytes}
    if op == "append":
        st = tl.open_store(f"sqlite:///{db}", durability=arg)  # type: ignore[arg-type]
        s = st.create()
        s.append_message("user", "warm-up")  # takes the writer lock outside the timed loop
        lat = []
        for i in range(n):
            body = text_of(500, rnd)
            t = time.perf_counter()
            s.append_message("user" if i % 2 else "assistant", body)
            lat.append(time.perf_counter() - t)
        s.close()
        st.close()
        lat.sort()
        return {"p50_ms": lat[len(lat) // 2] * 1000, "p90_ms": lat[int(len(lat) * 0.9)] * 1000}
    if op == "build":
        st = tl.open_store(f"sqlite:///{db}", durability="flush")
        s = st.create()
        with s.batch():
            for i in range(n):
                s.append_message("user" if i % 2 == 0 else "assistant", text_of(500, rnd))
        s.close()
        st.close()
        return {"sid": s.id}
    if op == "open":
        st = tl.open_store(f"sqlite:///{db}")
        t = time.perf_counter()
        s = st.open(arg, read_only=True)
        opened = time.perf_counter() - t
        t = time.perf_counter()
        ctx = s.context()
        built = time.perf_counter() - t
        t = time.perf_counter()
        chars = sum(len(m.text) for m in ctx.messages)  # a lazily loaded message reads its row
        read = time.perf_counter() - t
        assert len(ctx.messages) == n and chars > 0, len(ctx.messages)
        st.close()
        return {"open_ms": opened * 1000, "context_ms": built * 1000, "materialize_ms": read * 1000}
    if op == "fill":  # arg sessions of n messages of mixed sizes
        st = tl.open_store(f"sqlite:///{db}", durability="flush")
        for _ in range(int(arg)):
            s = st.create()
            with s.batch():
                for i, size in enumerate(sizes_for("mix", n)):
                    s.append_message("user" if i % 2 == 0 else "assistant", text_of(size, rnd))
            s.close()
        st.close()
        return {"file": checkpointed_size(db)}
    if op == "upgrade":
        before = checkpointed_size(db)
        t = time.perf_counter()
        tl.open_store(f"sqlite:///{db}").close()
        took = time.perf_counter() - t
        return {"file_before": before, "seconds": took, "file_after": checkpointed_size(db)}
    raise SystemExit(f"unknown op {op}")


def checkpointed_size(db: str) -> int:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(db)


def run(src: str, op: str, db: Path, arg: str, n: int) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), THREADLINE_EMBEDDER="none")
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, str(db), arg, str(n)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="src folder of the threadline before")
    ap.add_argument("--after", help="src folder of the threadline after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--big", type=int, default=10_000)
    ap.add_argument("--appends", type=int, default=300)
    ap.add_argument(
        "--upgrade-sessions",
        type=int,
        default=20,
        help="sessions of --messages mixed messages written by --before, then upgraded by --after",
    )
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        op, db, arg, n = args.child
        print(json.dumps(child(op, db, arg, int(n))))
        return
    if not (args.before and args.after):
        ap.error("--before and --after name the two src folders to compare")
    sides = {"before": args.before, "after": args.after}
    work = Path(tempfile.mkdtemp(prefix="tl-sqlite-bench-"))
    print(f"load average at start: {Path('/proc/loadavg').read_text().strip()}")

    print(
        "\n| messages | JSON of the records | before: file | after: file "
        "| before: tl_records and its indexes | after: tl_records and its indexes |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for kind in ("500", "2000", "8000", "mix"):
        got = {}
        for side, src in sides.items():
            db = work / f"bytes-{kind}-{side}.db"
            got[side] = run(src, "bytes", db, kind, args.messages)
        js = int(got["after"]["json"])  # type: ignore[call-overload]
        assert js == got["before"]["json"], got
        cells = [
            f"{got[s][k]:,} B ({int(got[s][k]) / js:.2f}×)"  # type: ignore[call-overload]
            for k in ("file", "records")
            for s in sides
        ]
        label = (
            "~500 B" if kind == "500" else f"~{int(kind) // 1000} KB" if kind != "mix" else "mix"
        )
        print(f"| {args.messages:,} × {label} | {js:,} B | {' | '.join(cells)} |")

    timings: dict[str, dict[str, list[float]]] = {s: {} for s in sides}
    sid = {}
    for side, src in sides.items():
        sid[side] = str(run(src, "build", work / f"big-{side}.db", "", args.big)["sid"])
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for side in order:
            src = sides[side]
            for durability in ("fsync", "flush"):
                db = work / f"append-{side}-{durability}-{r}.db"
                got = run(src, "append", db, durability, args.appends)
                for k, v in got.items():
                    timings[side].setdefault(f"append {durability} {k}", []).append(float(v))  # type: ignore[arg-type]
            got = run(src, "open", work / f"big-{side}.db", sid[side], args.big)
            for k, v in got.items():
                timings[side].setdefault(f"{args.big:,} messages {k}", []).append(float(v))  # type: ignore[arg-type]
    print(f"\n| median of {args.rounds} (ms) | before | after |")
    print("|---|---:|---:|")
    for key in timings["before"]:
        b, a = (statistics.median(timings[s][key]) for s in sides)
        print(f"| {key} | {b:.2f} | {a:.2f} |")
    big = {s: os.path.getsize(work / f"big-{s}.db") for s in sides}
    print(
        f"\n{args.big:,}-message session file: before {big['before']:,} B, after {big['after']:,} B"
    )
    if args.upgrade_sessions:
        db = work / "upgrade.db"
        run(args.before, "fill", db, str(args.upgrade_sessions), args.messages)
        got = run(args.after, "upgrade", db, "", 0)
        print(
            f"\nUpgrading a database of {args.upgrade_sessions} sessions × {args.messages:,} mixed "
            f"messages written by --before: {float(got['seconds']):.1f} s (opening the store), "  # type: ignore[arg-type]
            f"file {got['file_before']:,} B → {got['file_after']:,} B"
        )
    print(f"load average at end: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
