"""The SQLite store's schema version 2 (``tl_records`` as a rowid table): a version-1 database
(tests/data/sqlite_v1, written by the store of that version) upgrades in place and reads back
exactly, a kill at any point of the upgrade leaves version 1 or version 2 whole, and a process
that opens the database while another upgrades it opens it too. Version 3 (the unused
(session_id, id) index dropped) is applied with them: the same upgrade ends at the latest."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import threadline as tl
from threadline.store import migrations
from threadline.store.sqlite import connect, upgrade

V1 = Path(__file__).resolve().parent / "data" / "sqlite_v1"
PURGED = b"PURGED-BEFORE-THE-UPGRADE-7f3a"


def copy_v1(tmp_path: Path) -> Path:
    db = tmp_path / "store.db"
    shutil.copy(V1 / "store.db", db)
    return db


def schema_of(db: Path) -> tuple[list[int], bool, str]:
    """(sqlite versions applied, whether tl_records is WITHOUT ROWID, integrity check)."""
    conn = sqlite3.connect(db)
    try:
        versions = [
            r[0]
            for r in conn.execute(
                "SELECT version FROM tl_schema_migrations WHERE track = 'sqlite' ORDER BY version"
            )
        ]
        [table_sql] = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tl_records'"
        ).fetchone()
        [check] = conn.execute("PRAGMA integrity_check").fetchone()
    finally:
        conn.close()
    return versions, "WITHOUT ROWID" in table_sql, check


def read_back(st: Any) -> dict[str, Any]:
    """Everything tests/data/sqlite_v1/expected.json holds, read through the store."""
    got: dict[str, Any] = {}
    for row in st.list():
        log = st.backend.open_log(row.id)
        got[row.id] = {
            "header": log.raw_header().decode(),
            "lines": [line.decode() for line in log.raw_lines()],
            "summary": [row.name, row.created, row.modified, row.message_count, row.first_message],
        }
    for sid, gen, seq in st.backend.conn.execute(
        "SELECT session_id, generation, next_seq FROM tl_sessions"
    ):
        got[sid]["generation_next_seq"] = [gen, seq]
    return got


EXPECTED = json.loads((V1 / "expected.json").read_text(encoding="utf-8"))
ALL = [version for version, _, _ in migrations.scripts("sqlite")]  # 1, 2, and any later one


def test_the_fixture_is_a_version_1_database() -> None:
    assert schema_of(V1 / "store.db") == ([1], True, "ok")
    assert ALL[:2] == [1, 2]


def test_a_version_1_database_upgrades_in_place_and_reads_back_exactly(tmp_path: Path) -> None:
    db = copy_v1(tmp_path)
    st = tl.open_store(f"sqlite:///{db}")
    try:
        assert schema_of(db) == (ALL, False, "ok")
        # the migration's VACUUM gave the old table's pages back
        assert st.backend.conn.execute("PRAGMA freelist_count").fetchone() == (0,)  # type: ignore[attr-defined]
        assert read_back(st) == EXPECTED
        # the (session_id, seq) lookup is an index of the new table; version 3 dropped the
        # (session_id, id) one, which no statement used
        indexes = {
            r[0]: r[1]
            for r in st.backend.conn.execute(  # type: ignore[attr-defined]
                "SELECT name, \"unique\" FROM pragma_index_list('tl_records')"
            )
        }
        assert indexes == {"sqlite_autoindex_tl_records_1": 1}
        # the sessions go on: the branch of "sizes" gets a reply, the purged one stays purged
        sizes = next(sid for sid, e in EXPECTED.items() if e["summary"][0] == "sizes")
        with st.open(sizes) as s:
            before = [e.id for e in s.path()]
            reply = s.append_message("assistant", "after the upgrade")
        again = st.open(sizes, read_only=True)
        assert [e.id for e in again.path()] == [*before, reply]
        assert again.path()[-2].message.text == "a question on a branch"
        assert st.list()[0].message_count == EXPECTED[sizes]["summary"][3] + 1
    finally:
        st.close()
    # no purged text came back with the copy
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert PURGED not in db.read_bytes()


def test_upgrading_again_applies_nothing_and_changes_nothing(tmp_path: Path) -> None:
    db = copy_v1(tmp_path)
    conn = connect(str(db))
    try:
        assert upgrade(conn, "sqlite") == ALL[1:]
        assert upgrade(conn, "sqlite") == []
    finally:
        conn.close()
    st = tl.open_store(f"sqlite:///{db}")
    try:
        assert read_back(st) == EXPECTED
    finally:
        st.close()


KILLED_UPGRADE = textwrap.dedent("""
    import os, signal, sys
    from threadline.store.sqlite import connect, upgrade
    path, kill_at = sys.argv[1], int(sys.argv[2])
    conn = connect(path)
    calls = 0
    def tick():
        global calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return 0
    conn.set_progress_handler(tick, 20)
    upgrade(conn, "sqlite")
    print(calls)
