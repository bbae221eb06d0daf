"""Search latency over 100,000 messages: keyword, semantic and hybrid.

    .venv/bin/python bench/bench_search.py [--messages 100000] [--queries 60]

The corpus is the ~2,000 messages of the real transcripts (shared/realdata) copied with a
per-copy suffix until it holds ``--messages`` messages, in a SQLite store (1 session per 100
messages). The catalog indexes it (FTS5; the time is reported). Vectors: embedding 100,000
messages with the NumPy MiniLM takes hours on this 2-core machine, so the benchmark stores
random unit vectors of the model's size (384 floats) under the model's name instead; the query
is still embedded by the real model on every search, so the timed path is the production one
(query embedding + brute-force cosine over 100k vectors + fusion + snippets). Queries are the
labelled ones of tests/data/search_queries.json. Reports p50/p95 per mode.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=60)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    import numpy as np

    import threadline as tl
    from threadline import formats
    from threadline.embedding import MiniLmEmbedder
    from threadline.model.content import Message, text
    from threadline.model.entries import MessageEntry, new_id

    spec = json.loads((ROOT / "tests" / "data" / "search_queries.json").read_text())
    realdata = ROOT.parent / "shared" / "realdata"
    base: list[Message] = []
    for fmt, pattern in spec["corpus"]:
        for path in sorted(realdata.glob(pattern)):
            base.extend(m for m in formats.get(fmt).load(path.read_bytes()) if m.text.strip())
    queries = [q["query"] for q in spec["queries"]][: args.queries]

    with tempfile.TemporaryDirectory() as d:
        store = tl.open_store(f"sqlite:///{d}/search.db", durability="flush")
        t0 = time.perf_counter()
        made = 0
        copy = 0
        while made < args.messages:
            recs = []
            parent = None
            for i in range(min(100, args.messages - made)):
                m = base[(made + i) % len(base)]
                msg = Message(role=m.role, content=[text(f"{m.text} (copy {copy})")])
                rec = MessageEntry(
                    id=new_id(),
                    parent_id=parent,
                    timestamp=f"2025-01-01T00:00:{(made + i) % 60:02d}.000Z",
                    message=msg,
                )
                recs.append(rec)
                parent = rec.id
            store.create(records=recs)
            made += len(recs)
            copy += 1
        created = time.perf_counter() - t0
        cat = store.catalog
        model = MiniLmEmbedder()
        cat.embedder = model
        t0 = time.perf_counter()
        cat.sync()
        indexed = time.perf_counter() - t0
        rows = cat.conn.execute("SELECT rowid FROM cat_messages").fetchall()  # type: ignore[attr-defined]
        rng = np.random.default_rng(42)
        with cat._tx() as conn:  # type: ignore[attr-defined]
            for start in range(0, len(rows), 5000):
                chunk = rows[start : start + 5000]
                vecs = rng.standard_normal((len(chunk), model.dim)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                conn.executemany(
                    "INSERT INTO cat_vectors VALUES (?, ?, ?)",
                    [(r[0], model.name, vecs[i].tobytes()) for i, r in enumerate(chunk)],
                )
        print(
            f"{made:,} messages in {copy:,} sessions: created in {created:.1f} s, "
            f"keyword-indexed (FTS5) in {indexed:.1f} s, {len(rows):,} vectors stored"
        )
        cat.search("warm up", mode="semantic")  # loads the vector matrix once
        for mode in ("keyword", "semantic", "hybrid"):
            lat = []
            for q in queries:
                a = time.perf_counter()
                cat.search(q, k=10, mode=mode)  # type: ignore[arg-type]
                lat.append(time.perf_counter() - a)
            lat.sort()
            p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
            print(
                f"{mode:>8}: p50 {statistics.median(lat) * 1000:.1f} ms, "
                f"p95 {p95 * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms over {len(queries)} "
                "queries"
            )
        store.close()


if __name__ == "__main__":
    main()
