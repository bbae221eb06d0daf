"""Shared fixtures. ``store`` runs a test once per backend (the conformance suite's axis)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import threadline as tl

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
if not REALDATA.exists():  # CI clones main with shared/ beside it
    REALDATA = Path(os.environ.get("THREADLINE_REALDATA", "../shared/realdata")).resolve()

BACKENDS = ["memory", "jsonl"]


def make_store(kind: str, tmp_path: Path) -> tl.store.BaseStore:
    if kind == "memory":
        return tl.open_store("memory://")
    if kind == "jsonl":
        return tl.open_store(tmp_path / "sessions")
    raise ValueError(kind)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tl.store.BaseStore]:
    st = make_store(request.param, tmp_path)
    yield st
    st.close()


@pytest.fixture
def jsonl_store(tmp_path: Path) -> tl.store.BaseStore:
    return tl.open_store(tmp_path / "sessions")
