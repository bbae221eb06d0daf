"""Open, context and materialize of one big session on a database store (issue 19).

    python bench/bench_db_open.py make URL --messages 50000 [--schema S]
    python bench/bench_db_open.py run URL --src A --src B [--runs 3] [--schema S]

``make`` writes a session ``big`` of ``--messages`` messages of ~500 bytes (alternating roles).
``run`` times, in a fresh process per measurement and alternating between the source trees
given with ``--src`` (e.g. an older checkout's ``src`` and this one's): ``Store.open``, the
leaf's ``context()``, materializing every message (their text read), and the peak RSS after
open. Prints one JSON line per measurement and the medians per source tree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, resource, sys, time
import threadline as tl
url, schema = sys.argv[1], sys.argv[2]
options = {"schema": schema, "tenant": "bench"} if url.startswith("postgres") else {}
store = tl.open_store(url, **options)
t0 = time.perf_counter()
s = store.open("big")
t1 = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
c = s.context()
t2 = time.perf_counter()
chars = sum(len(m.text) for m in c.messages)
t3 = time.perf_counter()
print(json.dumps({"open_ms": 1000 * (t1 - t0), "context_ms": 1000 * (t2 - t1),
                  "materialize_ms": 1000 * (t3 - t2), "rss_after_open_mb": rss,
                  "chars": chars}))
"""


def make(url: str, schema: str, messages: int) -> None:
    import threadline as tl

    options = {"schema": schema, "tenant": "bench"} if url.startswith("postgres") else {}
    if url.startswith("postgres"):
        from threadline.store.postgres import upgrade

        upgrade(url, schema)
    store = tl.open_store(url, **options)
    if store.exists("big"):
        store.delete("big")
    s = store.create(session_id="big")
    with s.batch():
        for i in range(messages):
            s.append_message("user" if i % 2 else "assistant", f"message {i} " + "x" * 450)
    s.close()
    store.close()
    print(f"made session big: {messages} messages")


def run(url: str, schema: str, srcs: list[str], runs: int) -> None:
    got: dict[str, list[dict[str, float]]] = {src: [] for src in srcs}
    for _ in range(runs):
        for src in srcs:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, url, schema],
                env={"PYTHONPATH": src, "THREADLINE_EMBEDDER": "none", "PATH": "/usr/bin:/bin"},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            row = json.loads(out)
            got[src].append(row)
            print(json.dumps({"src": src, **row}))
    for src, rows in got.items():
        med = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}
        print(json.dumps({"src": src, "median": med}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["make", "run"])
    ap.add_argument("url")
    ap.add_argument("--schema", default="bench_db_open")
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if a.what == "make":
        make(a.url, a.schema, a.messages)
    else:
        run(a.url, a.schema, a.src or ["src"], a.runs)


if __name__ == "__main__":
    main()
