"""Locks die with their holder, delete respects a live writer, raw OS and database errors become
StoreErrors that say what to do, hostile ids are refused, dead temp files are cleaned (issue 13)."""

from __future__ import annotations

import errno
import os
import re
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import BACKENDS, PG_URL, make_store
from threadline.errors import SessionLockedError, StoreError, UserError
from threadline.store import jsonl


def enospc(*_args: Any) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", ["abc\n", "abc\r", "a/b", "", "x" * 65, "ab c"])
def test_session_ids_that_are_not_plain_names_are_refused(
    backend: str, bad: str, tmp_path: Path
) -> None:
    store = make_store(backend, tmp_path)
    try:
        with pytest.raises(UserError, match="Invalid session id"):
            store.create(session_id=bad)
        with pytest.raises(UserError, match="Invalid session id"):
            store.open(bad)
        assert store.list() == []
    finally:
        store.close()


@pytest.mark.parametrize("bad", ["abc\n", "abc\r", "\nabc", "a/b", "x" * 65])
def test_framework_session_ids_with_a_trailing_newline_are_refused_or_scoped(bad: str) -> None:
    # the adapters' own id checks must not let "abc\n" through where the store refuses it
    from threadline.integrations._common import check_id
    from threadline.integrations.strands import ThreadlineSessionRepository

    with pytest.raises(UserError, match="cannot be a threadline session id"):
        check_id(bad, "LangChain")
    scoped = ThreadlineSessionRepository.threadline_id("chat", bad)
    assert scoped.startswith("strands-") and len(scoped) == len("strands-") + 40
    assert ThreadlineSessionRepository.threadline_id("chat", "helper") == "chat--helper"


def test_a_disk_full_first_write_leaves_the_session_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path)
    store.create(session_id="s").close()
    first = store.open("s")
    monkeypatch.setattr(jsonl, "_write", enospc)
    with pytest.raises(StoreError, match=r"No space left on device.*nothing was written"):
        first.append_message("user", "lost")
    monkeypatch.undo()
    second = store.open("s")  # not locked out by the session whose write failed
    second.append_message("user", "kept")
    second.close()
    assert [m.text for m in store.open("s").context().messages] == ["kept"]


def test_a_disk_full_lock_record_does_not_keep_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path)
    store.create(session_id="s").close()
    monkeypatch.setattr(jsonl.os, "pwrite", enospc)
    with pytest.raises(StoreError, match="free disk space"):
        store.open("s").append_message("user", "lost")
    monkeypatch.undo()
    with store.open("s") as again:
        again.append_message("user", "kept")


