"""PostgreSQL writers that leave the session row alone (issue 19, schema version 5): a writer
numbers its records itself and folds the list columns into the session row every
FOLD_RECORDS records, every FOLD_SECONDS and at release; the listing and the summary add the
records not folded yet, so they are exact while a writer is open, after it closed, and after
it was killed without closing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import threadline as tl
from conftest import PG_URL, pg_schema
from threadline.errors import NotFoundError
from threadline.model.content import Message, text
from threadline.model.entries import MessageEntry, now
from threadline.store import postgres
from threadline.store.base import SessionSummary, summarize_records

SRC = Path(__file__).resolve().parents[1] / "src"


def session_row(schema: str, sid: str) -> tuple[int, bool, int]:
    """next_seq, open_tail and message_count as stored (as the owner: no tenant needed)."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT next_seq, open_tail, message_count FROM {}.tl_sessions WHERE "
                "session_id = %s"
            ).format(sql.Identifier(schema)),
            (sid,),
        ).fetchone()
    assert row is not None
    return row


def expected(store: tl.Store, sid: str) -> SessionSummary:
    """The list row computed from every entry of the session, read back whole."""
    s = store.open(sid)
    return summarize_records(s.header, s.entries())


def row_of(summary: SessionSummary) -> tuple[object, ...]:
    return (
        summary.id,
        summary.name,
        summary.created,
        summary.modified,
        summary.message_count,
        summary.first_message,
    )


def test_listing_and_summary_are_exact_while_a_writer_leaves_records_unfolded() -> None:
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        quiet = st.create()
        quiet.append_message("user", "an older session")
        quiet.close()
        s = st.create()
        s.append_message("assistant", "not user input")  # folded (the first append)
        s.append_message("user", "the first question")  # folded, opens the tail
        time.sleep(0.002)
        s.append_session_info("named while open")
        s.append_message("assistant", "an answer")
        s.append_message("user", "a second question")
        # the session row has the first two messages; three records are not folded yet
        assert session_row(schema, s.id) == (3, True, 2)
        listed = {r.id: row_of(r) for r in st.list()}
        assert listed[s.id] == (
            s.id,
            "named while open",
            s.header.timestamp,
            s.entries()[-1].timestamp,
            4,
            "the first question",
        )
        assert row_of(st.backend.summary(s.id)) == listed[s.id] == row_of(expected(st, s.id))
        assert [r.id for r in st.list()] == [s.id, quiet.id]  # the tail's modified sorts too
        s.close()
        assert session_row(schema, s.id) == (6, False, 4)  # the release folded them in
        assert row_of(st.backend.summary(s.id)) == listed[s.id]
    finally:
        st.close()


CHILD = """
import sys, time
import threadline as tl
st = tl.open_store(sys.argv[1], tenant="t", schema=sys.argv[2], max_size=1)
s = st.create()
s.append_session_info("killed writer")
for i in range(6):
    s.append_message("user" if i % 2 == 0 else "assistant", f"message {i}")
print(s.id, flush=True)
time.sleep(60)
"""


def test_a_writer_killed_without_closing_leaves_listing_summary_and_open_exact() -> None:
    schema = pg_schema()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, PG_URL, schema],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert child.stdout is not None
    sid = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2, lock_timeout=5.0)
    try:
        assert session_row(schema, sid) == (3, True, 1)  # five records left unfolded
        want = (sid, "killed writer", 6, "message 0")
        got = st.backend.summary(sid)
        assert (got.id, got.name, got.message_count, got.first_message) == want
        assert row_of(got) == row_of(expected(st, sid)) == row_of(st.list()[0])
        s = st.open(sid)
        assert [e.message.text for e in s.path() if e.type == "message"] == [
            f"message {i}" for i in range(6)
        ]
        # the next writer folds the dead writer's tail with its first append
        s.append_message("user", "after the kill")
        assert session_row(schema, sid) == (9, False, 7)
        assert row_of(st.backend.summary(sid)) == row_of(expected(st, sid))
        assert st.backend.summary(sid).message_count == 7
        s.close()
    finally:
        st.close()


def test_a_writer_folds_every_fold_records_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "FOLD_RECORDS", 5)
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        s = st.create()
        folded = []
        for i in range(12):
            s.append_message("user", f"m{i}")
            folded.append(session_row(schema, s.id)[0] - 1)
        # appends 1 and 2 fold; then every append that brings the tail to 5 records
        assert folded == [1, 2, 2, 2, 2, 2, 7, 7, 7, 7, 7, 12]
        s.close()
        assert session_row(schema, s.id) == (13, False, 12)
    finally:
        st.close()


def test_a_writer_folds_when_the_last_fold_is_fold_seconds_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postgres, "FOLD_SECONDS", 0.2)
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        s = st.create()
        for i in range(3):
            s.append_message("user", f"m{i}")
        assert session_row(schema, s.id) == (3, True, 2)
        time.sleep(0.25)
        s.append_message("user", "m3")
        assert session_row(schema, s.id) == (5, True, 4)
        s.close()
    finally:
        st.close()


