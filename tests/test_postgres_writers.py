"""PostgreSQL writers: durability per transaction, the writer pool's cap per tenant, and the
server's lock queue for a session another writer holds (issue 19, issue 13 item 10)."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq, sql

import threadline as tl
from conftest import PG_URL, make_store, pg_schema
from threadline.errors import SessionLockedError, StoreError
from threadline.store.postgres import PostgresStore

# Refuses the message "probe" and names the synchronous_commit the appending transaction runs.
PROBE = (
    "CREATE FUNCTION probe() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF tl_body(new.raw, new.body) = 'probe' THEN RAISE EXCEPTION 'sync=%', "
    "current_setting('synchronous_commit'); END IF; RETURN new; END $$; "
    "CREATE TRIGGER probe BEFORE INSERT ON tl_records FOR EACH ROW "
    "EXECUTE FUNCTION probe();"
)


@pytest.mark.parametrize(
    ("durability", "setting"), [("fsync", "on"), ("group", "on"), ("flush", "off")]
)
def test_an_append_commits_with_the_synchronous_commit_of_the_store_durability(
    durability: str, setting: str
) -> None:
    schema = pg_schema()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(PROBE.encode())
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1, durability=durability)  # type: ignore[arg-type]
    try:
        s = st.create()
        s.append_message("user", "kept")
        with pytest.raises(StoreError, match=rf"failed \(sync={setting}\); nothing was written"):
            s.append_message("user", "probe")
        assert [e.message.text for e in st.open(s.id).entries()] == ["kept"]
        s.close()
    finally:
        st.close()


def test_a_tenant_with_max_writers_open_cannot_lock_out_other_tenants(tmp_path: Path) -> None:
    schema = pg_schema()
    greedy = make_store(
        "postgres", tmp_path, tenant="greedy", schema=schema, max_writers=2, writer_wait=0.2
    )
    other = make_store("postgres", tmp_path, tenant="other", schema=schema, max_writers=2)
    try:
        held = [greedy.create() for _ in range(3)]
        held[0].append_message("user", "one")
        held[1].append_message("user", "two")
        with pytest.raises(
            StoreError,
            match=r"Tenant 'greedy' already has 2 sessions open for "
            r"writing \(max_writers\) and none closed within "
            r"0.2 s",
        ):
            held[2].append_message("user", "three")
        s = other.create()
        s.append_message("user", "another tenant still writes")
        s.close()
        held[0].close()  # gives its connection back: the waiting writer gets it
        held[2].append_message("user", "three")
        assert [e.message.text for e in greedy.open(held[2].id).entries()] == ["three"]
        for h in held:
            h.close()
    finally:
        greedy.close()
        other.close()


def test_a_second_writer_waits_in_the_lock_queue_until_the_first_closes(tmp_path: Path) -> None:
    st = make_store("postgres", tmp_path, lock_timeout=10.0)
    try:
        first = st.create()
        first.append_message("user", "first writer")
        second = st.open(first.id)
        closer = threading.Timer(0.3, first.close)
        closer.start()
        t0 = time.monotonic()
        second.append_message("assistant", "second writer, after the first closed")
        waited = time.monotonic() - t0
        closer.join()
        assert waited >= 0.25  # it waited for the close, it did not fail or reconnect
        assert [e.message.text for e in st.open(first.id).path()] == [
            "first writer",
            "second writer, after the first closed",
        ]
        second.close()
    finally:
        st.close()


def test_a_waiting_writer_gives_up_after_lock_timeout_naming_the_holder(tmp_path: Path) -> None:
    st = make_store("postgres", tmp_path, lock_timeout=0.2)
    try:
        first = st.create()
        first.append_message("user", "held")
        second = st.open(first.id)
        with pytest.raises(SessionLockedError) as info:
            second.append_message("user", "refused")
        assert info.value.pid == os.getpid()
        first.close()
        second.append_message("user", "after the close")
        assert [e.message.text for e in st.open(first.id).path()] == ["held", "after the close"]
        second.close()
    finally:
        st.close()


def test_an_append_is_one_prepared_insert_and_one_round_trip_leaving_the_session_row() -> None:
    """What the client sends for one append, read from libpq's protocol trace: one Bind of a
    prepared statement, one Sync, one reply ending idle (no BEGIN, settings or COMMIT); the
    statement is the plain INSERT, and the session row keeps its row version (xmin)."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        s = st.create()
        s.append_message("user", "one")  # takes the writer lock; folds
        s.append_message("user", "two")  # folds and opens the tail
        s.append_message("user", "three")  # the first plain INSERT: prepares it
        conn = s.state.log._conn  # type: ignore[attr-defined]  # the writer's connection

        def session_row() -> tuple[str, int, int, bool]:
            with psycopg.connect(PG_URL, autocommit=True) as owner:
                row = owner.execute(
                    sql.SQL(
                        "SELECT xmin::text, next_seq, message_count, open_tail FROM {}.tl_sessions"
                    ).format(sql.Identifier(schema))
                ).fetchone()
            assert row is not None
            return row

        before = session_row()
        with tempfile.TemporaryFile() as f:
            conn.pgconn.trace(f.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            s.append_message("user", "four")
            conn.pgconn.untrace()
            f.seek(0)
            traced = f.read().decode().splitlines()
        sent = [line.split("\t")[2] for line in traced]
        assert [m for m in sent if m not in ("Describe", "Execute")] == [
            "Bind",
            "Sync",
            "BindComplete",
            "NoData",
            "CommandComplete",
            "ReadyForQuery",
        ]
        assert [line.split("\t")[3] for line in traced if "\tCommandComplete\t" in line] == [
            ' "INSERT 0 1"'
        ]
        # the session row was not updated (its row version is the same): a plain INSERT
        assert session_row() == before == (before[0], 3, 2, True)
        assert [e.message.text for e in st.open(s.id).entries()] == ["one", "two", "three", "four"]
        s.close()
        assert session_row()[1:] == (5, 4, False)  # the release folded "three" and "four" in
    finally:
        st.close()


def test_a_writer_connection_returns_to_the_pool_unlocked_and_without_the_tenant() -> None:
    st = tl.open_store(PG_URL, tenant="acme", schema=pg_schema(), max_size=1, max_writers=1)
    try:
        s = st.create()
        s.append_message("user", "one")
        backend = st.backend
        assert isinstance(backend, PostgresStore)
        s.close()
        conn = backend.writer_connection()  # max_writers=1: the connection the writer gave back
        try:
            row = conn.execute(
                "SELECT current_setting('threadline.tenant', true), "
                "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                "pid = pg_backend_pid())"
            ).fetchone()
            assert row == ("", 0)
        finally:
            backend.writer_done(conn)
    finally:
        st.close()