def test_a_disk_full_create_is_a_store_error_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path)
    monkeypatch.setattr(jsonl, "_write", enospc)
    with pytest.raises(
        StoreError,
        match=r"Cannot create session 'c' .*No space left on "
        r"device\); nothing was written",
    ):
        store.create(session_id="c")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_sqlite_writer_lock_dies_with_its_holder_even_when_the_pid_comes_back(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    store = tl.open_store(url)
    store.create(session_id="s").close()
    # what a writer that died leaves behind, when the restarted process got its pid (PID 1 in
    # a container): a tl_writers row naming this very (live) process
    conn = sqlite3.connect(tmp_path / "store.db")
    conn.execute(
        "INSERT INTO tl_writers VALUES ('s', 'dead-writer', ?, ?, 'then')",
        (socket.gethostname(), os.getpid()),
    )
    conn.commit()
    conn.close()
    with store.open("s") as s:
        s.append_message("user", "not locked out")
        with pytest.raises(SessionLockedError, match=f"locked by pid {os.getpid()}"):
            store.open("s").append_message("user", "a second writer")
    assert store.open("s").context().messages[0].text == "not locked out"


def test_deleting_a_jsonl_session_with_a_live_writer_is_refused(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    writer = store.create(session_id="busy")
    writer.append_message("user", "acknowledged")
    with pytest.raises(SessionLockedError, match=f"'busy' is locked by pid {os.getpid()}"):
        store.delete("busy")
    assert store.open("busy").context().messages[0].text == "acknowledged"
    writer.close()
    store.delete("busy")
    assert not store.exists("busy")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == []


def test_temp_files_of_a_killed_create_are_removed_when_the_store_opens(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above pid_max on this machine's default: no such process
    (tmp_path / f".abc.jsonl.{dead}.tmp").write_bytes(b"half a session")
    (tmp_path / f".def.jsonl.{dead}-140000.tmp").write_bytes(b"half an import")
    live = tmp_path / f".ghi.jsonl.{os.getpid()}-1.tmp"
    live.write_bytes(b"being written right now")
    tl.open_store(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def test_backups_and_purge_rewrites_go_through_temp_files_a_restart_can_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path)
    with store.create(session_id="d") as s:
        s.append_message("user", "secret Zq7-left-in-temp")
    written: list[str] = []
    real = jsonl.write_file_atomic

    def record(tmp: Path, *args: Any, **kwargs: Any) -> Any:
        written.append(tmp.name)
        return real(tmp, *args, **kwargs)

    monkeypatch.setattr(jsonl, "write_file_atomic", record)
    log = store.backend.open_log("d")  # type: ignore[attr-defined]
    log.backup("x")
    (tmp_path / "d.jsonl.torn").write_bytes(b'{"torn secret Zq7-left-in-temp')
    with store.open("d") as s:
        s.purge(s.entry_ids()[-1:], dry_run=False)  # type: ignore[attr-defined]
    tag = rf"{os.getpid()}-\d+"
    assert written and all(
        re.fullmatch(rf"\.d\.jsonl\.(x\.bak|torn)\.{tag}\.tmp|\.d\.jsonl\.{tag}\.tmp", n)
        for n in written
    ), written
    # a temp file that an older version left beside the session is cleaned by a purge
    (tmp_path / "d.jsonl.torn.tmp").write_bytes(b"old Zq7-second")
    with store.open("d") as s:
        first = s.append_message("user", "Zq7-second")
        s.purge([first], dry_run=False)  # type: ignore[attr-defined]
    assert not (tmp_path / "d.jsonl.torn.tmp").exists()
    assert [p.name for p in tmp_path.iterdir() if b"Zq7" in p.read_bytes()] == []
    store.close()


def test_an_unreachable_postgresql_fails_within_three_seconds_with_one_line() -> None:
    silent = socket.socket()  # accepts connections and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        for url in (
            f"postgresql://postgres@127.0.0.1:{port}/test",
            "postgresql://postgres@127.0.0.1:1/test",
        ):
            started = time.monotonic()
            with pytest.raises(StoreError) as info:
                tl.open_store(url, tenant="t")
            assert time.monotonic() - started < 4.0
            message = str(info.value)
            assert "\n" not in message
            assert message.startswith(
                f"Cannot connect to PostgreSQL at 127.0.0.1:"
                f"{url.split(':')[2].split('/')[0]}/test ("
            )
            assert message.endswith("check the URL and that the server runs")
    finally:
        silent.close()


def test_a_lost_postgresql_connection_is_a_store_error(tmp_path: Path) -> None:
    import psycopg

    store: Any = make_store("postgres", tmp_path, max_size=1)
    try:
        store.create(session_id="s").close()
        with store.backend.pool.connection() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        time.sleep(0.2)
        with pytest.raises(StoreError) as info:
            store.exists("s")
        message = str(info.value)
        assert message.startswith("PostgreSQL at 127.0.0.1:5432/test failed (")
        assert message.endswith("check that the server runs and is reachable, then retry")
        assert store.exists("s")  # the pool replaced the broken connection
    finally:
        store.close()


def test_a_sessions_lock_is_released_when_a_thread_holding_it_errors(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s = store.create(session_id="t")
    done = threading.Event()

    def boom() -> None:
        try:
            s.branch("no-such-entry")
        except UserError:
            done.set()

    t = threading.Thread(target=boom)
    t.start()
    t.join()
    assert done.is_set()
    s.append_message("user", "the session lock was let go")
    assert s.context().messages[0].text == "the session lock was let go"
