"""Shared fixtures. ``store`` runs a test once per backend (the conformance suite's axis)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import threadline as tl


def _realdata() -> Path:
    """``../shared/realdata``: beside this checkout (CI clones main there), beside the checkout
    a worktree belongs to, or beside the repository this one was cloned from;
    ``THREADLINE_REALDATA`` names it anywhere else."""
    import subprocess

    named = os.environ.get("THREADLINE_REALDATA")
    if named:
        return Path(named).resolve()
    root = Path(__file__).resolve().parents[1]
    places = [root]
    for ask in (["rev-parse", "--git-common-dir"], ["config", "--get", "remote.origin.url"]):
        got = subprocess.run(["git", "-C", str(root), *ask], capture_output=True, text=True)
        where = Path(got.stdout.strip()) if got.returncode == 0 and got.stdout.strip() else None
        if where is not None and (where.is_absolute() or ask[0] == "rev-parse"):
            where = (root / where).resolve()
            places.append(where.parent if where.name == ".git" else where)
    for place in places:
        if (place.parent / "shared" / "realdata").is_dir():
            return place.parent / "shared" / "realdata"
    raise pytest.UsageError(
        "The real transcripts (../shared/realdata) are not beside this checkout; "
        "set THREADLINE_REALDATA to their folder"
    )


REALDATA = _realdata()
# the bench scripts the tests import (bench/fuzz.py) and the CLI subprocesses read it from here
os.environ["THREADLINE_REALDATA"] = str(REALDATA)

BACKENDS = ["memory", "jsonl", "sqlite", "postgres"]

# No test embeds with the default model unless it asks for one: importing through the CLI would
# otherwise index every transcript with MiniLM (seconds each). Tests of semantic search set
# their catalog's embedder explicitly.
os.environ.setdefault("THREADLINE_EMBEDDER", "none")

# The machine's PostgreSQL (trust auth); every store gets a schema of its own, dropped at the end.
PG_URL = os.environ.get("THREADLINE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
PG_SCHEMAS: list[str] = []


def pg_schema() -> str:
    """A fresh, migrated schema in the test database."""
    import uuid

    from threadline.store.postgres import upgrade

    schema = f"t_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    upgrade(PG_URL, schema)
    PG_SCHEMAS.append(schema)
    return schema


def make_store(kind: str, tmp_path: Path, **options: object) -> tl.Store:
    if kind == "memory":
        return tl.open_store("memory://")
    if kind == "jsonl":
        return tl.open_store(tmp_path / "sessions")
    if kind == "sqlite":
        return tl.open_store(f"sqlite:///{tmp_path}/store.db")
    if kind == "postgres":
        options.setdefault("tenant", "test")
        options.setdefault("schema", pg_schema())
        options.setdefault("max_size", 4)
        return tl.open_store(PG_URL, **options)
    raise ValueError(kind)


@pytest.fixture(scope="session", autouse=True)
def _drop_pg_schemas() -> Iterator[None]:
    yield
    if not PG_SCHEMAS:
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for schema in PG_SCHEMAS:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tl.Store]:
    st = make_store(request.param, tmp_path)
    yield st
    st.close()


@pytest.fixture
def jsonl_store(tmp_path: Path) -> tl.Store:
    return tl.open_store(tmp_path / "sessions")
