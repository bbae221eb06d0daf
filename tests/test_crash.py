"""Crash safety of the JSONL store (DESIGN §3): SIGKILL a writer mid-stream, 100 trials.

The child process and the checks are in _crash_writer.py (bench/crash_trials.py runs 1,000 of the
same trials). Each trial checks: no acknowledged entry lost or changed, the session loads with a
clean report apart from the torn tail, the torn tail lands in ``<id>.jsonl.torn`` on the first
append, and that append survives a reopen.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import Any

import msgspec
import pytest

import threadline as tl
import threadline.store.jsonl as jsonl
from _crash_writer import run_trial, self_kills, spawn_writer

TRIALS = 100


@pytest.mark.parametrize("seed", range(TRIALS))
def test_a_writer_killed_mid_stream_loses_no_acknowledged_entry(tmp_path: Path, seed: int) -> None:
    result = run_trial(tmp_path, seed)
    if self_kills(seed) and result.exists:
        # the child died inside a partial write of a record: the tail must have torn
        assert result.torn_bytes > 0


# -- failed and short writes, in process ---------------------------------------------------------


def _file(store: tl.Store, sid: str) -> Path:
    return Path(store.url) / f"{sid}.jsonl"


def test_short_writes_are_looped_until_the_whole_record_is_written(
    jsonl_store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def one_byte(fd: int, data: Any) -> int:
        calls.append(len(data))
        return os.write(fd, bytes(data[:1]))

    monkeypatch.setattr(jsonl, "_write", one_byte)
    s = jsonl_store.create()
    eid = s.append_message("user", "héllo\u2028")
    s.close()
    assert len(calls) > 100
    again = jsonl_store.open(s.id)
    assert again.load_report.clean
    assert again.entry(eid).message.text == "héllo\u2028"


def test_a_failed_write_truncates_back_and_raises(
    jsonl_store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = jsonl_store.create()
    a = s.append_message("user", "a")
    before = _file(jsonl_store, s.id).read_bytes()

    def disk_full(fd: int, data: Any) -> int:
        if len(data) > 20:
            return os.write(fd, bytes(data[:20]))  # part of the record reaches the file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonl, "_write", disk_full)
    with pytest.raises(
        tl.StoreError,
        match=r"failed \(No space left on device\); nothing was "
        r"written\. Check free disk space",
    ):
        s.append_message("user", "b" * 100)
    assert _file(jsonl_store, s.id).read_bytes() == before
    assert [e.id for e in s.entries()] == [a]
    assert s.leaf_id == a
    monkeypatch.undo()
    c = s.append_message("user", "c")
    s.close()
    again = jsonl_store.open(s.id)
    assert again.load_report.clean
    assert again.path_ids() == [a, c]


def test_a_failed_sync_truncates_back_and_drops_the_descriptor(
    jsonl_store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = jsonl_store.create()
    a = s.append_message("user", "a")
    before = _file(jsonl_store, s.id).read_bytes()
    synced: list[int] = []

    def failing_sync(fd: int) -> None:
        synced.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing_sync)
    with pytest.raises(tl.StoreError, match="Input/output error"):
        s.append_message("user", "b")
    monkeypatch.undo()
    assert _file(jsonl_store, s.id).read_bytes() == before
    assert s.state.log._fd is None  # type: ignore[attr-defined]  # never fsync it again
    assert [e.id for e in s.entries()] == [a]
    c = s.append_message("user", "c")
    assert s.entry(c).parent_id == a
    s.close()
    assert jsonl_store.open(s.id).path_ids() == [a, c]


def test_a_writer_catches_up_over_another_writer_that_crashed(jsonl_store: tl.Store) -> None:
    seed = 1  # an odd seed: the child kills itself inside a partial write
    sid = "shared"
    with jsonl_store.create(session_id=sid) as s0:
        first = s0.append_message("user", "first")
    mine = jsonl_store.open(sid)  # loaded before the other writer appends
    child = spawn_writer(Path(jsonl_store.url), sid, seed)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    fresh = jsonl_store.open(sid, read_only=True)
    assert fresh.load_report.torn_bytes > 0
    assert len(fresh.entries()) > 1
    torn = _file(jsonl_store, sid).read_bytes()[-fresh.load_report.torn_bytes :]
    new = mine.append_message("user", "mine")
    assert mine.entry(new).parent_id == fresh.leaf_id
    assert [e.id for e in mine.entries()] == [e.id for e in fresh.entries()] + [new]
    mine.close()
    assert (Path(jsonl_store.url) / f"{sid}.jsonl.torn").read_bytes() == torn + b"\n"
    again = jsonl_store.open(sid)
    assert again.load_report.clean
    assert again.leaf_id == new
    del first


@pytest.mark.parametrize(
    ("options", "syncs"), [({}, 3), ({"durability": "fsync"}, 3), ({"durability": "flush"}, 0)]
)
def test_every_append_and_navigation_is_synced_unless_durability_is_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], syncs: int
) -> None:
    store = tl.open_store(tmp_path / "store", **options)
    s = store.create()
    synced: list[int] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    a = s.append_message("user", "a")
    s.append_message("assistant", "b")
    s.branch(a)
    assert len(synced) == syncs


@pytest.mark.parametrize("seed", [1, 5, 7, 11, 15])  # odd: self-kill; none creates
def test_a_writer_killed_while_repairing_a_torn_tail_loses_nothing(
    jsonl_store: tl.Store, seed: int
) -> None:
    sid = "twice"
    with jsonl_store.create(session_id=sid) as s0:
        s0.append_message("user", "first")
    root = Path(jsonl_store.url)
    first_crash = spawn_writer(root, sid, seed)
    first_crash.communicate(timeout=60)
    assert first_crash.returncode == -signal.SIGKILL
    after_first = jsonl_store.open(sid, read_only=True)
    torn = _file(jsonl_store, sid).read_bytes()[-after_first.load_report.torn_bytes :]
    assert after_first.load_report.torn_bytes > 0
    known = {e.id: msgspec.json.encode(e) for e in after_first.entries()}
    # the second writer dies at its first partial write: copying the tail into .torn, or the
    # append right after the repair
    second_crash = spawn_writer(root, sid, seed + 1000, kill_at_call=1)
    second_crash.communicate(timeout=60)
    assert second_crash.returncode == -signal.SIGKILL
    after_second = jsonl_store.open(sid)
    rep = after_second.load_report
    assert (rep.corrupt_lines, rep.duplicate_ids, rep.orphans, rep.cycles) == ([], [], [], [])
    assert {e.id: msgspec.json.encode(e) for e in after_second.entries() if e.id in known} == known
    extra = [e for e in after_second.entries() if e.id not in known]
    assert len(extra) <= 1
    assert all(e.parent_id == after_first.leaf_id for e in extra)
    last = after_second.append_message("user", "third writer")
    after_second.close()
    assert torn + b"\n" in (root / f"{sid}.jsonl.torn").read_bytes()
    final = jsonl_store.open(sid)
    assert final.load_report.clean
    assert final.leaf_id == last
    assert set(known) <= {e.id for e in final.entries()}
