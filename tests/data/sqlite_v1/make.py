"""Writes tests/data/sqlite_v1: a SQLite store at schema version 1 (tl_records WITHOUT ROWID)
and what it read back then. Run it with the threadline of commit 3e2e5f7 (the last at version 1):

    git archive 3e2e5f7 src | tar -x -C /tmp/tl-v1
    PYTHONPATH=/tmp/tl-v1/src THREADLINE_EMBEDDER=none python tests/data/sqlite_v1/make.py

Three sessions: one with messages of 40 B to 9 KB (the sizes the rowid table changes), a branch
and a name; one where an entry was purged (rewritten: generation 1, the purged text in no page);
one with no records.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import threadline as tl

HERE = Path(__file__).parent
PURGED = "PURGED-BEFORE-THE-UPGRADE-7f3a"


def text_of(n: int, seed: int) -> str:
    words = ["alpha", "beta", "gamma", "délta", "ε", "zeta", "eta", "théta", "iota", "kappa"]
    out: list[str] = []
    i = seed
    while sum(len(w) + 1 for w in out) < n:
        out.append(words[i % len(words)])
        i = i * 7 + 3
    return " ".join(out)[:n]


def main() -> None:
    db = HERE / "store.db"
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)
    st = tl.open_store(f"sqlite:///{db}")
    with st.create() as s:
        s.append_session_info("sizes")
        for i, n in enumerate([40, 600, 1000, 1500, 2100, 3000, 4500, 9000]):
            s.append_message("user" if i % 2 == 0 else "assistant", text_of(n, i))
        fork_at = s.path()[3].id
        s.branch(fork_at)
        s.append_message("user", "a question on a branch")
    with st.create() as s:
        s.append_message("user", "kept before")
        gone = s.append_message("assistant", f"{PURGED} {text_of(1200, 5)}")
        s.append_message("user", "kept after")
        s.purge([gone], dry_run=False)
    st.create().close()
    expected = {}
    for row in st.list():
        log = st.backend.open_log(row.id)
        expected[row.id] = {
            "header": log.raw_header().decode(),
            "lines": [line.decode() for line in log.raw_lines()],
            "summary": [row.name, row.created, row.modified, row.message_count, row.first_message],
        }
    conn = st.backend.conn
    for sid, gen, seq in conn.execute("SELECT session_id, generation, next_seq FROM tl_sessions"):
        expected[sid]["generation_next_seq"] = [gen, seq]
    st.close()
    check = sqlite3.connect(db)
    check.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    check.close()
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