def test_the_writer_connection_given_back_is_kept_unless_a_writer_waits_on_the_pool() -> None:
    """The connection given back last goes to the next writer without the pool; a writer
    waiting on the pool (max_writers reached) gets the next one given back through the pool
    within writer_wait; the store's close closes the kept one."""
    st = tl.open_store(
        PG_URL, tenant="t", schema=pg_schema(), max_size=1, max_writers=1, writer_wait=5.0
    )
    try:
        backend = st.backend
        assert isinstance(backend, PostgresStore)
        first = backend.writer_connection()
        backend.writer_done(first)
        again = backend.writer_connection()
        assert again is first
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(backend.writer_connection()))
        waiter.start()
        deadline = time.monotonic() + 5
        while backend._pool_waiters == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert backend._pool_waiters == 1  # max_writers=1: it waits on the pool
        backend.writer_done(again)  # goes to the pool, so to the waiter, not into the slot
        waiter.join(timeout=4)
        assert got == [first]
        assert backend._idle_writer is None
        backend.writer_done(got[0])  # no one waits now: kept
        assert backend._idle_writer is first
    finally:
        st.close()
    assert first.closed


def test_writers_of_one_session_id_in_two_schemas_do_not_block_each_other() -> None:
    a = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=1)
    b = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=1)
    try:
        sa = a.create(session_id="same-id")
        sb = b.create(session_id="same-id")
        sa.append_message("user", "in schema a")  # holds the writer lock of a's session
        sb.append_message("user", "in schema b")  # lock_timeout 0: a shared key would refuse
        assert [e.message.text for e in a.open("same-id").entries()] == ["in schema a"]
        assert [e.message.text for e in b.open("same-id").entries()] == ["in schema b"]
        sa.close()
        sb.close()
    finally:
        a.close()
        b.close()


