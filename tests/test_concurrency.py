"""One writer per session, lock-free readers (DESIGN §3), across real processes.

Two Session objects in one process are covered by the conformance suite (every backend); here the
JSONL store's ``flock`` is exercised from separate processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

import threadline as tl
from _crash_writer import SRC, spawn_writer
from threadline.errors import SessionLockedError

# A session driven over stdin: "append TEXT" answers "ok ID" or "locked PID"; "close"; "quit".
HOLDER = r"""
import sys
import threadline as tl

s = tl.open_store(sys.argv[1]).open(sys.argv[2])
print("ready", flush=True)
for line in sys.stdin:
    cmd, _, arg = line.rstrip("\n").partition(" ")
    if cmd == "append":
        try:
            print("ok", s.append_message("user", arg), flush=True)
        except tl.SessionLockedError as exc:
            print("locked", exc.pid, flush=True)
    elif cmd == "close":
        s.close()
        print("closed", flush=True)
    elif cmd == "quit":
        break
"""


class Holder:
    """Another process with the session open (not yet writing)."""

    def __init__(self, store: tl.Store, sid: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, store.url, sid],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.read() == "ready"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().rstrip("\n")

    def ask(self, line: str) -> str:
        self.send(line)
        return self.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):  # it may have died (killed) a moment ago
                self.send("quit")
        self.proc.communicate(timeout=20)  # also closes the pipes


def session_file(store: tl.Store, sid: str) -> Path:
    return Path(store.url) / f"{sid}.jsonl"


def test_a_second_process_gets_session_locked_error_naming_the_holder(
    jsonl_store: tl.Store,
) -> None:
    with jsonl_store.create() as s0:
        first = s0.append_message("user", "first")
    mine = jsonl_store.open(s0.id)  # loaded now, before the other process writes
    other = Holder(jsonl_store, s0.id)
    try:
        ok, theirs = other.ask("append from-the-other-process").split()
        assert ok == "ok"
        before = session_file(jsonl_store, s0.id).read_bytes()
        with pytest.raises(SessionLockedError) as info:
            mine.append_message("user", "mine")
        assert info.value.pid == other.pid
        assert str(info.value) == (
            f"Session '{s0.id}' is locked by pid {other.pid}; close the "
            "other writer or open read-only"
        )
        assert session_file(jsonl_store, s0.id).read_bytes() == before
        ok, theirs2 = other.ask("append again").split()
        assert other.ask("close") == "closed"
    finally:
        other.stop()
    # taking the lock, this writer first reads what the other appended: its parent is not stale
    new = mine.append_message("user", "mine")
    assert mine.entry(new).parent_id == theirs2
    assert mine.path_ids() == [first, theirs, theirs2, new]
    mine.close()
    assert jsonl_store.open(s0.id).path_ids() == [first, theirs, theirs2, new]


def test_of_two_processes_racing_for_the_lock_exactly_one_wins(jsonl_store: tl.Store) -> None:
    with jsonl_store.create() as s0:
        chain = [s0.append_message("user", "start")]
    a, b = Holder(jsonl_store, s0.id), Holder(jsonl_store, s0.id)
    try:
        for rnd in range(8):
            a.send(f"append a{rnd}")
            b.send(f"append b{rnd}")
            answers = {a.pid: a.read().split(), b.pid: b.read().split()}
            winners = [pid for pid, ans in answers.items() if ans[0] == "ok"]
            assert len(winners) == 1, answers
            (winner,) = winners
            (loser,) = set(answers) - {winner}
            assert answers[loser] == ["locked", str(winner)]
            chain.append(answers[winner][1])
            assert (a if winner == a.pid else b).ask("close") == "closed"
    finally:
        a.stop()
        b.stop()
    s = jsonl_store.open(s0.id)
    assert s.path_ids() == chain  # each winner appended under the previous winner's entry
    assert s.load_report.clean


def test_the_lock_is_free_again_once_the_holder_is_killed(jsonl_store: tl.Store) -> None:
    with jsonl_store.create() as s0:
        s0.append_message("user", "start")
    other = Holder(jsonl_store, s0.id)
    ok, theirs = other.ask("append x").split()
    assert ok == "ok"
    other.proc.send_signal(signal.SIGKILL)
    other.stop()
    s = jsonl_store.open(s0.id)
    new = s.append_message("user", "after the kill")
    assert s.entry(new).parent_id == theirs


def test_the_lock_survives_closing_other_descriptors_of_the_same_files(
    jsonl_store: tl.Store,
) -> None:
    # lockf/fcntl record locks vanish when the process closes ANY descriptor of the file;
    # flock belongs to the open file description and must survive all of this
    writer = jsonl_store.create()
    writer.append_message("user", "held")
    lock_path = Path(jsonl_store.url) / f"{writer.id}.lock"
    os.close(os.open(lock_path, os.O_RDONLY))
    os.close(os.open(session_file(jsonl_store, writer.id), os.O_RDONLY))
    with open(lock_path, "rb") as fh:
        fh.read()
    reader = jsonl_store.open(writer.id, read_only=True)
    reader.close()
    second = jsonl_store.open(writer.id)
    with pytest.raises(SessionLockedError):
        second.append_message("user", "no")
    second.close()
    del second
    # another process still finds the lock held, by us
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
            "except BlockingIOError:\n    print('held')\n",
            str(lock_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout == "held\n"
    other = Holder(jsonl_store, writer.id)
    try:
        assert other.ask("append theirs") == f"locked {os.getpid()}"
    finally:
        other.stop()
    # and the writer still writes
    writer.append_message("user", "still mine")
    writer.close()
    assert not lock_path.exists()  # released by close(), and no lock file stays behind


def test_a_reader_during_writes_never_sees_a_corrupt_entry(jsonl_store: tl.Store) -> None:
    seed = 0  # an even seed: the writer runs until it is killed
    sid = "busy"
    with jsonl_store.create(session_id=sid) as s0:
        s0.append_message("user", "start")
    writer = spawn_writer(Path(jsonl_store.url), sid, seed)
    seen: dict[str, bytes] = {}
    counts = []
    torn_reads = 0
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            r = jsonl_store.open(sid, read_only=True)
            rep = r.load_report
            assert (rep.corrupt_lines, rep.duplicate_ids, rep.orphans, rep.cycles) == (
                [],
                [],
                [],
                [],
            )
            torn_reads += rep.torn_bytes > 0
            entries = r.entries()
            counts.append(len(entries))
            for e in entries:
                encoded = msgspec.json.encode(e)
                assert seen.setdefault(e.id, encoded) == encoded
            r.close()
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=20)
    assert counts == sorted(counts)  # a later reader never sees fewer entries
    assert counts[-1] > 3
    assert torn_reads > 0  # the reads did land while a record was half written
    final = jsonl_store.open(sid, read_only=True)
    for e in final.entries():
        if e.id in seen:
            assert msgspec.json.encode(e) == seen[e.id]
    assert set(seen) <= {e.id for e in final.entries()}


def test_a_writer_refuses_to_append_after_another_writer_rewrote_the_file(
    jsonl_store: tl.Store,
) -> None:
    # byte offsets taken at load point into the old file after a rewrite (purge): reading on
    # from them would miss entries and hand out a stale parent
    with jsonl_store.create() as s0:
        secret = s0.append_message("user", "secret " * 50)
        s0.append_message("assistant", "reply")
    a = jsonl_store.open(s0.id)
    with jsonl_store.open(s0.id) as b:
        more = b.append_message("user", "more")
        b.purge([secret], dry_run=False)
    before = session_file(jsonl_store, s0.id).read_bytes()
    with pytest.raises(
        tl.StoreError,
        match=f"Session '{s0.id}' was rewritten by another "
        "writer since it was opened; open it again",
    ):
        a.append_message("user", "from a")
    assert session_file(jsonl_store, s0.id).read_bytes() == before
    again = jsonl_store.open(s0.id)  # the advice works: a fresh session writes under `more`
    new = again.append_message("user", "from a")
    assert again.entry(new).parent_id == more
    assert again.load_report.clean
