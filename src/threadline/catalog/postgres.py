"""The PostgreSQL catalog: search and session tags over the PostgreSQL store's own tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from threadline.catalog.base import Catalog, Filters, Hit, Key, fts_terms, terms_needed
from threadline.embedding import Embedder
from threadline.errors import UserError
from threadline.model.entries import now
from threadline.model.search_text import EMBED_LIMIT
from threadline.store.postgres import STRIPPED, PostgresStore


class PostgresCatalog(Catalog):
    """The catalog over the store's own tables: a GIN index on ``to_tsvector('english',
    body)`` for keywords (kept by the append transaction itself), ``tl_vectors`` for
    embeddings, ``tl_session_tags``."""

    store: PostgresStore

    def __init__(
        self, store: PostgresStore, embedder: Embedder | Literal["default"] | None = "default"
    ) -> None:
        super().__init__(store, embedder)

    def _where(self, f: Filters) -> tuple[str, list[Any]]:
        parts = []
        params: list[Any] = []
        if f.role:
            parts.append("r.role = %s")
            params.append(f.role)
        if f.session:
            parts.append("r.session_id = %s")
            params.append(f.session)
        if f.since:
            parts.append("r.timestamp >= %s")
            params.append(f.since)
        if f.until:
            parts.append("r.timestamp <= %s")
            params.append(f.until_bound)
        if f.tag:
            parts.append(
                "r.session_id IN (SELECT session_id FROM tl_session_tags WHERE "
                "tenant_id = %s AND tag = %s)"
            )
            params.extend([self.store.tenant, f.tag])
        return "".join(" AND " + p for p in parts), params

    # the tsquery is built by PostgreSQL from the bound text: the words OR-ed for ranking,
    # AND-ed (plainto_tsquery) for find_and_tag's matching set
    _OR_QUERY = "(SELECT replace(plainto_tsquery('english', %s)::text, '&', '|')::tsquery AS q)"
    # the indexed expression (schema version 4): a query names it exactly for the index to serve
    _BODY = "tl_body(r.raw, r.body)"  # body, or the text of the JSON where body is ''
    _TSV = f"to_tsvector('english', {_BODY})"

    def _keyword(self, query: str, f: Filters, limit: int) -> list[Hit]:
        terms = sorted(set(fts_terms(query)))
        if not terms:
            return []
        where, params = self._where(f)
        with self.store.tx() as conn:
            # the last column counts the query's words each candidate holds (relevance floor);
            # v.tsv, the vector of a row that matched, is computed once for rank and count
            rows = conn.execute(
                f"SELECT r.session_id, r.id, ts_rank_cd(v.tsv, query.q), "
                f"ts_headline('english', {self._BODY}, query.q, 'StartSel=[, StopSel=], "
                f"MaxWords=20, MinWords=8'), r.role, r.timestamp, (SELECT count(*) FROM "
                f"unnest(%s::text[]) AS t(w) WHERE v.tsv @@ plainto_tsquery('english', t.w)) "
                f"FROM tl_records r, {self._OR_QUERY} query, "
                f"LATERAL (SELECT {self._TSV} AS tsv OFFSET 0) v "
                f"WHERE r.tenant_id = %s AND r.body IS NOT NULL AND {self._TSV} @@ query.q"
                f"{where} "
                "ORDER BY 3 DESC, r.session_id, r.seq LIMIT %s",
                [terms, query, self.store.tenant, *params, limit],
            ).fetchall()
        need = terms_needed(terms)
        return [
            Hit(
                session_id=r[0],
                entry_id=r[1],
                score=float(r[2]),
                snippet=r[3],
                role=r[4],
                timestamp=r[5],
            )
            for r in rows
            if r[6] >= need
        ]

    def _keyword_sessions(self, query: str) -> list[str]:
        if not fts_terms(query):
            return []
        with self.store.tx() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT r.session_id FROM tl_records r WHERE r.tenant_id = %s AND "
                    f"r.body IS NOT NULL AND {self._TSV} @@ plainto_tsquery('english', %s)",
                    (self.store.tenant, query),
                )
            ]

    def _describe(self, found: list[tuple[Key, float]], query: str) -> list[Hit]:
        from threadline.catalog.base import _plain_snippet

        out = []
        with self.store.tx() as conn:
            for (sid, eid), score in found:
                row = conn.execute(
                    f"SELECT r.role, r.timestamp, {self._BODY} FROM tl_records r WHERE "
                    "r.tenant_id = %s AND r.session_id = %s AND r.id = %s AND r.role IS NOT "
                    "NULL AND r.body IS NOT NULL LIMIT 1",
                    (self.store.tenant, sid, eid),
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
        with self.store.tx() as conn:
            rows = conn.execute(
                f"SELECT r.session_id, r.id FROM tl_records r WHERE "
                f"r.tenant_id = %s AND r.body IS NOT NULL{where}",
                [self.store.tenant, *params],
            ).fetchall()
        return {(r[0], r[1]) for r in rows}

    def _vector_stamp(self, embedder: Embedder) -> Any:
        with self.store.tx() as conn:
            return tuple(
                conn.execute(
                    "SELECT count(*), coalesce(sum(seq), 0) FROM tl_vectors "
                    "WHERE tenant_id = %s AND model = %s",
                    (self.store.tenant, embedder.name),
                ).fetchone()
            )

    def _load_vectors(self, embedder: Embedder) -> tuple[list[Key], list[bytes]]:
        with self.store.tx() as conn:
            rows = conn.execute(
                "SELECT r.session_id, r.id, v.vec FROM tl_vectors v JOIN tl_records r ON "
                "r.tenant_id = v.tenant_id AND r.session_id = v.session_id AND r.seq = v.seq "
                "WHERE v.tenant_id = %s AND v.model = %s ORDER BY v.session_id, v.seq",
                (self.store.tenant, embedder.name),
            ).fetchall()
        return [(r[0], r[1]) for r in rows], [bytes(r[2]) for r in rows]

    def _message_count(self) -> int:
        with self.store.tx() as conn:
            row = conn.execute(
                "SELECT count(*) FROM tl_records WHERE tenant_id = %s AND body IS NOT NULL",
                (self.store.tenant,),
            ).fetchone()
        return int(row[0])

    def _vector_counts(self, embedder: Embedder) -> tuple[int, int]:
        with self.store.tx() as conn:
            total = conn.execute(
                "SELECT count(*) FROM tl_records WHERE tenant_id = %s AND body IS NOT NULL "
                "AND etext IS DISTINCT FROM ''",
                (self.store.tenant,),
            ).fetchone()[0]
            done = conn.execute(
                "SELECT count(*) FROM tl_vectors WHERE tenant_id = %s AND model = %s",
                (self.store.tenant, embedder.name),
            ).fetchone()[0]
        return int(done), int(total)

    def _pending_vectors(self, embedder: Embedder, limit: int) -> list[tuple[Any, str]]:
        with self.store.tx() as conn:
            # etext NULL: the text to embed is body, stripped, cut (PostgresStore's stored_etext)
            rows = conn.execute(
                f"SELECT r.session_id, r.seq, coalesce(r.etext, left(btrim({self._BODY}, %s), "
                "%s)) FROM tl_records r WHERE r.tenant_id = %s AND r.body IS NOT NULL AND "
                "r.etext IS DISTINCT FROM '' AND NOT EXISTS (SELECT 1 FROM tl_vectors v WHERE "
                "v.tenant_id = r.tenant_id AND v.session_id = r.session_id AND v.seq = r.seq "
                "AND v.model = %s) LIMIT %s",
                (STRIPPED, EMBED_LIMIT, self.store.tenant, embedder.name, limit),
            ).fetchall()
        return [((r[0], r[1]), r[2]) for r in rows]

    def _store_vectors(self, embedder: Embedder, rows: list[tuple[Any, bytes]]) -> None:
        with self.store.tx() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO tl_vectors (tenant_id, session_id, seq, model, vec) VALUES "
                "(%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, session_id, seq) DO UPDATE SET "
                "model = excluded.model, vec = excluded.vec",
                [(self.store.tenant, ref[0], ref[1], embedder.name, blob) for ref, blob in rows],
            )

    def rebuild(self) -> None:
        """Drop the tenant's vectors (they are recomputed on the next semantic search); the
        keyword index is an expression index and never goes stale."""
        with self.store.tx() as conn:
            conn.execute("DELETE FROM tl_vectors WHERE tenant_id = %s", (self.store.tenant,))
        self._vec_cache = None

    def forget(self, session_id: str, entry_ids: Sequence[str]) -> None:
        with self.store.tx() as conn:
            conn.execute(
                "DELETE FROM tl_vectors v USING tl_records r WHERE v.tenant_id = %s "
                "AND r.tenant_id = v.tenant_id AND r.session_id = v.session_id AND "
                "r.seq = v.seq AND r.session_id = %s AND r.id = ANY(%s) AND r.role IS NOT NULL",
                (self.store.tenant, session_id, list(entry_ids)),
            )
            # a message not purged yet has a role (what tl_records_id holds); the purge blanks
            # it with the text
            conn.execute(
                "UPDATE tl_records SET body = NULL, etext = NULL, role = NULL WHERE "
                "tenant_id = %s AND session_id = %s AND id = ANY(%s) AND role IS NOT NULL",
                (self.store.tenant, session_id, list(entry_ids)),
            )
        self._vec_cache = None

    def _all_tags(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        with self.store.tx() as conn:
            for sid, tag in conn.execute(
                "SELECT session_id, tag FROM tl_session_tags WHERE tenant_id = %s",
                (self.store.tenant,),
            ):
                out.setdefault(sid, set()).add(tag)
        return out

    def _tagged(self, tag: str) -> list[str]:
        with self.store.tx() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT session_id FROM tl_session_tags WHERE tenant_id = %s AND tag = %s "
                    "ORDER BY session_id",
                    (self.store.tenant, tag),
                )
            ]

    def _save_token(self, token: str, op: str, args: str, ids: list[str]) -> None:
        with self.store.tx() as conn:
            conn.execute(
                "INSERT INTO tl_tag_tokens VALUES (%s, %s, %s, %s, %s, %s)",
                (self.store.tenant, token, op, args, json.dumps(ids), now()),
            )

    def _load_token(self, token: str) -> tuple[str, str, list[str]] | None:
        with self.store.tx() as conn:
            row = conn.execute(
                "SELECT operation, args, session_ids FROM tl_tag_tokens WHERE "
                "tenant_id = %s AND token = %s",
                (self.store.tenant, token),
            ).fetchone()
        return None if row is None else (row[0], row[1], json.loads(row[2]))

    def _apply(self, op: str, args: dict[str, str], ids: list[str], token: str) -> tuple[int, int]:
        t = self.store.tenant
        with self.store.tx() as conn:
            gone = conn.execute(
                "DELETE FROM tl_tag_tokens WHERE tenant_id = %s AND token = %s", (t, token)
            ).rowcount
            if gone != 1:
                raise UserError("Unknown or already used token; preview again with dry_run=True")
            if op == "find_and_tag":
                changed = conn.execute(
                    "INSERT INTO tl_session_tags (tenant_id, session_id, tag) SELECT %s, s, %s "
                    "FROM unnest(%s::text[]) AS s ON CONFLICT DO NOTHING",
                    (t, args["tag"], ids),
                ).rowcount
                return changed, len(ids) - changed
            if op == "delete_tag":
                changed = conn.execute(
                    "DELETE FROM tl_session_tags WHERE tenant_id = %s AND tag = %s AND "
                    "session_id = ANY(%s)",
                    (t, args["tag"], ids),
                ).rowcount
                return changed, 0
            conn.execute(
                "DELETE FROM tl_session_tags WHERE tenant_id = %s AND tag = %s AND "
                "session_id = ANY(%s)",
                (t, args["tag_from"], ids),
            )
            added = conn.execute(
                "INSERT INTO tl_session_tags (tenant_id, session_id, tag) SELECT %s, s, %s "
                "FROM unnest(%s::text[]) AS s ON CONFLICT DO NOTHING",
                (t, args["tag_to"], ids),
            ).rowcount
            return len(ids), len(ids) - added

    def add_tags(self, session_id: str, tags: Sequence[str]) -> None:
        """Tag one session directly (no preview: the caller names the session)."""
        from threadline.catalog.base import validate_tag

        clean = [validate_tag(t) for t in tags]
        with self.store.tx() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO tl_session_tags VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(self.store.tenant, session_id, t) for t in clean],
            )

    def remove_tags(self, session_id: str, tags: Sequence[str]) -> None:
        """Untag one session directly."""
        with self.store.tx() as conn:
            conn.execute(
                "DELETE FROM tl_session_tags WHERE tenant_id = %s AND session_id = %s "
                "AND tag = ANY(%s)",
                (self.store.tenant, session_id, list(tags)),
            )
