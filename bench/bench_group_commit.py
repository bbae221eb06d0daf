"""Group commit on the JSONL store, side by side in one run (issue 19).

    .venv/bin/python bench/bench_group_commit.py [--appends 400] [--threads 4] [--rounds 3]

1. One session: ``durability="fsync"`` appends (one fdatasync each) against the same appends in
   ``with session.batch():`` blocks of 10 (one fdatasync per block), and the same appends
   without any sync (``durability="flush"``): the floor a batch approaches.
2. ``--threads`` threads, each appending to a session of its own: ``durability="fsync"`` against
   ``durability="group"`` (the threads share sync rounds).

3. The ceiling the operating system allows: the same lines written with raw ``os.write`` and
   ``os.fdatasync`` after each line against after every 10th, no threadline code at all. The
   ratio threadline reaches can only approach this one: per append it adds its own CPU (building,
   encoding and indexing the entry) to the share of the sync.

Alternated rounds, each in a fresh directory beside the repository (same filesystem as the
sessions a user keeps); prints the median appends per second and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import threadline as tl

TEXT = "message {i} of a benchmark run with a few words of text so that the line is realistic"


def single(durability: str, appends: int, batch: int) -> float:
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as d:
        s = tl.open_store(d, durability=durability).create()  # type: ignore[arg-type]
        s.append_message("user", "warm-up")
        t0 = time.perf_counter()
        if batch == 1:
            for i in range(appends):
                s.append_message("user", TEXT.format(i=i))
        else:
            for b in range(0, appends, batch):
                with s.batch():
                    for i in range(b, min(appends, b + batch)):
                        s.append_message("user", TEXT.format(i=i))
        took = time.perf_counter() - t0
        s.close()
    return appends / took


def raw(appends: int, batch: int) -> float:
    line = (
        b'{"type":"message","id":"0123456789abcdef","parent_id":"fedcba9876543210",'
        b'"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"'
        + TEXT.encode()
        + b'"}}\n'
    )
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as d:
        fd = os.open(Path(d) / "raw.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            t0 = time.perf_counter()
            for i in range(appends):
                os.write(fd, line)
                if (i + 1) % batch == 0:
                    os.fdatasync(fd)
            took = time.perf_counter() - t0
        finally:
            os.close(fd)
    return appends / took


def threaded(durability: str, appends: int, threads: int) -> float:
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as d:
        store = tl.open_store(d, durability=durability)  # type: ignore[arg-type]
        sessions = [store.create() for _ in range(threads)]
        for s in sessions:
            s.append_message("user", "warm-up")
        go = threading.Barrier(threads + 1)

        def run(s: tl.Session) -> None:
            go.wait()
            for i in range(appends // threads):
                s.append_message("user", TEXT.format(i=i))

        ths = [threading.Thread(target=run, args=(s,)) for s in sessions]
        for th in ths:
            th.start()
        go.wait()
        t0 = time.perf_counter()
        for th in ths:
            th.join()
        took = time.perf_counter() - t0
        for s in sessions:
            s.close()
    return threads * (appends // threads) / took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=400)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(
        f"load average {os.getloadavg()[0]:.1f}; {args.appends} appends per measurement, "
        f"median of {args.rounds} alternated rounds"
    )
    runs: dict[str, list[float]] = {
        k: [] for k in ("fsync", "batch10", "flush", "tfsync", "tgroup", "raw1", "raw10")
    }
    for _ in range(args.rounds):
        runs["flush"].append(single("flush", args.appends, 1))
        runs["fsync"].append(single("fsync", args.appends, 1))
        runs["batch10"].append(single("fsync", args.appends, 10))
        runs["tfsync"].append(threaded("fsync", args.appends, args.threads))
        runs["tgroup"].append(threaded("group", args.appends, args.threads))
        runs["raw1"].append(raw(args.appends, 1))
        runs["raw10"].append(raw(args.appends, 10))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(
        f"one session, fsync per append:        {med['fsync']:9,.0f} appends/s "
        f"({1e6 / med['fsync']:,.0f} µs each)"
    )
    print(
        f"one session, batch() of 10:            {med['batch10']:9,.0f} appends/s "
        f"({1e6 / med['batch10']:,.0f} µs each)  ratio {med['batch10'] / med['fsync']:.1f}x"
    )
    print(
        f"one session, no sync (flush), floor:  {med['flush']:9,.0f} appends/s "
        f"({1e6 / med['flush']:,.0f} µs each)"
    )
    print(
        f"raw os.write + fdatasync per line:     {med['raw1']:9,.0f} lines/s "
        f"({1e6 / med['raw1']:,.0f} µs each)"
    )
    print(
        f"raw os.write, fdatasync per 10 lines:  {med['raw10']:9,.0f} lines/s "
        f"({1e6 / med['raw10']:,.0f} µs each)  ratio {med['raw10'] / med['raw1']:.1f}x "
        "(the OS ceiling)"
    )
    print(f"{args.threads} threads x own session, fsync:     {med['tfsync']:9,.0f} appends/s")
    print(
        f"{args.threads} threads x own session, group:     {med['tgroup']:9,.0f} appends/s"
        f"  ratio {med['tgroup'] / med['tfsync']:.2f}x"
    )


if __name__ == "__main__":
    main()
