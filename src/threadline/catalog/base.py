"""The catalog: a cross-session index of a store for listing, search and session tags (DESIGN §9).

``store.catalog`` exists on every store. The SQLite-backed catalog
(``threadline.catalog.sqlite.SqliteCatalog``)
serves the JSONL store (a ``.catalog.sqlite`` file beside the sessions), the SQLite store (tables
in the same database) and the memory store (an in-memory database); the PostgreSQL store has its
own (``threadline.catalog.postgres.PostgresCatalog``) over the same base class.

Indexing is lazy and crash-proof: before answering, the SQLite catalog reads what every session
appended since it was last indexed (a per-session cursor: inode and offset for files, generation
and sequence number for database rows), so nothing is lost when a writer dies between its append
and an index update. Vectors are computed the same way, for the messages that have none yet.

Search is keyword (SQLite FTS5 with the porter stemmer / PostgreSQL tsvector), semantic (an
:class:`~threadline.embedding.Embedder`; brute-force cosine over the stored vectors) or hybrid,
the two ranked lists fused by reciprocal rank (``score = Σ 1 / (60 + rank)``).

``find_and_tag``, ``delete_tag`` and ``merge_tags`` preview by default and return a single-use
token bound to the exact set of sessions previewed; executing with the token applies to exactly
that set in one transaction (nothing changes when it fails) and is refused when the set changed.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from threadline.embedding import INSTALL_HINT, Embedder, default_embedder
from threadline.errors import StoreError, UserError
from threadline.model.entries import MessageEntry, PurgeRecord, RecordError
from threadline.model.search_text import embed_text, message_text
from threadline.store.base import LazyMessage, Slot

if TYPE_CHECKING:
    from threadline.store.base import BaseStore

Mode = Literal["hybrid", "keyword", "semantic"]
Key = tuple[str, str]  # (session_id, entry_id)

RRF_K = 60
#: cosine similarity from which a message counts as matching in ``find_and_tag`` (MiniLM scale)
MATCH_SIMILARITY = 0.5
SAMPLE_SIZE = 5
TAG_RE = re.compile(r"\A[^\x00-\x1f\x7f]{1,64}\Z")


class Hit(msgspec.Struct, kw_only=True):
    """One search result: the message ``entry_id`` of session ``session_id``."""

    session_id: str
    entry_id: str
    score: float
    snippet: str
    role: str = ""
    timestamp: str = ""


class IndexStatus(msgspec.Struct, kw_only=True):
    """How far the catalog's index is (:meth:`Catalog.index_status`)."""

    messages: int  # messages in the keyword index
    embedded: int  # of those, how many have a vector for semantic search
    total: int  # how many can have one (messages with text)
    semantic: bool  # an embedder is installed

    @property
    def pending(self) -> int:
        return self.total - self.embedded


class CatalogSession(msgspec.Struct, kw_only=True):
    """A listing row: the store's summary plus the session's tags."""

    id: str
    name: str | None
    created: str
    modified: str
    message_count: int
    first_message: str | None
    parent_session: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    damaged: str | None = None  # see SessionSummary.damaged


class TagPlan(msgspec.Struct, kw_only=True):
    """A manage_tags preview: nothing was changed. Execute with ``token``."""

    operation: str
    count: int
    sample: list[str]
    already_tagged: int
    token: str
    message: str


class TagResult(msgspec.Struct, kw_only=True):
    """What an executed manage_tags operation changed."""

    operation: str
    changed: int
    already_tagged: int
    message: str


class Filters(msgspec.Struct, kw_only=True):
    role: str | None = None
    session: str | None = None
    tag: str | None = None
    since: str | None = None
    until: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.role or self.session or self.tag or self.since or self.until)

    @property
    def until_bound(self) -> str | None:
        # a bare date includes the whole day: '~' sorts after every RFC 3339 character
        return None if self.until is None else self.until + "~"


