"""The SQLite catalog: FTS5 keyword search, vectors in a table, session tags; the catalog of
the JSONL store (a ``.catalog.sqlite`` file beside the sessions), the SQLite store (tables in
the same database) and the memory store (in memory). Indexed lazily: a search first reads what
each session appended since it was last indexed."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from threadline.catalog.base import (
    Catalog,
    Filters,
    Hit,
    Key,
    _plain_snippet,
    fts_terms,
    indexable,
    terms_needed,
    validate_tag,
)
from threadline.embedding import Embedder
from threadline.errors import Hint, StoreError, UserError
from threadline.model.entries import now

if TYPE_CHECKING:
    from threadline.store.base import BaseStore


SYNC_PART = 8 << 20
"""Bytes of a session's records the catalog indexes per transaction (see ``_sync_session``)."""


class SqliteCatalog(Catalog):
    """The catalog in a SQLite database: FTS5 for keywords, float32 blobs for vectors."""

    def __init__(
        self,
        store: BaseStore,
        path: str,
        embedder: Embedder | Literal["default"] | None = "default",
    ) -> None:
        super().__init__(store, embedder)
        from threadline.store.sqlite import connect, upgrade

        self.path = path
        self._synced_stamp: Any = None
        self._embedded_upto = 0
        self._embedded_model = ""
        self._same_db = path != ":memory:" and getattr(store, "path", None) == path
        try:
            self.conn = connect(path)
            self.conn.execute("PRAGMA secure_delete=ON")  # purged text must not linger in pages
            upgrade(self.conn, "catalog")
        except sqlite3.Error as exc:
            raise StoreError(
                f"Cannot open the catalog {path}: {exc}; remove it and rebuild it",
                hint=Hint("rebuild_catalog"),
            ) from None

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self.conn.close()

    # -- indexing -----------------------------------------------------------------------------

    def sync(self) -> None:
        with self._lock:
            # in the SQLite store's own database, data_version tells cheaply whether any other
            # connection committed since the last sync: no change, no per-session walk
            stamp = None
            if self._same_db:
                stamp = self.conn.execute("PRAGMA data_version").fetchone()[0]
                if stamp == self._synced_stamp:
                    return
            self._sync_sessions()
            self._synced_stamp = stamp

    def _sync_sessions(self) -> None:
        with self._lock:
            cursors = dict(self.conn.execute("SELECT session_id, cursor FROM cat_sessions"))
            live = set(self.store.session_ids())
            gone = [sid for sid in cursors if sid not in live]
            if gone:
                with self._tx() as conn:
                    for sid in gone:
                        conn.execute("DELETE FROM cat_messages WHERE session_id = ?", (sid,))
                        conn.execute("DELETE FROM cat_sessions WHERE session_id = ?", (sid,))
                        conn.execute("DELETE FROM cat_tags WHERE session_id = ?", (sid,))
            for sid in sorted(live):
                self._sync_session(sid, cursors.get(sid, ""))

    def _sync_session(self, sid: str, old: str) -> None:
        """Index what ``sid`` appended since cursor ``old``, a part of about ``SYNC_PART`` bytes
        per transaction: a million-entry session is never held whole, and an interrupted sync
        goes on from the last part it committed."""
        first = True
        while True:
            try:
                reset, slots, cursor = self.store.changes_since(sid, old, SYNC_PART)
            except (StoreError, UserError, OSError):
                return  # unreadable now; indexed on a later pass
            if (cursor == old and not reset) or (reset and not first):
                # nothing more; or rewritten meanwhile, or a backend answering whole (which
                # resets every time): the next sync starts over from its cursor
                return
            first = False
            rows, purged = indexable(slots)
            del slots
            with self._tx() as conn:
                if reset:
                    conn.execute("DELETE FROM cat_messages WHERE session_id = ?", (sid,))
                conn.executemany(
                    "INSERT OR IGNORE INTO cat_messages (session_id, entry_id, role, "
                    "timestamp, body, etext) VALUES (?, ?, ?, ?, ?, ?)",
                    [(sid, *row) for row in rows],
                )
                conn.executemany(
                    "DELETE FROM cat_messages WHERE session_id = ? AND entry_id = ?",
                    [(sid, e) for e in purged],
                )
                conn.execute("INSERT OR REPLACE INTO cat_sessions VALUES (?, ?)", (sid, cursor))
            old = cursor

    def rebuild(self) -> None:
        with self._lock, self._tx() as conn:
            conn.execute("DELETE FROM cat_messages")
            conn.execute("DELETE FROM cat_vectors")
            conn.execute("DELETE FROM cat_sessions")
            conn.execute("INSERT INTO cat_fts (cat_fts) VALUES ('rebuild')")
        self._vec_cache = None
        self._synced_stamp = None
        self._embedded_upto = 0
        self.sync()

    def forget(self, session_id: str, entry_ids: Sequence[str]) -> None:
        with self._lock:
            with self._tx() as conn:
                conn.executemany(
                    "DELETE FROM cat_messages WHERE session_id = ? AND entry_id = ?",
                    [(session_id, e) for e in entry_ids],
                )
            # merge the FTS segments so the deleted terms leave the index files too, then empty
            # the WAL so no frame of the old pages stays behind
            self.conn.execute("INSERT INTO cat_fts (cat_fts) VALUES ('optimize')")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._vec_cache = None

    # -- search -------------------------------------------------------------------------------

    def _where(self, f: Filters) -> tuple[str, list[Any]]:
        sql = []
        params: list[Any] = []
        if f.role:
            sql.append("m.role = ?")
            params.append(f.role)
        if f.session:
            sql.append("m.session_id = ?")
            params.append(f.session)
        if f.since:
            sql.append("m.timestamp >= ?")
            params.append(f.since)
        if f.until:
            sql.append("m.timestamp <= ?")
            params.append(f.until_bound)
        if f.tag:
            sql.append("m.session_id IN (SELECT session_id FROM cat_tags WHERE tag = ?)")
            params.append(f.tag)
        return "".join(" AND " + s for s in sql), params

    def _keyword(self, query: str, f: Filters, limit: int) -> list[Hit]:
        terms = fts_terms(query)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        where, params = self._where(f)
        rows = self.conn.execute(
            "SELECT m.session_id, m.entry_id, bm25(cat_fts), "
            "snippet(cat_fts, 0, '[', ']', '…', 16), m.role, m.timestamp, m.rowid "
            "FROM cat_fts JOIN cat_messages m ON m.rowid = cat_fts.rowid "
            f"WHERE cat_fts MATCH ?{where} ORDER BY bm25(cat_fts), m.rowid LIMIT ?",
            [match, *params, limit],
        ).fetchall()
        # the relevance floor: count, with the index's own stemming, how many of the query's
        # words each candidate holds
        matched = dict.fromkeys((r[6] for r in rows), 0)
        if rows and len(set(terms)) > 1:
            marks = ",".join("?" * len(matched))
            for t in set(terms):
                for (rowid,) in self.conn.execute(
                    f"SELECT rowid FROM cat_fts WHERE cat_fts MATCH ? AND rowid IN ({marks})",
                    [f'"{t}"', *matched],
                ):
                    matched[rowid] += 1
        else:
            matched = dict.fromkeys(matched, 1)
        need = terms_needed(terms)
        return [
            Hit(
                session_id=r[0],
                entry_id=r[1],
                score=-float(r[2]),
                snippet=r[3],
                role=r[4],
                timestamp=r[5],
            )
            for r in rows
            if matched[r[6]] >= need
        ]

    def _keyword_sessions(self, query: str) -> list[str]:
        terms = fts_terms(query)
        if not terms:
            return []
        match = " AND ".join(f'"{t}"' for t in terms)
        rows = self.conn.execute(
            "SELECT DISTINCT m.session_id FROM cat_fts JOIN cat_messages m "
            "ON m.rowid = cat_fts.rowid WHERE cat_fts MATCH ?",
            (match,),
        ).fetchall()
        return [r[0] for r in rows]

    def _describe(self, found: list[tuple[Key, float]], query: str) -> list[Hit]:
        out = []
        for (sid, eid), score in found:
            row = self.conn.execute(
                "SELECT role, timestamp, body FROM cat_messages WHERE session_id = ? AND "
                "entry_id = ?",
                (sid, eid),
            ).fetchone()
            if row is not None:
                out.append(
                    Hit(
                        session_id=sid,
                        entry_id=eid,
                        score=score,
                        snippet=_plain_snippet(row[2], query),
                        role=row[0],
                        timestamp=row[1],
                    )
                )
        return out

    def _allowed(self, f: Filters) -> set[Key]:
        where, params = self._where(f)
        rows = self.conn.execute(
            f"SELECT m.session_id, m.entry_id FROM cat_messages m WHERE 1 = 1{where}", params
        ).fetchall()
        return {(r[0], r[1]) for r in rows}

    def _vector_stamp(self, embedder: Embedder) -> Any:
        # O(1) on the primary key; vectors only ever get higher row ids (deletions in this
        # process drop the cache; a vector deleted elsewhere finds no message and is skipped)
        return self.conn.execute("SELECT max(msg_rowid) FROM cat_vectors").fetchone()[0]

    def _message_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM cat_messages").fetchone()[0])

    def _vector_counts(self, embedder: Embedder) -> tuple[int, int]:
        total = self.conn.execute(
            "SELECT count(*) FROM cat_messages WHERE etext IS NOT NULL"
        ).fetchone()[0]
        done = self.conn.execute(
            "SELECT count(*) FROM cat_vectors v JOIN cat_messages m ON m.rowid = v.msg_rowid "
            "WHERE v.model = ? AND m.etext IS NOT NULL",
            (embedder.name,),
        ).fetchone()[0]
        return int(done), int(total)

    def _load_vectors(self, embedder: Embedder) -> tuple[list[Key], list[bytes]]:
        rows = self.conn.execute(
            "SELECT m.session_id, m.entry_id, v.vec FROM cat_vectors v JOIN cat_messages m "
            "ON m.rowid = v.msg_rowid WHERE v.model = ? ORDER BY v.msg_rowid",
            (embedder.name,),
        ).fetchall()
        return [(r[0], r[1]) for r in rows], [r[2] for r in rows]

    def _pending_vectors(self, embedder: Embedder, limit: int) -> list[tuple[Any, str]]:
        # messages only get higher row ids, so everything at or below the high-water mark of
        # the last complete pass (for this model) is embedded already
        mark = self._embedded_upto if self._embedded_model == embedder.name else 0
        rows = [
            (r[0], r[1])
            for r in self.conn.execute(
                "SELECT m.rowid, m.etext FROM cat_messages m LEFT JOIN cat_vectors v "
                "ON v.msg_rowid = m.rowid AND v.model = ? WHERE m.rowid > ? AND "
                "v.msg_rowid IS NULL AND m.etext IS NOT NULL ORDER BY m.rowid LIMIT ?",
                (embedder.name, mark, limit),
            )
        ]
        if not rows:
            top = self.conn.execute("SELECT max(rowid) FROM cat_messages").fetchone()[0]
            self._embedded_upto, self._embedded_model = top or 0, embedder.name
        return rows

    def _store_vectors(self, embedder: Embedder, rows: list[tuple[Any, bytes]]) -> None:
        with self._tx() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO cat_vectors VALUES (?, ?, ?)",
                [(ref, embedder.name, blob) for ref, blob in rows],
            )

    # -- tags -------------------------------------------------------------------------------

    def _all_tags(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for sid, tag in self.conn.execute("SELECT session_id, tag FROM cat_tags"):
            out.setdefault(sid, set()).add(tag)
        return out

    def _tagged(self, tag: str) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT session_id FROM cat_tags WHERE tag = ? ORDER BY session_id", (tag,)
            )
        ]

    def _save_token(self, token: str, op: str, args: str, ids: list[str]) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO cat_tokens VALUES (?, ?, ?, ?, ?)",
                (token, op, args, json.dumps(ids), now()),
            )

    def _load_token(self, token: str) -> tuple[str, str, list[str]] | None:
        row = self.conn.execute(
            "SELECT operation, args, session_ids FROM cat_tokens WHERE token = ?", (token,)
        ).fetchone()
        return None if row is None else (row[0], row[1], json.loads(row[2]))

    def _apply(self, op: str, args: dict[str, str], ids: list[str], token: str) -> tuple[int, int]:
        changed = already = 0
        with self._tx() as conn:
            gone = conn.execute("DELETE FROM cat_tokens WHERE token = ?", (token,)).rowcount
            if gone != 1:
                raise UserError("Unknown or already used token; preview again with dry_run=True")
            for sid in ids:
                if op == "find_and_tag":
                    n = conn.execute(
                        "INSERT OR IGNORE INTO cat_tags VALUES (?, ?)", (sid, args["tag"])
                    ).rowcount
                    changed += n
                    already += 1 - n
                elif op == "delete_tag":
                    changed += conn.execute(
                        "DELETE FROM cat_tags WHERE session_id = ? AND tag = ?", (sid, args["tag"])
                    ).rowcount
                else:
                    conn.execute(
                        "DELETE FROM cat_tags WHERE session_id = ? AND tag = ?",
                        (sid, args["tag_from"]),
                    )
                    n = conn.execute(
                        "INSERT OR IGNORE INTO cat_tags VALUES (?, ?)", (sid, args["tag_to"])
                    ).rowcount
                    changed += 1
                    already += 1 - n
        return changed, already

    def add_tags(self, session_id: str, tags: Sequence[str]) -> None:
        """Tag one session directly (no preview: the caller names the session)."""
        clean = [validate_tag(t) for t in tags]
        with self._lock, self._tx() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO cat_tags VALUES (?, ?)", [(session_id, t) for t in clean]
            )

    def remove_tags(self, session_id: str, tags: Sequence[str]) -> None:
        """Untag one session directly."""
        with self._lock, self._tx() as conn:
            conn.executemany(
                "DELETE FROM cat_tags WHERE session_id = ? AND tag = ?",
                [(session_id, t) for t in tags],
            )
