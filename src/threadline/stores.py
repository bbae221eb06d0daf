"""The user-facing :class:`Store`: one storage backend's sessions and its catalog.

``threadline.open_store(url)`` returns a ``Store``. It wraps a backend from
:mod:`threadline.store` (JSONL files, memory, SQLite, PostgreSQL), which only keeps logs of
records, and adds what the layers above the storage know: :class:`~threadline.session.Session`
objects (``open``, ``create``, ``fork``, ``continue_recent``) and the cross-session
:class:`~threadline.catalog.Catalog` (``catalog``). This module sits beside the catalog in the
layer order (DESIGN §1), so the storage layer never imports a session or a catalog.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from threadline import history
from threadline.errors import UserError
from threadline.model.entries import SessionHeader, new_id, now
from threadline.session import Session, create_session, fork_session, open_session
from threadline.store import open_backend
from threadline.store.base import BaseStore, CatalogLocation, Durability, SessionListing

if TYPE_CHECKING:
    from threadline.catalog.base import Catalog
    from threadline.store.postgres import PostgresStore


def _sqlite_catalog(backend: BaseStore, location: CatalogLocation) -> Catalog:
    from threadline.catalog.sqlite import SqliteCatalog

    return SqliteCatalog(backend, location.path or ":memory:")


def _postgres_catalog(backend: BaseStore, location: CatalogLocation) -> Catalog:
    from threadline.catalog.postgres import PostgresCatalog

    # only the PostgreSQL backend names this kind (its catalog lives in the same database)
    return PostgresCatalog(cast("PostgresStore", backend))


#: catalog implementations by :attr:`CatalogLocation.kind`; a backend names its kind in
#: ``catalog_location()`` (a new catalog implementation adds a row here)
CATALOGS: dict[str, Callable[[BaseStore, CatalogLocation], Catalog]] = {
    "sqlite": _sqlite_catalog,
    "postgres": _postgres_catalog,
}

# The catalog opened for each backend, so a purge reaches the one in use.
_opened: weakref.WeakKeyDictionary[BaseStore, Catalog] = weakref.WeakKeyDictionary()


_opening = threading.RLock()


def catalog_for(backend: BaseStore) -> Catalog:
    """The catalog of ``backend`` (opened once per backend, then shared). Threads asking at
    the same time (the viewer's first request and its indexing thread) get the same catalog:
    one opens it, the others wait for it."""
    cat = _opened.get(backend)
    if cat is not None:
        return cat
    with _opening:
        cat = _opened.get(backend)
        if cat is None:
            location = backend.catalog_location()
            make = CATALOGS.get(location.kind)
            if make is None:
                raise UserError(
                    f"No catalog implementation of kind {location.kind!r}; use one of: "
                    f"{', '.join(sorted(CATALOGS))}"
                )
            cat = _opened[backend] = make(backend, location)
    return cat


def opened_catalog(backend: BaseStore) -> Catalog | None:
    """The catalog of ``backend`` if one was opened already (``None`` otherwise)."""
    return _opened.get(backend)


@history.on_purge
def forget_purged(backend: BaseStore | None, session_id: str, entry_ids: list[str]) -> None:
    """Purge hook: the catalog in use (or the one already built on disk) forgets the entries.
    A backend without a built index has nothing to forget; opening one would create it."""
    if backend is None:
        return
    cat = _opened.get(backend)
    if cat is None and not backend.catalog_location().exists:
        return
    (cat or catalog_for(backend)).forget(session_id, entry_ids)


class Store:
    """A collection of sessions in one backend (``backend``), plus its catalog."""

    def __init__(self, backend: BaseStore) -> None:
        self.backend = backend

    def __repr__(self) -> str:
        return f"<Store {self.url}>"

    @property
    def url(self) -> str:
        """The URL the store was opened with (``memory://``, a directory, ``sqlite:///…``)."""
        return self.backend.url

    def open(self, session_id: str, *, read_only: bool = False, shared: bool = False) -> Session:
        """Open a session; takes no lock until the first write. ``shared``: for writers that
        share the session (several processes or hosts appending to one conversation): each
        append takes the writer lock for itself alone and places its entry under the
        session's latest entry, whoever wrote it (on PostgreSQL in one round trip; see
        docs/stores.md, "Writers sharing one session"); other writes (navigation, purges,
        ``batch()``) take the lock as usual and keep it until ``close()``."""
        return open_session(self.backend, session_id, read_only=read_only, shared=shared)

    def create(
        self,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        cwd: str | None = None,
        metadata: dict[str, Any] | None = None,
        records: Sequence[Any] = (),
    ) -> Session:
        """Create a session (optionally with prepared records, written in one atomic step)."""
        return create_session(
            self.backend,
            session_id=session_id,
            parent_session=parent_session,
            cwd=cwd,
            metadata=metadata,
            records=records,
        )

    def fork(self, session_id: str) -> Session:
        """A new session holding a copy of every record of ``session_id`` (unknown ones too)."""
        return fork_session(self.backend, session_id)

    def location(self, session_id: str) -> str:
        """Where a session lives: the file of a JSONL session, else ``<store url>#<id>`` (what
        ``list()`` rows carry in ``path``; a password in the URL is left out)."""
        return self.backend.location(session_id)

    def open_path(self, path: str | os.PathLike[str], *, read_only: bool = False) -> Session:
        """Open a session by its location (:meth:`location`, ``list()`` rows' ``path``): a
        session file ``…/<id>.jsonl`` anywhere on disk (opened in place: appends go to that
        file), or ``<this store's url>#<id>``."""
        target = os.fspath(path)
        if "#" in target and not target.endswith(".jsonl"):
            url, _, sid = target.rpartition("#")
            if target == self.location(sid) or url == self.url:
                return self.open(sid, read_only=read_only)
            raise UserError(
                f"{target!r} is a session of another store; open that store "
                "(threadline.open_store) and its session there"
            )
        return open_path(target, read_only=read_only)

    def fork_from(self, source: str | os.PathLike[str] | Session) -> Session:
        """A new session in *this* store holding a copy of every record of ``source``: an open
        session of any store, or a session file / location (:meth:`open_path`). The copy names
        its source in ``parent_session``."""
        src = (
            self.open_path(source, read_only=True)
            if isinstance(source, (str, os.PathLike))
            else source
        )
        header = SessionHeader(
            id=new_id(),
            version=1,
            timestamp=now(),
            parent_session=src.id,
            cwd=src.header.cwd,
            metadata=src.header.metadata,
        )
        self.backend.create_log(header, src.raw_lines())
        return self.open(header.id)

    def continue_recent(self) -> Session:
        """Open the most recently modified valid session, or create one if there is none."""
        for summary in self.list():
            try:
                return self.open(summary.id)
            except Exception:  # unreadable now: the next most recent one is as good
                continue
        return self.create()

    def exists(self, session_id: str) -> bool:
        return self.backend.exists(session_id)

    def delete(self, session_id: str) -> None:
        """Remove a session and everything stored for it."""
        self.backend.delete(session_id)

    def list(self) -> SessionListing:
        """Every session, most recently modified first; the sessions that could not be read
        are in the result's ``skipped`` (id, reason), never silently dropped."""
        return self.backend.list()

    @property
    def catalog(self) -> Catalog:
        """The cross-session index of this store: listing with tags, search, manage_tags
        (see :mod:`threadline.catalog`); opened on first use."""
        return catalog_for(self.backend)

    @property
    def opened_catalog(self) -> Catalog | None:
        """The catalog if it was opened already (``None`` otherwise; opening costs I/O)."""
        return _opened.get(self.backend)

    def close(self) -> None:
        """Release the catalog and the backend's resources (connections, pools)."""
        cat = _opened.pop(self.backend, None)
        if cat is not None:
            cat.close()
        self.backend.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    url: str | os.PathLike[str] | None = None, *, durability: Durability = "fsync", **options: Any
) -> Store:
    """Open the store at ``url`` (default: ``$THREADLINE_HOME`` or ``~/.threadline``): a
    directory or ``file://…`` (JSONL files), ``memory://``, ``sqlite:///path.db`` or
    ``postgresql://…`` (``tenant=``, ``schema=``, ``pool=``)."""
    return Store(open_backend(url, durability=durability, **options))


def open_path(path: str | os.PathLike[str], *, read_only: bool = False) -> Session:
    """Open the session file ``path`` (``…/<session id>.jsonl``) wherever it lives, through a
    JSONL store on its directory: ``threadline.open_path("runs/abc.jsonl")``."""
    p = Path(path).expanduser()
    if p.suffix != ".jsonl":
        raise UserError(
            f"{str(path)!r} is not a session file; give the path of a <session id>.jsonl file"
        )
    if not p.is_file():
        raise UserError(
            f"Session file {str(path)!r} does not exist; check the path "
            "(threadline sessions --json lists each session's path)"
        )
    return open_store(p.parent).open(p.stem, read_only=read_only)