def indexable(
    slots: Sequence[Slot],
) -> tuple[list[tuple[str, str, str, str, str | None]], list[str]]:
    """``(entry_id, role, timestamp, body, embed_text)`` of every message with text among
    ``slots``, and the entry ids that ``purge`` records among them remove."""
    rows = []
    purged: list[str] = []
    for slot in slots:
        rec: Any = slot
        if isinstance(slot, LazyMessage):
            try:
                rec = slot.decode()
            except RecordError:
                continue
        if isinstance(rec, MessageEntry):
            body = message_text(rec.message)
            if body.strip():
                rows.append(
                    (rec.id, rec.message.role, rec.timestamp, body, embed_text(rec.message))
                )
        elif isinstance(rec, PurgeRecord):
            purged.extend(rec.payload.entry_ids)
    return rows, purged


def validate_tag(tag: str | None, what: str = "tag") -> str:
    if not tag or not isinstance(tag, str) or not tag.strip():
        raise UserError(f"Missing {what}: give the tag name")
    tag = tag.strip()
    if not TAG_RE.match(tag):
        raise UserError(f"Invalid {what} {tag!r}: use 1-64 printable characters")
    return tag


# Words too common to rank by (PostgreSQL's english configuration drops them too); a query made
# of nothing else keeps them.
STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    }
)


def fts_terms(query: str) -> list[str]:
    """The words of a query, lower-cased, stop words left out unless nothing else remains."""
    words = re.findall(r"\w+", query.lower())
    content = [w for w in words if w not in STOP_WORDS]
    return content or words


def terms_needed(terms: Sequence[str]) -> int:
    """The relevance floor of keyword search: how many of the query's distinct words a message
    must contain to be returned: two (one for a one-word query). A message sharing one word of
    "kubernetes helm chart" is not an answer to it; a paraphrase sharing two words of a long
    query still is (half of the words cost keyword recall 49 -> 36 of 60 labelled queries)."""
    return min(len(set(terms)), 2)


def set_digest(session_ids: Sequence[str]) -> str:
    import hashlib  # ~3.5 MB of OpenSSL mapped: loaded on first use, not at import

    return hashlib.sha256("\n".join(sorted(session_ids)).encode()).hexdigest()


