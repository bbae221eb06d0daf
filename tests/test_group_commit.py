"""Group commit (issue 19): ``Session.batch()`` makes a batch of appends durable with one sync,
``durability="group"`` lets concurrent appends share sync rounds. Acknowledgement semantics are
in docs/core.md; the kill -9 trials (tests/_crash_writer.py) cover batches too."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

import threadline as tl


def count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every fdatasync from now on, as (inode, size) of the synced file."""
    synced: list[tuple[int, int]] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        st = os.fstat(fd)
        real(fd)
        synced.append((st.st_ino, st.st_size))

    monkeypatch.setattr(os, "fdatasync", counting)
    return synced


@pytest.mark.parametrize(("durability", "syncs"), [("fsync", 1), ("group", 1), ("flush", 0)])
def test_a_batch_of_ten_appends_is_made_durable_with_one_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, syncs: int
) -> None:
    store = tl.open_store(tmp_path, durability=durability)  # type: ignore[arg-type]
    s = store.create()
    s.append_message("user", "before")
    synced = count_syncs(monkeypatch)
    with s.batch():
        ids = [s.append_message("user", f"m{i}") for i in range(10)]
        with s.batch():  # nested blocks: only the outermost one syncs
            ids.append(s.append_message("assistant", "nested"))
        assert synced == []  # written (readers see them), not yet synced
        assert [e.id for e in store.open(s.id).path()][1:] == ids
    assert len(synced) == syncs
    if syncs:
        assert synced[0][1] == (tmp_path / f"{s.id}.jsonl").stat().st_size
    s.close()
    assert [m.text for m in store.open(s.id).context().messages] == (
        ["before"] + [f"m{i}" for i in range(10)] + ["nested"]
    )


def test_a_failed_batch_sync_keeps_none_of_the_batch_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path)
    s = store.create()
    kept = s.append_message("user", "kept")
    before = (tmp_path / f"{s.id}.jsonl").read_bytes()

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with (
        pytest.raises(
            tl.StoreError,
            match=r"Syncing a batch of session '.*' failed \(Input/"
            r"output error\); none of the batch's entries were "
            r"kept",
        ),
        s.batch(),
    ):
        s.append_message("assistant", "lost 1")
        monkeypatch.setattr(os, "fdatasync", failing)
        s.append_message("user", "lost 2")
    monkeypatch.undo()
    assert (tmp_path / f"{s.id}.jsonl").read_bytes() == before
    assert [e.id for e in s.entries()] == [kept]
    after = s.append_message("assistant", "after")
    assert s.entry(after).parent_id == kept
    s.close()
    assert store.open(s.id).path_ids() == [kept, after]


def test_group_durability_acknowledges_each_append_after_a_sync_that_covers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path, durability="group")
    sessions = [store.create() for _ in range(4)]
    for s in sessions:
        s.append_message("user", "first")  # takes the writer locks
    synced = count_syncs(monkeypatch)
    start = threading.Barrier(4)
    problems: list[str] = []

    def write(s: tl.Session) -> None:
        start.wait()
        for i in range(20):
            s.append_message("user", f"{s.id} {i}")
            path = tmp_path / f"{s.id}.jsonl"
            st = path.stat()
            # a sync of this file that saw at least what this append wrote
            if not any(ino == st.st_ino and size >= st.st_size for ino, size in list(synced)):
                problems.append(f"{s.id} {i} acknowledged before a sync covered it")

    threads = [threading.Thread(target=write, args=(s,)) for s in sessions]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert problems == []
    assert len(synced) <= 80  # never more syncs than appends
    for s in sessions:
        s.close()
        assert [m.text for m in store.open(s.id).context().messages][1:] == [
            f"{s.id} {i}" for i in range(20)
        ]


def test_a_failed_group_sync_fails_the_waiting_append_and_keeps_what_was_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tl.open_store(tmp_path, durability="group")
    s = store.create()
    kept = s.append_message("user", "kept")
    before = (tmp_path / f"{s.id}.jsonl").read_bytes()

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(
        tl.StoreError,
        match=r"failed \(Input/output error\); nothing was "
        r"written",
    ):
        s.append_message("user", "lost")
    monkeypatch.undo()
    assert (tmp_path / f"{s.id}.jsonl").read_bytes() == before
    assert [e.id for e in s.entries()] == [kept]
    after = s.append_message("assistant", "after")
    s.close()
    assert store.open(s.id).path_ids() == [kept, after]
