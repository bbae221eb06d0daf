"""Storage backends: ``open_backend(url)`` picks one from the URL (DESIGN §9); users call
``threadline.open_store(url)``, which wraps it in a :class:`threadline.Store`.

- a directory path or ``file://…``: JSONL files (the default, ``$THREADLINE_HOME`` or
  ``~/.threadline``)
- ``memory://``: in-process, for tests and scratch work
- ``sqlite:///path.db``: one SQLite database (WAL, synchronous=FULL)
- ``postgresql://…``: PostgreSQL, multi-tenant with row-level security (``tenant=``)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from threadline.errors import UserError
from threadline.store.base import (
    Backend,
    BaseStore,
    CatalogLocation,
    Durability,
    Log,
    SessionListing,
    SessionSummary,
)

__all__ = [
    "Backend",
    "BaseStore",
    "CatalogLocation",
    "Log",
    "SessionListing",
    "SessionSummary",
    "default_home",
    "open_backend",
]


def default_home() -> Path:
    env = os.environ.get("THREADLINE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".threadline"


def open_backend(
    url: str | os.PathLike[str] | None = None, *, durability: Durability = "fsync", **options: Any
) -> BaseStore:
    """Open the backend at ``url`` (default: ``$THREADLINE_HOME`` or ``~/.threadline``)."""
    if durability not in ("fsync", "group", "flush"):
        raise UserError(f"Unknown durability {durability!r}; use 'fsync', 'group' or 'flush'")
    target = str(url) if url is not None else str(default_home())
    if target.startswith("memory:"):
        from threadline.store.memory import MemoryStore

        return MemoryStore()
    if target.startswith("sqlite:"):
        try:
            from threadline.store.sqlite import SqliteStore
        except ImportError as exc:
            raise UserError(f"The SQLite store is not available: {exc}") from None
        return SqliteStore(target, durability=durability, **options)
    if target.startswith(("postgresql:", "postgres:")):
        try:
            from threadline.store.postgres import PostgresStore
        except ImportError as exc:
            raise UserError(
                f"The PostgreSQL store needs psycopg ({exc}); "
                "run: pip install -e '.[postgres]' in the threadline clone"
            ) from None
        return PostgresStore(target, durability=durability, **options)
    if "://" in target and not target.startswith("file://"):
        raise UserError(
            f"Unknown store URL {target!r}; use a directory, file://, sqlite:///path.db, "
            "postgresql://… or memory://"
        )
    from threadline.store.jsonl import JsonlStore

    path = target[len("file://") :] if target.startswith("file://") else target
    return JsonlStore(path, durability=durability)