""")


def upgrade_in_a_process(db: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KILLED_UPGRADE, str(db), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_kill_at_any_point_of_the_upgrade_leaves_version_1_or_version_2_whole(
    tmp_path: Path,
) -> None:
    (tmp_path / "count").mkdir()
    whole = upgrade_in_a_process(copy_v1(tmp_path / "count"), 0)
    assert whole.returncode == 0, whole.stderr
    total = int(whole.stdout)  # progress callbacks of one whole upgrade (migration and VACUUM)
    assert total > 20
    seen = set()
    for kill_at in sorted({1, 2, 3, *(total * k // 10 for k in range(1, 10)), total - 1}):
        where = tmp_path / f"k{kill_at}"
        where.mkdir()
        db = copy_v1(where)
        run = upgrade_in_a_process(db, kill_at)
        assert run.returncode == -9, (kill_at, run.stderr)
        versions, without_rowid, check = schema_of(db)
        assert check == "ok"
        assert versions == ALL[: len(versions)]  # whole migrations only, in order
        assert without_rowid == (versions == [1])
        seen.add(len(versions))
        st = tl.open_store(f"sqlite:///{db}")  # finishes the upgrade if the kill came first
        try:
            assert read_back(st) == EXPECTED
        finally:
            st.close()
        assert schema_of(db) == (ALL, False, "ok")
    # kills landed before version 2's commit and after the last one (in the VACUUM)
    assert {1, len(ALL)} <= seen


def test_a_process_opening_the_database_while_another_upgrades_it_opens_it(
    tmp_path: Path,
) -> None:
    db = copy_v1(tmp_path)
    first = connect(str(db))
    second = connect(str(db))
    [(_, _, script)] = [m for m in migrations.scripts("sqlite") if m[0] == 2]
    waiting = threading.Event()
    second.set_trace_callback(lambda stmt: stmt.startswith("BEGIN IMMEDIATE") and waiting.set())
    result: list[object] = []

    def open_second() -> None:
        try:
            result.append(upgrade(second, "sqlite"))
        except BaseException as exc:  # surfaced below
            result.append(exc)

    # the first connection is half-way through the migration: it holds the write lock
    first.executescript(
        "BEGIN IMMEDIATE; INSERT INTO tl_schema_migrations VALUES ('sqlite', 2, 'now');" + script
    )
    thread = threading.Thread(target=open_second)
    thread.start()
    assert waiting.wait(30)  # the second saw version 2 missing and waits for the write lock
    threading.Event().wait(0.3)
    first.execute("COMMIT")
    thread.join(60)
    first.close()
    second.close()
    assert result == [ALL[2:]]  # it found version 2 applied and did not apply it again
    st = tl.open_store(f"sqlite:///{db}")
    try:
        assert schema_of(db) == (ALL, False, "ok")
        assert read_back(st) == EXPECTED
    finally:
        st.close()