class Catalog:
    """Search, listing and session tags over one store. Backends implement the ``_`` hooks."""

    def __init__(
        self, store: BaseStore, embedder: Embedder | Literal["default"] | None = "default"
    ) -> None:
        self.store = store
        self._embedder_choice = embedder
        self._lock = threading.RLock()
        #: Seconds of embedding one search may spend on messages not embedded yet (None: all
        #: of them, so results are complete). Interactive callers set a budget and run
        #: :meth:`embed_pending` in the background.
        self.embed_budget: float | None = None
        self._vec_cache: tuple[Any, list[Key], Any] | None = None

    # -- configuration ------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embedder used for semantic search (``None``: semantic search unavailable)."""
        if self._embedder_choice == "default":
            self._embedder_choice = default_embedder()
        return self._embedder_choice

    @embedder.setter
    def embedder(self, value: Embedder | None) -> None:
        self._embedder_choice = value
        self._vec_cache = None

    # -- search -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        mode: Mode = "hybrid",
        *,
        role: str | None = None,
        session: str | None = None,
        tag: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[Hit]:
        """The ``k`` best messages for ``query``. ``mode``: ``hybrid`` (keyword and semantic
        fused by reciprocal rank; keyword only when no embedder is installed), ``keyword`` or
        ``semantic``. Filters: ``role``, ``session`` (id), ``tag`` (session tag), ``since`` and
        ``until`` (RFC 3339 timestamps or dates, inclusive)."""
        if mode not in ("hybrid", "keyword", "semantic"):
            raise UserError(f"Unknown search mode {mode!r}; use hybrid, keyword or semantic")
        if not isinstance(k, int) or k < 1:
            raise UserError(f"k must be a positive integer, not {k!r}")
        if not isinstance(query, str) or not query.strip():
            raise UserError("Empty search query; give some words to search for")
        f = Filters(role=role, session=session, tag=tag, since=since, until=until)
        with self._lock:
            self.sync()
            if mode == "keyword":
                return self._keyword(query, f, k)
            if mode == "semantic":
                if self.embedder is None:
                    raise UserError(f"Semantic search is not available: {INSTALL_HINT}")
                return self._describe(self._semantic(query, f, k), query)
            pool = max(50, 5 * k)
            kw = self._keyword(query, f, pool)
            if self.embedder is None:
                return kw[:k]
            sem = self._semantic(query, f, pool)
            return self._fuse(kw, sem, query, k)

    def _fuse(self, kw: list[Hit], sem: list[tuple[Key, float]], query: str, k: int) -> list[Hit]:
        scores: dict[Key, float] = {}
        for rank, hit in enumerate(kw):
            key = (hit.session_id, hit.entry_id)
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
        for rank, (key, _sim) in enumerate(sem):
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        known = {(h.session_id, h.entry_id): h for h in kw}
        missing = [key for key, _ in best if key not in known]
        described = {
            (h.session_id, h.entry_id): h
            for h in self._describe([(key, 0.0) for key in missing], query)
        }
        out = []
        for key, score in best:
            found = known.get(key) or described.get(key)
            if found is not None:
                out.append(
                    Hit(
                        session_id=key[0],
                        entry_id=key[1],
                        score=score,
                        snippet=found.snippet,
                        role=found.role,
                        timestamp=found.timestamp,
                    )
                )
        return out

    def _semantic(self, query: str, f: Filters, limit: int) -> list[tuple[Key, float]]:
        embedder = self.embedder
        assert embedder is not None
        # With a budget, messages not embedded yet are simply not in the semantic half of this
        # search (the keyword half still finds them); they join as the backlog is worked off.
        self._embed_pending(embedder, self.embed_budget)
        keys, matrix = self._vectors(embedder)
        if not keys:
            return []
        import numpy as np

        q = embedder.embed([query])[0]
        sims = matrix @ q
        allowed = None if f.empty else self._allowed(f)
        order = np.argsort(-sims, kind="stable")
        # the relevance floor: below it the nearest message is still unrelated (calibrated on the
        # labelled queries over the example sessions, see docs/search.md)
        floor = float(getattr(embedder, "min_similarity", 0.0))
        out: list[tuple[Key, float]] = []
        for i in order:
            if float(sims[i]) < floor:
                break
            key = keys[int(i)]
            if allowed is not None and key not in allowed:
                continue
            out.append((key, float(sims[i])))
            if len(out) >= limit:
                break
        return out

    def _vectors(self, embedder: Embedder) -> tuple[list[Key], Any]:
        stamp = (embedder.name, self._vector_stamp(embedder))
        cache = self._vec_cache
        if cache is None or cache[0] != stamp:
            import numpy as np

            keys, blobs = self._load_vectors(embedder)
            matrix = (
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(keys), -1)
                if keys
                else np.zeros((0, embedder.dim), dtype=np.float32)
            )
            self._vec_cache = cache = (stamp, keys, matrix)
        return cache[1], cache[2]

    def embed_pending(self, max_seconds: float | None = None) -> bool:
        """Embed messages that have no vector yet, for at most ``max_seconds`` (``None``: all).
        Returns True when none is left. An application can call it in the background so that
        searches never wait for a large backlog (see ``embed_budget``)."""
        with self._lock:
            self.sync()
            embedder = self.embedder
            if embedder is None:
                return True
            return self._embed_pending(embedder, max_seconds)

    def index_status(self) -> IndexStatus:
        """How far the index is: messages indexed for keyword search, and how many of them have
        a vector for semantic search (``embedded == total`` when none waits)."""
        with self._lock:
            self.sync()
            embedder = self.embedder
            if embedder is None:
                n = self._message_count()
                return IndexStatus(messages=n, embedded=0, total=0, semantic=False)
            done, total = self._vector_counts(embedder)
            return IndexStatus(
                messages=self._message_count(), embedded=done, total=total, semantic=True
            )

    def index(self, progress: Callable[[int, int], None] | None = None) -> IndexStatus:
        """Bring the whole index up to date now: the keyword index, then a vector for every
        message that has none. ``progress(done, total)`` is called after each batch of vectors
        (importers and ``threadline catalog index`` print it as "indexing 1,240 / 28,000
        messages"). Searches never do this work silently: they use what is indexed."""
        with self._lock:
            self.sync()
            embedder = self.embedder
            if embedder is not None:
                done, total = self._vector_counts(embedder)
                if progress is not None and done < total:
                    progress(done, total)
                self._embed_pending(embedder, None, progress, done, total)
            return self.index_status()

    def _embed_pending(
        self,
        embedder: Embedder,
        max_seconds: float | None = None,
        progress: Callable[[int, int], None] | None = None,
        done: int = 0,
        total: int = 0,
    ) -> bool:
        """Embed indexed messages without a vector for ``embedder``; stop once ``max_seconds``
        have passed. True when none is left."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        batch = 256 if deadline is None else 16
        while True:
            rows = self._pending_vectors(embedder, batch)
            if not rows:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            vecs = embedder.embed([text for _, text in rows])
            self._store_vectors(
                embedder,
                [(ref, vecs[i].astype("float32").tobytes()) for i, (ref, _) in enumerate(rows)],
            )
            done += len(rows)
            if progress is not None:
                progress(min(done, total), total)

    # -- tags -------------------------------------------------------------------------------

    def sessions(self, tag: str | None = None) -> list[CatalogSession]:
        """Every session (newest first) with its tags; only those tagged ``tag`` if given."""
        with self._lock:
            tags = self._all_tags()
        rows = []
        for s in self.store.list():
            t = sorted(tags.get(s.id, ()))
            if tag is not None and tag not in t:
                continue
            rows.append(
                CatalogSession(
                    id=s.id,
                    name=s.name,
                    created=s.created,
                    modified=s.modified,
                    message_count=s.message_count,
                    first_message=s.first_message,
                    parent_session=s.parent_session,
                    tags=t,
                    damaged=s.damaged,
                )
            )
        return rows

    def session_tags(self, session_id: str) -> list[str]:
        """The tags of one session, sorted."""
        with self._lock:
            return sorted(self._all_tags().get(session_id, ()))

    def tags(self) -> dict[str, int]:
        """Every tag with the number of sessions carrying it."""
        counts: dict[str, int] = {}
        with self._lock:
            for tags in self._all_tags().values():
                for t in tags:
                    counts[t] = counts.get(t, 0) + 1
        return dict(sorted(counts.items()))

    def find_and_tag(
        self, query: str | None, tag: str | None, dry_run: bool = True, token: str | None = None
    ) -> TagPlan | TagResult:
        """Tag every session with a message matching ``query`` (all its words, or semantically
        close when an embedder is installed). Preview by default."""
        if not query or not str(query).strip():
            raise UserError("find_and_tag needs a query: the words to search for")
        tag = validate_tag(tag, "tag to apply")
        args = {"query": query, "tag": tag}
        with self._lock:
            self.sync()
            ids = self._matching_sessions(query)
            if not ids:
                raise UserError(f"No sessions found matching '{query}'. Try a broader search term.")
            return self._plan_or_apply("find_and_tag", args, ids, dry_run, token)

    def delete_tag(
        self, tag: str | None, dry_run: bool = True, token: str | None = None
    ) -> TagPlan | TagResult:
        """Remove ``tag`` from every session that has it. Preview by default."""
        tag = validate_tag(tag, "tag to delete")
        with self._lock:
            ids = self._tagged(tag)
            if not ids:
                raise UserError(f"No sessions have tag '{tag}'.")
            return self._plan_or_apply("delete_tag", {"tag": tag}, ids, dry_run, token)

    def merge_tags(
        self,
        tag_from: str | None,
        tag_to: str | None,
        dry_run: bool = True,
        token: str | None = None,
    ) -> TagPlan | TagResult:
        """Rename ``tag_from`` to ``tag_to`` on every session that has it. Preview by default."""
        tag_from = validate_tag(tag_from, "tag_from")
        tag_to = validate_tag(tag_to, "tag_to")
        if tag_from == tag_to:
            raise UserError("Source and target tags are identical.")
        with self._lock:
            ids = self._tagged(tag_from)
            if not ids:
                raise UserError(f"No sessions have tag '{tag_from}'.")
            return self._plan_or_apply(
                "merge_tags", {"tag_from": tag_from, "tag_to": tag_to}, ids, dry_run, token
            )

    def _target_tag(self, op: str, args: dict[str, str]) -> str:
        return args["tag_to"] if op == "merge_tags" else args["tag"]

    def _plan_or_apply(
        self, op: str, args: dict[str, str], ids: list[str], dry_run: bool, token: str | None
    ) -> TagPlan | TagResult:
        tagged = set(self._tagged(self._target_tag(op, args)))
        already = sum(1 for s in ids if s in tagged) if op != "delete_tag" else 0
        if dry_run:
            import secrets  # (through hmac) loads OpenSSL: on first use, not at import

            token = secrets.token_urlsafe(18)
            self._save_token(token, op, json.dumps(args, sort_keys=True), sorted(ids))
            sample = self._sample(ids)
            return TagPlan(
                operation=op,
                count=len(ids),
                sample=sample,
                already_tagged=already,
                token=token,
                message=_plan_message(op, args, len(ids), sample, already),
            )
        if not token:
            raise UserError(
                f"{op} with dry_run=False needs the token of a preview; call it with "
                "dry_run=True first"
            )
        saved = self._load_token(token)
        if saved is None:
            raise UserError("Unknown or already used token; preview again with dry_run=True")
        if saved[0] != op or saved[1] != json.dumps(args, sort_keys=True):
            raise UserError(
                f"This token was issued for another operation ({saved[0]} "
                f"{saved[1]}); preview this one with dry_run=True"
            )
        planned = saved[2]
        if set_digest(planned) != set_digest(ids):
            raise UserError(
                f"The sessions this {op} applies to changed since the preview "
                f"({len(planned)} then, {len(ids)} now); preview again with "
                "dry_run=True"
            )
        try:
            changed, already = self._apply(op, args, planned, token)
        except UserError:
            raise
        except Exception as exc:
            raise StoreError(f"Tag operation failed. No changes were made. ({exc})") from None
        return TagResult(
            operation=op,
            changed=changed,
            already_tagged=already,
            message=_result_message(op, args, changed, already),
        )

    def _sample(self, ids: list[str]) -> list[str]:
        chosen = sorted(ids)[:SAMPLE_SIZE]
        out = []
        for sid in chosen:
            try:
                s = self.store.summary(sid)
            except Exception:  # a session deleted meanwhile still shows by id
                out.append(sid)
                continue
            out.append(s.name or (s.first_message or "")[:60].replace("\n", " ") or sid)
        return out

    def _matching_sessions(self, query: str) -> list[str]:
        found = set(self._keyword_sessions(query))
        embedder = self.embedder
        if embedder is not None:
            for (sid, _eid), sim in self._semantic(query, Filters(), 10_000):
                if sim < MATCH_SIMILARITY:
                    break
                found.add(sid)
        return sorted(found)

    # -- backend hooks ------------------------------------------------------------------------

    def sync(self) -> None:
        """Bring the index up to date with the store."""

    def rebuild(self) -> None:
        """Drop and rebuild the message index and vectors (session tags are kept)."""
        raise NotImplementedError

    def forget(self, session_id: str, entry_ids: Sequence[str]) -> None:
        """Remove entries' text and vectors from the index (purge calls this)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the catalog's connections."""

    def _keyword(self, query: str, f: Filters, limit: int) -> list[Hit]:
        raise NotImplementedError

    def _keyword_sessions(self, query: str) -> list[str]:
        raise NotImplementedError

    def _describe(self, found: list[tuple[Key, float]], query: str) -> list[Hit]:
        raise NotImplementedError

    def _allowed(self, f: Filters) -> set[Key]:
        raise NotImplementedError

    def _vector_stamp(self, embedder: Embedder) -> Any:
        raise NotImplementedError

    def _message_count(self) -> int:
        """Messages in the keyword index."""
        raise NotImplementedError

    def _vector_counts(self, embedder: Embedder) -> tuple[int, int]:
        """(messages with a vector of ``embedder``, messages that can have one)."""
        raise NotImplementedError

    def _load_vectors(self, embedder: Embedder) -> tuple[list[Key], list[bytes]]:
        raise NotImplementedError

    def _pending_vectors(self, embedder: Embedder, limit: int) -> list[tuple[Any, str]]:
        raise NotImplementedError

    def _store_vectors(self, embedder: Embedder, rows: list[tuple[Any, bytes]]) -> None:
        raise NotImplementedError

    def _all_tags(self) -> dict[str, set[str]]:
        raise NotImplementedError

    def _tagged(self, tag: str) -> list[str]:
        raise NotImplementedError

    def _save_token(self, token: str, op: str, args: str, ids: list[str]) -> None:
        raise NotImplementedError

    def _load_token(self, token: str) -> tuple[str, str, list[str]] | None:
        raise NotImplementedError

    def _apply(self, op: str, args: dict[str, str], ids: list[str], token: str) -> tuple[int, int]:
        """Apply a tag operation to ``ids`` and consume ``token``, in one transaction;
        returns ``(changed, already_tagged)``."""
        raise NotImplementedError


def _sessions(n: int) -> str:
    return f"{n} session" if n == 1 else f"{n} sessions"


def _names(sample: list[str], count: int) -> str:
    return ", ".join(sample) + ("…" if count > len(sample) else "")


def _plan_message(
    op: str, args: dict[str, str], count: int, sample: list[str], already: int
) -> str:
    if op == "find_and_tag":
        extra = f" ({already} already have it)" if already else ""
        return (
            f"Found {_sessions(count)} matching '{args['query']}'. Sample: "
            f"{_names(sample, count)}. Would apply tag '{args['tag']}' to all {count}{extra}. "
            "Shall I proceed?"
        )
    if op == "delete_tag":
        return (
            f"Tag '{args['tag']}' appears on {_sessions(count)}: {_names(sample, count)}. "
            "Would remove it from all. Shall I proceed?"
        )
    return (
        f"Would rename '{args['tag_from']}' → '{args['tag_to']}' on {_sessions(count)}: "
        f"{_names(sample, count)}. Shall I proceed?"
    )


def _result_message(op: str, args: dict[str, str], changed: int, already: int) -> str:
    if op == "find_and_tag":
        extra = f" ({already} already had this tag)" if already else ""
        return f"Tagged {_sessions(changed)} with '{args['tag']}'{extra}."
    if op == "delete_tag":
        return f"Removed tag '{args['tag']}' from {_sessions(changed)}."
    extra = f" ({already} already had '{args['tag_to']}')" if already else ""
    return f"Renamed tag on {_sessions(changed)}{extra}."


# -- the SQLite catalog ----------------------------------------------------------------------


def _plain_snippet(body: str, query: str, width: int = 120) -> str:
    low = body.lower()
    pos = -1
    for term in fts_terms(query):
        pos = low.find(term)
        if pos >= 0:
            break
    start = max(0, pos - width // 3) if pos >= 0 else 0
    text = body[start : start + width].replace("\n", " ")
    return ("…" if start else "") + text + ("…" if start + width < len(body) else "")