@pytest.mark.parametrize("appends", [0, 1, 3])  # the fold statement, the fold opening the tail,
def test_an_append_to_a_session_deleted_under_its_writer_says_not_found(  # the plain INSERT
    appends: int,
) -> None:
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=2)
    try:
        s = st.create()
        for i in range(appends):
            s.append_message("user", f"m{i}")
        st.delete(s.id)
        with pytest.raises(NotFoundError, match=rf"^Session '{s.id}' not found"):
            s.append_message("user", "into a deleted session")
            s.append_message("user", "into a deleted session")
        s.close()
        assert s.id not in [r.id for r in st.list()]
    finally:
        st.close()


def test_concurrent_writers_on_distinct_sessions_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postgres, "FOLD_RECORDS", 7)
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    sessions = [st.create() for _ in range(6)]
    errors: list[BaseException] = []

    def write(s: tl.Session, n: int) -> None:
        try:
            for i in range(n):
                if i % 3 == 2:  # a batch: the multi-row statements
                    leaf = s.leaf_id
                    s.append_records(
                        [
                            MessageEntry(
                                id=f"{s.id}-{i}-a",
                                parent_id=leaf,
                                timestamp=now(),
                                message=Message(role="assistant", content=[text(f"{i} a")]),
                            ),
                            MessageEntry(
                                id=f"{s.id}-{i}-b",
                                parent_id=f"{s.id}-{i}-a",
                                timestamp=now(),
                                message=Message(role="assistant", content=[text(f"{i} b")]),
                            ),
                        ]
                    )
                else:
                    s.append_message("user", f"{s.id} {i}")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    try:
        threads = [
            threading.Thread(target=write, args=(s, 30 + 5 * k)) for k, s in enumerate(sessions)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        open_rows = {r.id: row_of(r) for r in st.list()}
        for k, s in enumerate(sessions):
            n = 30 + 5 * k
            records = n + n // 3  # a batch of two for every third
            assert open_rows[s.id] == row_of(expected(st, s.id))
            assert open_rows[s.id][4] == records
            assert len(st.open(s.id).entries()) == records
            s.close()
            assert session_row(schema, s.id) == (records + 1, False, records)
        assert {r.id: row_of(r) for r in st.list()} == open_rows
    finally:
        st.close()


def test_taking_the_lock_reads_the_records_from_the_index_not_the_whole_session() -> None:
    """The read made with the lock bounds seq in the index scan, as the application role under
    row-level security (where a qual that is not leakproof is filtered row by row after the
    policy's) and in its generic plan (as the prepared statement runs it), so a writer of a
    long session reads only what it lacks."""
    schema = pg_schema()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET ROLE threadline_app")
        conn.execute("SELECT set_config('threadline.tenant', 't', false)")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(
            "PREPARE acquire_read(bigint, text, text) AS "
            + postgres._ACQUIRE_READ.replace("%s", "$1", 1)
            .replace("%s", "$2", 1)
            .replace("%s", "$3", 1)
        )
        plan = [r[0] for r in conn.execute("EXPLAIN EXECUTE acquire_read(5, 't', 's')")]
    conds = [line.strip() for line in plan if "Index Cond" in line and "seq >" in line]
    assert conds == [
        "Index Cond: ((tenant_id = s.tenant_id) AND (session_id = s.session_id) AND "
        "(seq >= LEAST($1, s.next_seq)))"
    ]
    assert not [line for line in plan if "Filter" in line and "seq" in line]


def test_a_rewrite_under_an_open_tail_sets_every_list_column_and_the_writer_goes_on() -> None:
    """A purge rewrites the session (every list column, next_seq, open_tail cleared) while the
    writer has records unfolded; its next appends fold and number from the rewritten log."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=2)
    try:
        s = st.create()
        ids = [s.append_message("user", f"m{i}") for i in range(5)]
        assert session_row(schema, s.id) == (3, True, 2)
        s.purge([ids[0]], dry_run=False)
        rewritten = session_row(schema, s.id)
        assert rewritten[1] is False
        assert row_of(st.backend.summary(s.id)) == row_of(expected(st, s.id))
        for i in range(3):
            s.append_message("assistant", f"after {i}")
        assert row_of(st.backend.summary(s.id)) == row_of(expected(st, s.id))
        s.close()
        after = session_row(schema, s.id)
        assert (after[0], after[1]) == (rewritten[0] + 3, False)
        assert after[2] == expected(st, s.id).message_count
        texts = [getattr(e, "message", None) for e in st.open(s.id).entries()]
        assert [m.text if m else None for m in texts] == [
            None,  # purged
            "m1",
            "m2",
            "m3",
            "m4",
            "after 0",
            "after 1",
            "after 2",
        ]
    finally:
        st.close()
