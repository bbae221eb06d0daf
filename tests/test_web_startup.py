"""The viewer's first listing is deterministic (issue 13): the catalog is opened once, before the
first request is served, however the request and the indexing thread interleave."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import threadline as tl
from threadline import stores
from web_support import serve


def slow_catalogs(monkeypatch: pytest.MonkeyPatch, delay: float) -> list[str]:
    """Make every catalog take ``delay`` seconds to open; returns the threads that opened one."""
    opened: list[str] = []
    for kind, make in list(stores.CATALOGS.items()):

        def slow(backend: Any, location: Any, make: Callable[..., Any] = make) -> Any:
            opened.append(threading.current_thread().name)
            time.sleep(delay)
            return make(backend, location)

        monkeypatch.setitem(stores.CATALOGS, kind, slow)
    return opened


def test_threads_asking_for_the_catalog_at_once_share_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = slow_catalogs(monkeypatch, 0.3)
    store = tl.open_store(tmp_path)
    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(store.catalog)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1
    assert len(got) == 8 and all(c is got[0] for c in got)
    store.close()


def test_the_first_listing_of_a_fresh_viewer_answers_every_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a slow catalog open widens the window in which the first request and the indexing
    # thread both find the catalog unopened
    opened = slow_catalogs(monkeypatch, 0.5)
    store = tl.open_store(tmp_path)
    for k in range(3):
        with store.create(session_id=f"s{k}") as s:
            s.append_message("user", f"hello {k}")
    with serve(store) as url, httpx.Client(timeout=60) as client:
        first = client.get(url + "api/sessions")
        assert first.status_code == 200
        assert [r["id"] for r in first.json()["sessions"]] == ["s2", "s1", "s0"]
        assert first.json()["skipped"] == []
    assert len(opened) == 1  # opened before serving, by the viewer's start-up
    assert store.opened_catalog is not None
    store.close()
