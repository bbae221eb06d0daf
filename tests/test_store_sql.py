"""What the database stores add to the conformance suite: migrations, list columns, atomic
appends under an injected failure, writer exclusion across processes, parallel writers."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

import threadline as tl
from conftest import PG_URL, make_store, pg_schema
from threadline.cli.main import cli
from threadline.errors import SessionLockedError, StoreError
from threadline.model.content import Message, text
from threadline.model.entries import MessageEntry, new_id

SQL_BACKENDS = ["sqlite", "postgres"]


def owner_exec(store: Any, statement: str) -> None:
    """Run DDL as the owner of the store's tables (trigger planting in tests)."""
    if isinstance(store.backend, tl.store.sqlite.SqliteStore):
        conn = sqlite3.connect(store.backend.path)
        conn.executescript(statement)
        conn.close()
        return
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.backend.schema)))
        conn.execute(statement.encode())


FAIL_ON_SEQ = {
    "sqlite": (
        "CREATE TRIGGER boom BEFORE INSERT ON tl_records WHEN new.seq = 3 "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
    ),
    "postgres": (
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF new.seq = 3 THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN new; "
        "END $$; CREATE TRIGGER boom BEFORE INSERT ON tl_records FOR EACH ROW "
        "EXECUTE FUNCTION boom();"
    ),
}


def test_sqlite_migrations_apply_from_empty_and_then_apply_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fresh.db"
    runner = CliRunner()
    first = runner.invoke(cli, ["db", "upgrade", url])
    again = runner.invoke(cli, ["db", "upgrade", url])
    assert (first.exit_code, first.output) == (
        0,
        "Applied migrations: sqlite 1, sqlite 2, sqlite 3, sqlite 4, catalog 1\n",
    )
    assert (again.exit_code, again.output) == (0, "The schema is up to date; nothing to apply.\n")


def test_postgres_migrations_apply_from_empty_and_then_apply_nothing() -> None:
    schema = f"t_{os.getpid()}_cli"
    runner = CliRunner()
    try:
        first = runner.invoke(cli, ["db", "upgrade", PG_URL, "--schema", schema])
        again = runner.invoke(cli, ["db", "upgrade", PG_URL, "--schema", schema])
        with psycopg.connect(PG_URL) as conn:
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
                )
            }
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    applied = (
        "Applied migrations: postgres 1, postgres 2, postgres 3, postgres 4, postgres 5, "
        "postgres 6, postgres 7\n"
    )
    assert (first.exit_code, first.output) == (0, applied)
    assert (again.exit_code, again.output) == (0, "The schema is up to date; nothing to apply.\n")
    assert tables == {
        "tl_schema_migrations",
        "tl_sessions",
        "tl_records",
        "tl_vectors",
        "tl_session_tags",
        "tl_tag_tokens",
        "tl_tenant_roles",
    }


def test_postgres_store_refuses_a_schema_that_was_never_migrated() -> None:
    with pytest.raises(
        StoreError,
        match=r"schema is at version 0, threadline needs 7; run: "
        r"threadline db upgrade URL",
    ):
        tl.open_store(PG_URL, tenant="x", schema="t_never_migrated_here")


def test_sqlite_runs_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    st = make_store("sqlite", tmp_path)
    try:
        assert st.backend.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # type: ignore[attr-defined]
        assert st.backend.conn.execute("PRAGMA synchronous").fetchone() == (2,)  # type: ignore[attr-defined]
    finally:
        st.close()


@pytest.mark.parametrize("kind", SQL_BACKENDS)
def test_list_reads_the_list_columns_not_the_records(kind: str, tmp_path: Path) -> None:
    st = make_store(kind, tmp_path)
    try:
        with st.create() as s:
            s.append_message("user", "first question")
            s.append_message("assistant", "an answer")
            s.append_session_info("named")
        # spoil every stored record: a listing that parsed them would change (JSON, not a
        # record: PostgreSQL's keyword index reads the text of a message from its JSON)
        owner_exec(
            st,
            "UPDATE tl_records SET raw = CAST('\"garbage\"' AS "
            + ("BLOB" if kind == "sqlite" else "bytea")
            + ");",
        )
        [row] = st.list()
        assert (row.id, row.name, row.message_count, row.first_message) == (
            s.id,
            "named",
            2,
            "first question",
        )
    finally:
        st.close()


