"""Threads sharing sessions and stores, repeated: nothing acknowledged may be lost (issue 13).

    .venv/bin/python bench/thread_trials.py --trials 5
    .venv/bin/python bench/thread_trials.py --backends jsonl,sqlite --threads 16 --appends 500

Each trial, on each backend: THREADS threads append APPENDS messages each to one shared
``Session`` (and read its context between writes); then THREADS threads each create 10 sessions
on one shared ``Store`` and fill them. Afterwards the sessions are reopened: every acknowledged
id must be there, the entries of each session must form one chain from one root (each append
parented to the leaf at the moment it was written) and the leaf must be the chain's end.
Prints one JSON line per backend: trials, appends acknowledged, lost, invalid trees.
PostgreSQL runs against ``$THREADLINE_TEST_PG`` (default: the test database) in a fresh schema.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import threadline as tl

PG_URL = os.environ.get("THREADLINE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def open_store(backend: str, root: Path) -> tuple[Any, str | None]:
    if backend == "memory":
        return tl.open_store("memory://"), None
    if backend == "jsonl":
        return tl.open_store(root / "sessions", durability="flush"), None
    if backend == "sqlite":
        return tl.open_store(f"sqlite:///{root}/store.db", durability="flush"), None
    from threadline.store.postgres import upgrade

    schema = f"bench_threads_{uuid.uuid4().hex[:10]}"
    upgrade(PG_URL, schema)
    return tl.open_store(
        PG_URL, tenant="bench", schema=schema, durability="flush", max_size=8
    ), schema


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def run_threads(n: int, work: Any) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # counted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def check(session: Any, acked: list[str]) -> tuple[int, bool]:
    """(lost entries, tree valid) of a reopened session."""
    parents = {e.id: e.parent_id for e in session.entries()}
    lost = len(set(acked) - set(parents))
    roots = [e for e, p in parents.items() if p is None]
    children: dict[str, list[str]] = {}
    for e, p in parents.items():
        if p is not None:
            children.setdefault(p, []).append(e)
    valid = len(roots) == 1 and all(len(c) == 1 for c in children.values())
    if valid:
        tip, walked = roots[0], 1
        while tip in children:
            tip = children[tip][0]
            walked += 1
        valid = walked == len(parents) and session.leaf_id == tip
    return lost, valid


def trial(backend: str, threads: int, appends: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        store, schema = open_store(backend, Path(tmp))
        try:
            out = {"acknowledged": 0, "lost": 0, "invalid_trees": 0, "errors": 0}
            shared = store.create()
            acked: list[list[str]] = [[] for _ in range(threads)]

            def one_session(i: int) -> None:
                for n in range(appends):
                    acked[i].append(shared.append_message("user", f"t{i} m{n}"))
                    if n % 100 == 0:
                        len(shared.context().messages)

            out["errors"] += len(run_threads(threads, one_session))
            shared.close()
            every = [e for part in acked for e in part]
            out["acknowledged"] += len(every)
            lost, valid = check(store.open(shared.id, read_only=True), every)
            out["lost"] += lost
            out["invalid_trees"] += 0 if valid else 1
            made: list[dict[str, list[str]]] = [{} for _ in range(threads)]

            def many_sessions(i: int) -> None:
                for k in range(10):
                    with store.create() as s:
                        made[i][s.id] = [
                            s.append_message("user", f"t{i} s{k} m{n}")
                            for n in range(max(1, appends // 10))
                        ]

            out["errors"] += len(run_threads(threads, many_sessions))
            for part in made:
                for sid, ids in part.items():
                    out["acknowledged"] += len(ids)
                    lost, valid = check(store.open(sid, read_only=True), ids)
                    out["lost"] += lost
                    out["invalid_trees"] += 0 if valid else 1
            return out
        finally:
            store.close()
            if schema is not None:
                drop_schema(schema)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--appends", type=int, default=500)
    ap.add_argument("--backends", default="memory,jsonl,sqlite,postgres")
    args = ap.parse_args()
    for backend in args.backends.split(","):
        total = {"acknowledged": 0, "lost": 0, "invalid_trees": 0, "errors": 0}
        started = time.monotonic()
        for _ in range(args.trials):
            for k, v in trial(backend, args.threads, args.appends).items():
                total[k] += v
        print(
            json.dumps(
                {
                    "backend": backend,
                    "trials": args.trials,
                    "threads": args.threads,
                    **total,
                    "seconds": round(time.monotonic() - started, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
