"""Sessions and stores shared between threads (issue 13, DESIGN §3 "Threads"): concurrent appends
serialize, each parents to the leaf at the moment it is written, nothing acknowledged is lost,
and a failed append never removes what was acknowledged before it."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import BACKENDS, make_store
from threadline.errors import StoreError

THREADS = 8
APPENDS = 500


def run_threads(n: int, work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def body(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def quick_store(backend: str, tmp_path: Path) -> tl.Store:
    """A store that skips fsync: these tests are about threads, not crashes."""
    if backend == "jsonl":
        return tl.open_store(tmp_path / "sessions", durability="flush")
    if backend == "sqlite":
        return tl.open_store(f"sqlite:///{tmp_path}/store.db", durability="flush")
    if backend == "postgres":
        return make_store(backend, tmp_path, durability="flush")
    return make_store(backend, tmp_path)


def assert_one_chain(s: tl.Session, acked: list[str]) -> None:
    """Every acknowledged entry is in the session, they form one chain from one root, and the
    leaf is the end of that chain."""
    parents = {e.id: e.parent_id for e in s.entries()}
    assert set(acked) <= set(parents)
    roots = [e for e, p in parents.items() if p is None]
    assert len(roots) == 1
    children: dict[str, list[str]] = {}
    for e, p in parents.items():
        if p is not None:
            children.setdefault(p, []).append(e)
    assert all(len(c) == 1 for c in children.values())  # no branch: each saw the latest leaf
    tip = roots[0]
    walked = 1
    while tip in children:
        tip = children[tip][0]
        walked += 1
    assert walked == len(parents)
    assert s.leaf_id == tip


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_appending_to_one_shared_session_lose_nothing_and_build_one_chain(
    backend: str, tmp_path: Path
) -> None:
    store = quick_store(backend, tmp_path)
    try:
        s = store.create()
        acked: list[list[str]] = [[] for _ in range(THREADS)]

        def work(i: int) -> None:
            for n in range(APPENDS):
                acked[i].append(
                    s.append_message("user" if n % 2 else "assistant", f"thread {i} message {n}")
                )
                if n % 100 == 0:
                    assert len(s.context().messages) >= n  # a reader between writes

        run_threads(THREADS, work)
        every = [e for part in acked for e in part]
        assert len(every) == len(set(every)) == THREADS * APPENDS
        assert_one_chain(s, every)
        s.close()
        again = store.open(s.id)
        assert_one_chain(again, every)
        assert len(again.context().messages) == THREADS * APPENDS
        for i in range(THREADS):  # each thread's own appends stay in its order
            order = [m.text for m in again.context().messages if m.text.startswith(f"thread {i} ")]
            assert order == [f"thread {i} message {n}" for n in range(APPENDS)]
    finally:
        store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_threads_sharing_one_store_with_many_sessions_lose_nothing(
    backend: str, tmp_path: Path
) -> None:
    store = quick_store(backend, tmp_path)
    try:
        made: list[dict[str, list[str]]] = [{} for _ in range(THREADS)]

        def work(i: int) -> None:
            for k in range(10):
                with store.create() as s:
                    made[i][s.id] = [
                        s.append_message("user", f"t{i} s{k} m{n}") for n in range(APPENDS // 10)
                    ]
                store.list()  # listing while others write

        run_threads(THREADS, work)
        listed = {r.id: r.message_count for r in store.list()}
        want = {sid: len(ids) for part in made for sid, ids in part.items()}
        assert listed == want
        for part in made:
            for sid, ids in part.items():
                assert_one_chain(store.open(sid, read_only=True), ids)
    finally:
        store.close()


def test_a_failed_append_keeps_every_acknowledged_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadline.store import jsonl

    store = tl.open_store(tmp_path)
    s = store.create(session_id="f")
    acked = [s.append_message("user", f"m{n}") for n in range(20)]
    real = jsonl._write
    failing: list[int] = []

    def flaky(fd: int, data: Any) -> int:
        if threading.get_ident() in failing:
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(jsonl, "_write", flaky)
    results: list[str] = []

    def work(i: int) -> None:
        for n in range(50):
            if i == 0 and n == 25:
                failing.append(threading.get_ident())
                with pytest.raises(StoreError, match="No space left on device"):
                    s.append_message("user", "doomed")
                failing.clear()
                continue
            results.append(s.append_message("user", f"t{i} {n}"))

    run_threads(4, work)
    s.close()
    again = store.open("f")
    assert_one_chain(again, acked + results)
    assert len(again.entry_ids()) == 20 + len(results) == 20 + 199


def test_an_async_caller_is_not_blocked_by_another_sessions_io(tmp_path: Path) -> None:
    from threadline.aio import AsyncSession

    store = tl.open_store(tmp_path)
    slow = AsyncSession(store.create(session_id="slow"))
    quick = AsyncSession(store.create(session_id="quick"))
    ticks: list[float] = []

    async def ticker() -> None:
        for _ in range(20):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.005)

    async def main() -> tuple[list[str], str]:
        held = threading.Event()

        def hold_slow() -> None:  # another thread keeps the slow session busy for 0.3 s
            with slow.session.state.lock:
                held.set()
                time.sleep(0.3)

        blocker = threading.Thread(target=hold_slow)
        blocker.start()
        held.wait()
        results = await asyncio.gather(
            slow.append_message("user", "waited"), quick.append_message("user", "at once"), ticker()
        )
        blocker.join()
        ctx = await quick.context()
        return [results[0], results[1]], ctx.messages[0].text

    ids, text = asyncio.run(main())
    assert text == "at once"
    assert len(ticks) == 20 and max(b - a for a, b in itertools.pairwise(ticks)) < 0.2
    assert store.open("slow").entry(ids[0]).message.text == "waited"  # type: ignore[union-attr]