def test_a_writer_that_cannot_connect_is_told_so_not_that_max_writers_is_reached() -> None:
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=1, writer_wait=0.5)
    try:
        s = st.create()
        backend = st.backend
        assert isinstance(backend, PostgresStore)
        # the server goes away (or refuses: too many clients) after the store was opened
        backend.url = "postgresql://postgres@127.0.0.1:1/test"
        with pytest.raises(
            StoreError,
            match=r"^Cannot open a writer connection to PostgreSQL at 127.0.0.1:1/test within "
            r"0.5 s; check that the server runs and accepts more connections",
        ):
            s.append_message("user", "not written")
        assert [e.message.text for e in st.open(s.id).entries()] == []
    finally:
        st.close()


def test_the_folds_update_the_session_row_in_place_hot() -> None:
    """No index covers a column the fold's session-row update sets, so PostgreSQL updates the
    row on its page without new index entries (a HOT update), read from the server's
    statistics. Six appends update it twice: the first two appends fold, the rest are plain
    INSERTs until the release."""
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        s = st.create()
        s.append_message("user", "zero")  # the writer lock and the first fold
        conn = s.state.log._conn  # type: ignore[attr-defined]  # the writer's connection
        for i in range(5):
            time.sleep(0.002)  # a later timestamp: each append moves `modified`
            s.append_message("user", f"message {i}")
        conn.execute("SELECT pg_stat_force_next_flush()")  # flushed before the reply
        with psycopg.connect(PG_URL, autocommit=True) as owner:
            row = owner.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE "
                "schemaname = %s AND relname = 'tl_sessions'",
                (schema,),
            ).fetchone()
            indexed = {
                r[0]
                for r in owner.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                    "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = "
                    "to_regclass(%s)",
                    (f"{schema}.tl_sessions",),
                )
            }
        assert row == (2, 2)
        assert indexed == {"tenant_id", "session_id"}
        s.close()
    finally:
        st.close()


def test_the_listing_is_exact_after_appends_most_recently_modified_first() -> None:
    """Without an index on ``modified`` the listing still sorts by it, and its columns follow
    every append at once, while the writers still hold their sessions."""
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=1)
    try:
        a, b, c = st.create(), st.create(), st.create()
        a.append_message("user", "a's first")
        time.sleep(0.002)
        b.append_message("user", "b's first")
        b.append_message("assistant", "b's answer")
        time.sleep(0.002)
        c.append_session_info("named c")
        time.sleep(0.002)
        a.append_message("assistant", "a's answer")  # a is now the most recent
        listed = [(r.id, r.message_count, r.first_message, r.name) for r in st.list()]
        assert listed == [
            (a.id, 2, "a's first", None),
            (c.id, 0, None, "named c"),
            (b.id, 2, "b's first", None),
        ]
        modified = [r.modified for r in st.list()]
        assert modified == [
            a.entries()[-1].timestamp,
            c.entries()[-1].timestamp,
            b.entries()[-1].timestamp,
        ]
        for s in (a, b, c):
            s.close()
    finally:
        st.close()


