"""How a fresh ThreadlineSaver loads a thread's latest checkpoint: from the session's branch
(what ``get_tuple`` does) against indexing the whole thread first (what it did before), side by
side on the same stored threads (issue 16).

    .venv/bin/python bench/langgraph_load.py [--sizes 1000 10000] [--full 1000] [--rounds 7]

Threads are built as in bench/langgraph_compare.py (``--full`` sizes turn by turn, the others by
one ``update_state`` and 20 turns) on threadline's JSONL and SQLite stores. Each round opens a
fresh store and saver per thread and way, and times ``get_tuple`` of the latest checkpoint
(opening the session included); the median of the rounds is shown, with the session open alone
and the entries the branch read took.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from langgraph_compare import history  # noqa: E402

import threadline as tl  # noqa: E402
from _langgraph_chat import build, user  # noqa: E402
from threadline.integrations.langgraph import ThreadlineSaver  # noqa: E402


def make(url: str, n: int, full: bool, pad: int) -> dict[str, Any]:
    config = {"configurable": {"thread_id": f"load-{n}"}}
    store = tl.open_store(url)
    with ThreadlineSaver(store) as saver:
        graph = build(saver, pad)
        if full:
            turn, count = 1, 0
            while count < n - 4:
                state = graph.invoke({"messages": [user(turn, pad)]}, config, durability="sync")
                count = len(state["messages"])
                turn += 1
        else:
            graph.update_state(config, {"messages": history(n - 40, pad)}, as_node="agent")
            for turn in range(1, 21):
                graph.invoke({"messages": [user(turn, pad)]}, config, durability="sync")
    store.close()
    return {"url": url, "config": config, "n": n, "branch": [], "whole": [], "open": []}


def load(row: dict[str, Any], way: str) -> None:
    store = tl.open_store(row["url"])
    saver = ThreadlineSaver(store)
    tid = row["config"]["configurable"]["thread_id"]
    t0 = time.perf_counter()
    if way == "whole":
        with saver._lock:
            saver._thread(tid, create=False)  # index every entry first
    elif way == "open":
        store.open(f"load-{row['n']}", read_only=True)
    if way != "open":
        tup = saver.get_tuple(row["config"])
    row[way].append((time.perf_counter() - t0) * 1000)
    if way == "branch":
        row["reads"] = saver.path_reads
        assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) >= row["n"] - 4
    saver.close()
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--full", type=int, nargs="*", default=[1000])
    ap.add_argument("--pad", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for n in args.sizes:
            for kind, url in (("JSONL", f"{tmp}/j{n}"), ("SQLite", f"sqlite:///{tmp}/s{n}.db")):
                row = make(url, n, n in args.full, args.pad)
                row["kind"] = kind
                row["mode"] = "turn by turn" if n in args.full else "prefill"
                rows.append(row)
        for _ in range(args.rounds):
            for row in rows:
                for way in ("branch", "whole", "open"):
                    load(row, way)
    print(
        "| store | messages | history built | session open (ms) | from the branch (ms) | "
        "whole index first (ms) | entries the branch read |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        med = {w: statistics.median(r[w]) for w in ("branch", "whole", "open")}
        print(
            f"| {r['kind']} | {r['n']:,} | {r['mode']} | {med['open']:.1f} | "
            f"{med['branch']:.1f} | {med['whole']:.1f} | {r['reads']:,} |"
        )


if __name__ == "__main__":
    main()
