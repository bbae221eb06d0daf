"""Bytes on disk of the SQLite records table by layout and page size (sqlite3 alone).

    .venv/bin/python bench/sqlite_page_layout.py

The store's ``tl_records`` (the columns and indexes of schema versions 1 and 2), one session of
rows appended one by one, each row the JSON of a message of the given text size; the database
file after a checkpoint, divided by the rows' JSON. Why version 2 is a rowid table at SQLite's
default 4 KB page rather than a larger page: each layout wastes most on rows a little over half
what a page's leaf can hold (one row to a page), and a spread of sizes is where they differ.
"""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import tempfile
import uuid
from pathlib import Path

V1 = """
CREATE TABLE tl_sessions (session_id TEXT PRIMARY KEY);
CREATE TABLE tl_records (
    session_id TEXT NOT NULL REFERENCES tl_sessions (session_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, id TEXT, parent_id TEXT, type TEXT NOT NULL, timestamp TEXT,
    raw BLOB NOT NULL, PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX tl_records_id ON tl_records (session_id, id);
"""
V2 = V1.replace(") WITHOUT ROWID;", ");")


def ratio(schema: str, page: int, sizes: list[int], folder: Path) -> float:
    db = folder / f"layout-{uuid.uuid4().hex}.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA page_size={page}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(schema)
    sid = str(uuid.uuid4())
    conn.execute("INSERT INTO tl_sessions VALUES (?)", (sid,))
    rnd = random.Random(1)
    parent, total = None, 0
    stamp = "2026-11-25T14:00:00.000Z"
    for seq, size in enumerate(sizes, 1):
        rid = str(uuid.uuid4())
        body = "".join(rnd.choices("abcdefghij klmnopqrst uvwxyz", k=size))
        raw = json.dumps(
            {
                "type": "message",
                "id": rid,
                "parentId": parent,
                "timestamp": stamp,
                "message": {"role": "user", "content": [{"type": "text", "text": body}]},
            }
        ).encode()
        total += len(raw) + 1
        conn.execute(
            "INSERT INTO tl_records VALUES (?, ?, ?, ?, 'message', ?, ?)",
            (sid, seq, rid, parent, stamp, raw),
        )
        parent = rid
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = os.path.getsize(db)
    for p in folder.glob(f"{db.name}*"):
        p.unlink()
    return size / total


def main() -> None:
    rnd = random.Random(7)
    cases = {f"{n:,} B": [n] * 1000 for n in (500, 1000, 2000, 3000, 4500, 8000)}
    for top in (8000, 20000):
        cases[f"mix 100 B-{top // 1000} KB"] = [
            int(math.exp(rnd.uniform(math.log(100), math.log(top)))) for _ in range(2000)
        ]
    layouts = [("v1", V1, 4096), ("v2", V2, 4096), ("v2", V2, 8192), ("v2", V2, 16384)]
    print(
        "| message text | " + " | ".join(f"{v}, {p // 1024} KB pages" for v, _, p in layouts) + " |"
    )
    print("|---|" + "---:|" * len(layouts))
    with tempfile.TemporaryDirectory(prefix="tl-layout-") as tmp:
        for name, sizes in cases.items():
            got = [ratio(schema, page, sizes, Path(tmp)) for _, schema, page in layouts]
            print(f"| {name} | " + " | ".join(f"{r:.2f}×" for r in got) + " |")


if __name__ == "__main__":
    main()