def test_an_append_reads_the_search_columns_from_its_record_exactly_as_from_its_line() -> None:
    """The session hands the store the records it encoded: the indexed columns read from them
    (no second decode, no JSON parse) are those read from the lines, for every shape of
    message the columns tell apart."""
    from threadline.model.content import Message, text, thinking, tool_result, tool_use
    from threadline.model.entries import MessageEntry, SessionInfo, SessionInfoEntry, encode
    from threadline.store.postgres import _decoded, _encoded

    long = "word " * 5000  # over BODY_LIMIT
    contents = [
        [text("plain")],
        [text("  padded  ")],
        [text("")],
        [text("a"), text(""), text("b")],
        [text(long)],
        [text("first"), tool_use("c1", "grep", {"n": 10**120, "f": 1e308})],
        [tool_use("c1", "ls", {"path": "/"})],
        [tool_result("c1", "result text")],
        [thinking("hidden"), text("shown")],
        [text('control \x01 and quote " and U+2028 \u2028')],
        [text("a literal \\u0041")],
        [text("digits " + "7" * 150)],
        [],
    ]
    records: list[Any] = [
        MessageEntry(
            id=f"m{i}",
            parent_id=None,
            timestamp="2026-01-01T00:00:00Z",
            message=Message(role=role, content=content),
        )
        for i, content in enumerate(contents)
        for role in ("user", "assistant")
    ]
    # a text-only message with an integer jsonb may not read as _texts_of vouches for it
    records.append(
        MessageEntry(
            id="big",
            parent_id=None,
            timestamp="2026-01-01T00:00:00Z",
            message=Message(role="user", content=[text("t")], provider_details={"n": 10**120}),
        )
    )
    records.append(
        SessionInfoEntry(
            id="s",
            parent_id="m0",
            timestamp="2026-01-01T00:00:01Z",
            session_info=SessionInfo(name="n"),
        )
    )
    for rec in records:
        line = encode(rec)
        assert _encoded(line, rec)[0] == _decoded(line)[0], line[:120]


def test_the_plain_insert_through_libpq_reports_a_server_error_and_writes_nothing() -> None:
    """The usual append runs through libpq directly (postgres._insert_one): an error the server
    raises in it is the StoreError naming it, nothing is written, and the writer goes on."""
    schema = pg_schema()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(PROBE.encode())
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        s = st.create()
        s.append_message("user", "one")  # folds
        s.append_message("user", "two")  # folds and opens the tail
        with pytest.raises(StoreError, match=r"failed \(sync=on\); nothing was written"):
            s.append_message("user", "probe")  # the plain INSERT
        s.append_message("user", "three")
        assert [e.message.text for e in st.open(s.id).entries()] == ["one", "two", "three"]
        s.close()
        assert st.list()[0].message_count == 3
    finally:
        st.close()


def test_the_plain_insert_is_prepared_again_when_the_connection_forgot_it() -> None:
    schema = pg_schema()
    st = tl.open_store(PG_URL, tenant="t", schema=schema, max_size=1)
    try:
        s = st.create()
        for text in ("one", "two", "three"):  # the third is the first plain INSERT
            s.append_message("user", text)
        conn = s.state.log._conn  # type: ignore[attr-defined]  # the writer's connection
        names = "SELECT name FROM pg_prepared_statements WHERE name = 'threadline_insert_one'"
        assert conn.execute(names).fetchall() == [("threadline_insert_one",)]
        conn.execute("DEALLOCATE ALL")
        assert conn.execute(names).fetchall() == []
        s.append_message("user", "four")
        s.append_message("user", "five")
        assert conn.execute(names).fetchall() == [("threadline_insert_one",)]
        assert [e.message.text for e in st.open(s.id).entries()] == [
            "one",
            "two",
            "three",
            "four",
            "five",
        ]
        s.close()
    finally:
        st.close()