@pytest.mark.parametrize("kind", SQL_BACKENDS)
def test_a_failed_append_writes_nothing(kind: str, tmp_path: Path) -> None:
    st = make_store(kind, tmp_path)
    try:
        s = st.create()
        s.append_message("user", "kept")  # seq 1
        owner_exec(st, FAIL_ON_SEQ[kind])
        parent = s.leaf_id
        recs = []
        for i in range(3):  # seqs 2, 3, 4: the second one fails inside the transaction
            rec = MessageEntry(
                id=new_id(),
                parent_id=parent,
                timestamp=f"2024-01-01T00:00:0{i}Z",
                message=Message(role="user", content=[text(f"m{i}")]),
            )
            recs.append(rec)
            parent = rec.id
        with pytest.raises(StoreError, match=r"failed \(injected failure\); nothing was written"):
            s.append_records(recs)
        s.close()
        again = st.open(s.id, read_only=True)
        assert [e.message.text for e in again.entries()] == ["kept"]
        assert st.list()[0].message_count == 1
    finally:
        st.close()


HOLDER = textwrap.dedent("""
    import sys, time
    import threadline as tl
    url, schema, sid = sys.argv[1], sys.argv[2], sys.argv[3]
    opts = {"tenant": "test", "schema": schema} if url.startswith("postgresql") else {}
    st = tl.open_store(url, **opts)
    s = st.open(sid)
    s.append_message("user", "from the other process")
    print("held", flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("kind", SQL_BACKENDS)
def test_a_writer_in_another_process_is_refused_with_its_pid(kind: str, tmp_path: Path) -> None:
    st = make_store(kind, tmp_path)
    url = PG_URL if kind == "postgres" else st.url
    schema = getattr(st.backend, "schema", "-")
    s = st.create()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, schema, s.id], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "held\n"
        with pytest.raises(SessionLockedError) as info:
            s.append_message("user", "from here")
        assert info.value.pid == proc.pid
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    s.append_message("user", "after the other writer died")  # its lock went with it
    assert [e.message.text for e in s.entries()] == [
        "from the other process",
        "after the other writer died",
    ]
    s.close()
    st.close()


def test_sqlite_takes_over_the_writer_row_of_a_dead_process(tmp_path: Path) -> None:
    st = make_store("sqlite", tmp_path)
    s = st.create()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    st.backend.conn.execute(
        "INSERT INTO tl_writers VALUES (?, 'gone', ?, ?, '')",  # type: ignore[attr-defined]
        (s.id, tl.store.sqlite._HOST, dead.pid),
    )
    s.append_message("user", "mine now")
    assert [e.message.text for e in st.open(s.id, read_only=True).entries()] == ["mine now"]
    s.close()
    st.close()


@pytest.mark.parametrize("kind", SQL_BACKENDS)
def test_eight_writers_on_eight_sessions_append_in_parallel(kind: str, tmp_path: Path) -> None:
    st = make_store(kind, tmp_path, **({"max_size": 10} if kind == "postgres" else {}))
    sessions = [st.create() for _ in range(8)]
    errors: list[BaseException] = []

    def write(s: tl.Session) -> None:
        try:
            for i in range(15):
                s.append_message("user", f"{s.id} #{i}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in sessions]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for s in sessions:
        s.close()
    try:
        assert errors == []
        for s in sessions:
            again = st.open(s.id, read_only=True)
            assert [e.message.text for e in again.path()] == [f"{s.id} #{i}" for i in range(15)]
        assert sorted(r.message_count for r in st.list()) == [15] * 8
    finally:
        st.close()


def test_a_postgres_store_works_as_the_application_role() -> None:
    st = tl.open_store(PG_URL, tenant="t", schema=pg_schema(), max_size=1)
    try:
        with st.backend.tx() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SELECT current_user").fetchone() == ("threadline_app",)
    finally:
        st.close()


def test_scrub_reports_an_older_transaction_that_wrote_and_sits_idle() -> None:
    # An open transaction that wrote has an xid but no snapshot (backend_xmin is null between
    # statements); the server's horizon still counts it, so VACUUM FULL would keep the rows it
    # could see. The scrub must say so instead of claiming the text is gone.
    import psycopg

    from threadline.store.postgres import WAL_RESIDUE, scrub

    schema = pg_schema()
    with psycopg.connect(PG_URL) as idle:  # not autocommit: the transaction stays open
        idle.execute("CREATE TEMP TABLE scratch (x int)")
        idle.execute("INSERT INTO scratch VALUES (1)")
        got = idle.execute(
            "SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        assert got == (True,)  # it holds an xid
        residue = scrub(PG_URL, schema, wait=0.3)
        assert residue[0].startswith("a transaction older than the purge was still open")
        assert residue[-1] == WAL_RESIDUE
        idle.rollback()
    assert scrub(PG_URL, schema, wait=0.3) == [WAL_RESIDUE]
