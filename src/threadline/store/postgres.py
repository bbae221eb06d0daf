"""The PostgreSQL store: multi-tenant, row-level secured, pooled (DESIGN §9).

``open_store("postgresql://…", tenant="acme")``. Every table carries ``tenant_id`` first in every
key; FORCEd row-level security policies compare it with ``current_setting('threadline.tenant',
true)``, which the store sets at the start of every transaction with ``set_config(…, true)`` (so a
pooled connection never carries a tenant from one transaction to the next). The store works as
the role ``threadline_app`` (neither owner nor BYPASSRLS): it connects as that role, or switches
to it with ``SET ROLE`` when the URL names another login. SQL is never built from user text:
values are bound parameters; the only composed identifier is the schema, checked against
``^[a-z_][a-z0-9_]{0,62}$``.

Writers: the first write takes a session-scoped advisory lock keyed by schema, tenant and session
on a connection from the store's writer pool (at most ``max_writers`` open writers per store, so
one tenant cannot take every connection of the server), held until ``Session.close()``, which
unlocks it and returns the connection. A second writer waits up to ``lock_timeout`` seconds in
the server's lock queue (default 0: only a 0.25 s grace for a holder that just died), then gets
:class:`~threadline.errors.SessionLockedError`. Taking the lock also sets the tenant and
``synchronous_commit`` on the writer's connection (cleared when it is given back), so an append
is one prepared statement in autocommit, a transaction of its own and one round trip.
``durability="flush"`` commits with ``synchronous_commit`` off, ``"fsync"`` and ``"group"`` with
it on (the server groups concurrent commits itself).

Since the writer holds the lock for its whole life, it numbers the records itself and an append
is a plain INSERT (schema version 5). The session row's list columns are folded lazily: the
writer keeps the summary of what it appended and folds it into the row with its first two
appends, every FOLD_RECORDS records or FOLD_SECONDS (the append is then one statement that
updates the row and inserts), and at release (committed before the unlock, one round trip).
``next_seq`` marks the records folded in; ``open_tail`` marks a session whose later records may
not be, and the listing and summary add those records' summary when they read such a row, in the
same statement, so they are exact while a writer is open and after one died unreleased (its
tail is folded by the next writer's first append). docs/stores.md has the whole design.

A writer that had to wait for the lock (another writer held it: a shared session) hands it on
after each append instead of keeping it: its append commits with ``synchronous_commit`` off (in
the WAL and visible, not yet flushed), then one statement unlocks and waits for the flush with a
barrier (a transactional logical message committed synchronously, whose commit record stands
after the append's in the WAL), and only then does ``append`` return; ``let_go`` tells the
session to take the lock again, with a catch-up read, before its next write. An acknowledged
append is as durable as a synchronous commit makes it; the next writer's entry is later in the
WAL, so a crash keeps a prefix. An entry can be visible before it is durable, never acknowledged
before (docs/stores.md, "A writer that waited hands the lock on").

Schema changes are versioned migrations (``threadline db upgrade URL`` / :func:`upgrade`), run as
the owner, never by the application role.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import os
import re
import select
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec

from threadline.errors import SessionLockedError, StoreError, UserError
from threadline.model.content import Message, TextBlock
from threadline.model.entries import (
    ENTRY_CLASSES,
    AnyRecord,
    MessageEntry,
    SessionHeader,
    decode_header,
    decode_record,
    encode,
    now,
)
from threadline.model.search_text import BODY_LIMIT, EMBED_LIMIT, embed_text, message_text
from threadline.store import migrations
from threadline.store.base import (
    CREATE_CHUNK,
    LAZY_FROM,
    AtLeaf,
    BaseStore,
    CatalogLocation,
    Loaded,
    LoadReport,
    SessionListing,
    SessionSummary,
    Slot,
    check_session_id,
    chunked,
    load_rows,
    not_found,
    parse_lines,
    summarize_records,
)
from threadline.store.sqlite import Delta, envelope, summary_row

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as _exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        f"{_exc}; run: pip install -e '.[postgres]' in the threadline clone"
    ) from None

APP_ROLE = "threadline_app"
TENANT_GROUP = "threadline_tenant"  # the group of the tenants' own login roles (role isolation)
ROLE_RE = re.compile(r"\A[a-z_][a-z0-9_]{0,62}\Z")
CONNECT_TIMEOUT = 3  # seconds: an unreachable server fails fast
SCHEMA_RE = re.compile(r"\A[a-z_][a-z0-9_]{0,62}\Z")
TABLES = ("tl_sessions", "tl_records", "tl_vectors", "tl_session_tags", "tl_tag_tokens")


def _schema(name: str) -> str:
    if not SCHEMA_RE.match(name):
        raise UserError(f"Invalid schema name {name!r}: use lowercase letters, digits and '_'")
    return name


def where(url: str) -> str:
    """host:port/dbname of a connection URL, without its password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the given URL"
    return f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname', '')}"


def reason(exc: BaseException) -> str:
    """The one-line primary message of a database error."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return primary or (str(exc).splitlines() or [type(exc).__name__])[0]


def upgrade(url: str, schema: str = "public") -> list[int]:
    """Create the schema if needed and apply the migrations not applied yet (idempotent; safe
    to run concurrently: an advisory lock serializes upgrades). Returns the versions applied.
    Run as the owner of the schema (not as ``threadline_app``)."""
    schema = _schema(schema)
    applied = []
    try:
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('threadline-upgrade', 0))")
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS tl_schema_migrations (version integer "
                "PRIMARY KEY, name text NOT NULL, applied text NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM tl_schema_migrations")}
            for version, name, script in migrations.scripts("postgres"):
                if version in done:
                    continue
                conn.execute(script.encode())
                conn.execute(
                    "INSERT INTO tl_schema_migrations VALUES (%s, %s, %s)", (version, name, now())
                )
                applied.append(version)
            conn.execute(
                sql.SQL("GRANT SELECT ON tl_schema_migrations TO {}, {}").format(
                    sql.Identifier(APP_ROLE), sql.Identifier(TENANT_GROUP)
                )
            )
    except psycopg.Error as exc:
        raise StoreError(
            f"Upgrading the database failed: {reason(exc)}; nothing was applied"
        ) from None
    return applied


WAL_RESIDUE = (
    "PostgreSQL's write-ahead log, replicas and base backups keep the text until "
    "their WAL segments are recycled or the backups expire"
)


def scrub(
    url: str, schema: str = "public", *, lock_timeout: str = "10s", wait: float = 10.0
) -> list[str]:
    """Rewrite every threadline table of ``schema`` (``VACUUM FULL``), so the text of deleted and
    purged rows leaves the table and index files: a plain ``DELETE`` (and even ``VACUUM``)
    leaves the bytes in the pages until they happen to be reused. Needs the tables' owner (or a
    superuser); each table is locked exclusively for the time its rewrite takes. Returns what
    still holds the text afterwards (see :data:`WAL_RESIDUE`)."""
    schema = _schema(schema)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            row: Any = conn.execute(
                "SELECT r.rolsuper OR pg_has_role(session_user, c.relowner, 'USAGE') FROM "
                "pg_roles r, pg_class c WHERE r.rolname = session_user AND c.oid = "
                "to_regclass('tl_records')"
            ).fetchone()
            if row is None or not row[0]:
                return [
                    f"the {schema} table files keep the purged text in freed space until "
                    "the owner runs: threadline db scrub URL",
                    WAL_RESIDUE,
                ]
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (lock_timeout,))
            # VACUUM FULL keeps rows that an older snapshot may still see: wait (briefly) until
            # every transaction that began before the purge committed has ended
            got: Any = conn.execute(
                "SELECT pg_current_xact_id()::text::bigint % 4294967296"
            ).fetchone()
            mark = got[0]
            deadline = time.monotonic() + wait
            older = True
            while older and time.monotonic() < deadline:
                got = conn.execute(
                    # the server's horizon counts a transaction's own id as well as its
                    # snapshot's: one that wrote and sits idle has an xid and no xmin
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND ((backend_xmin IS NOT NULL AND "
                    "age(backend_xmin) >= age(%s::text::xid)) OR (backend_xid IS NOT NULL AND "
                    "age(backend_xid) >= age(%s::text::xid)))",
                    (mark, mark),
                ).fetchone()
                older = got[0] > 0
                if older:
                    time.sleep(0.05)
            for table in TABLES:
                found: Any = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
                if found[0] is not None:
                    conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
    except psycopg.Error as exc:
        return [
            f"the table files could not be rewritten ({reason(exc)}); run as the owner: "
            "threadline db scrub URL",
            WAL_RESIDUE,
        ]
    if older:
        return [
            "a transaction older than the purge was still open: rows it could see stay in "
            "the table files until the owner runs: threadline db scrub URL",
            WAL_RESIDUE,
        ]
    return [WAL_RESIDUE]


def create_tenant_role(
    url: str, tenant: str, role: str, *, password: str | None = None, schema: str = "public"
) -> None:
    """Create (or re-point) the login role ``role`` for ``tenant`` (role isolation, see
    docs/stores.md): it can read and write that tenant's rows only, whatever it sets or runs.
    Run as the owner of the schema (with CREATEROLE). ``password``: for servers that do not
    trust local connections."""
    schema = _schema(schema)
    if not ROLE_RE.match(role) or role in (APP_ROLE, TENANT_GROUP):
        raise UserError(
            f"Invalid role name {role!r}: use lowercase letters, digits and '_', "
            f"not {APP_ROLE} or {TENANT_GROUP}"
        )
    if not isinstance(tenant, str) or not tenant or len(tenant) > 128 or "\x00" in tenant:
        raise UserError(f"Invalid tenant {tenant!r}: use 1-128 characters")
    try:
        with (
            psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn,
            conn.transaction(),
        ):
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            ident = sql.Identifier(role)
            if exists is None:
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN INHERIT NOSUPERUSER NOBYPASSRLS "
                        "NOCREATEDB NOCREATEROLE"
                    ).format(ident)
                )
            if password is not None:
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(ident, sql.Literal(password))
                )
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(TENANT_GROUP), ident))
            conn.execute(
                "INSERT INTO tl_tenant_roles VALUES (%s, %s) ON CONFLICT (role_name) "
                "DO UPDATE SET tenant_id = excluded.tenant_id",
                (role, tenant),
            )
    except psycopg.Error as exc:
        raise StoreError(
            f"Creating the tenant role {role} failed: {reason(exc)}; run it as "
            "the schema's owner with CREATEROLE"
        ) from None


def audit_rls(conn: Any, schema: str = "public", app_role: str = APP_ROLE) -> list[str]:
    """Problems that would let one tenant see another's rows; ``[]`` when the setup is sound.

    Checks that every threadline table exists with ``tenant_id`` as the first column of every
    primary, unique and foreign key; has row-level security enabled AND forced; has a policy
    with both USING and WITH CHECK on ``threadline.tenant``; and that the application role is
    neither its owner, nor a superuser, nor BYPASSRLS."""
    problems = []
    role = conn.execute(
        "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", (app_role,)
    ).fetchone()
    if role is None:
        problems.append(f"role {app_role} does not exist")
    elif role[0] or role[1]:
        problems.append(f"role {app_role} is a superuser or BYPASSRLS")
    for table in TABLES:
        row = conn.execute(
            "SELECT c.oid, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (schema, table),
        ).fetchone()
        if row is None:
            problems.append(f"{table}: missing")
            continue
        oid, enabled, forced, owner = row
        if not enabled:
            problems.append(f"{table}: row level security not enabled")
        if not forced:
            problems.append(f"{table}: row level security not forced (the owner bypasses it)")
        if owner == app_role:
            problems.append(f"{table}: owned by the application role {app_role}")
        policies = conn.execute(
            "SELECT polname, pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid),"
            " polcmd FROM pg_policy WHERE polrelid = %s",
            (oid,),
        ).fetchall()
        if not any(
            q and c and "threadline.tenant" in q and "threadline.tenant" in c and cmd == "*"
            for _n, q, c, cmd in policies
        ):
            problems.append(
                f"{table}: no FOR ALL policy with USING and WITH CHECK on threadline.tenant"
            )
        keys = conn.execute(
            "SELECT conname, contype, conkey[1] FROM pg_constraint WHERE conrelid = %s "
            "AND contype IN ('p', 'u', 'f')",
            (oid,),
        ).fetchall()
        first = conn.execute(
            "SELECT attnum FROM pg_attribute WHERE attrelid = %s AND attname = 'tenant_id'", (oid,)
        ).fetchone()
        for name, _kind, col in keys:
            if first is None or col != first[0]:
                problems.append(f"{table}: key {name} does not start with tenant_id")
    return problems


class PostgresLog:
    """One session's rows of one tenant."""

    def __init__(self, store: PostgresStore, session_id: str) -> None:
        self.session_id = session_id
        self._store = store
        self._seen = 0  # the highest seq read or written: a writer numbers its records from it
        self._generation = 0  # the session's generation at the load (a rewrite bumps it)
        # the highest seq this process knows of: a shared session's appends may know of records
        # it has not read yet (_seen), which it reads when it next reads the session
        self._known = 0
        self._conn: Any = None  # the writer's pooled connection, holding the advisory lock
        self._cur: Any = None  # a cursor on it, reused by every append (saves its setup)
        self._hand_on = False  # the lock was contended: hand it on after each append
        self.let_go = False  # the last append (or its failure) gave the lock up
        self.handed_on_lsn: str | None = None  # the WAL insert position after the last hand-on
        # the session row as the writer knows it: records below next_seq are folded into its
        # list columns; open_tail says later ones may not be; the summary of those not yet
        # folded (seq next_seq to _seen) is kept here until the next fold
        self._next = 1
        self._open_tail = False
        self._pending = _Tail()
        self._unsummed: list[AnyRecord] = []  # appended since the last fold, not summarized yet
        self._appends = 0  # appends since the lock was taken
        # a shared session's fold of the open tail, passed with its next append (or at release)
        self._carry: tuple[Any, ...] | None = None
        self._waited = False  # the last shared append waited for the lock
        self._alone = True  # nor found another writer's records before its own
        # the first and last seq of the records this writer appended alone, one after another,
        # and those records (summarized when they are folded)
        self._own: tuple[int, int, list[AnyRecord]] | None = None
        self._tail_from: int | None = None  # next_seq as the last append alone read it
        self._folded = 0.0  # time.monotonic() of the last fold

    def load(self) -> Loaded:
        with self._store.tx() as conn:
            # the highest seq, not next_seq: records a writer has not folded in yet count too
            row = conn.execute(
                "SELECT header, generation, coalesce((SELECT max(seq) FROM tl_records r WHERE "
                "r.tenant_id = s.tenant_id AND r.session_id = s.session_id), 0) + 1 FROM "
                "tl_sessions s WHERE tenant_id = %s AND session_id = %s",
                (self._store.tenant, self.session_id),
                prepare=True,
            ).fetchone()
            if row is None:
                raise not_found(self.session_id)
            # the path, not the session: a readable message's JSON stays on the server until
            # it is used (a lazy slot reads it through a RowSource); the rest is read now
            rows = conn.execute(
                _LOAD_ROWS,
                (row[2] - 1 >= LAZY_FROM, self._store.tenant, self.session_id, 0),
                prepare=True,
            ).fetchall()
        report = LoadReport()
        sizes: dict[str, int] = {}
        slots = load_rows(rows, functools.partial(self._fetch, row[1]), report, sizes, 2)
        self._seen = self._known = rows[-1][0] if rows else 0
        self._generation = row[1]
        return Loaded(header=decode_header(bytes(row[0])), slots=slots, sizes=sizes, report=report)

    def _fetch(self, generation: int, first: int, last: int) -> list[bytes]:
        """The records ``first`` to ``last`` of the load made at ``generation`` (none if the
        session was rewritten since)."""
        with self._store.tx() as conn:
            rows = conn.execute(
                "SELECT raw FROM tl_records WHERE tenant_id = %s AND session_id = %s AND seq "
                "BETWEEN %s AND %s AND EXISTS (SELECT 1 FROM tl_sessions WHERE tenant_id = %s "
                "AND session_id = %s AND generation = %s) ORDER BY seq",
                (
                    st := self._store.tenant,
                    self.session_id,
                    first,
                    last,
                    st,
                    self.session_id,
                    generation,
                ),
                prepare=True,
                binary=True,  # bytea as bytes, not hex text to parse
            ).fetchall()
        return [bytes(r[0]) for r in rows]

    @property
    def _key(self) -> str:
        # the schema is part of the key: the same tenant and session id in two schemas of one
        # database are two sessions, and their writers must not block each other
        return f"{self._store.schema}\x1f{self._store.tenant}\x1f{self.session_id}"

    def acquire(self) -> list[Slot]:
        if self._conn is not None:
            return []
        st = self._store
        conn = st.writer_connection()
        locked = False
        # Queue on the server (never reconnect-and-retry) up to lock_timeout (st.lock_wait)
        try:
            # the lock and what other writers appended since the load: one round trip. No
            # BEGIN/COMMIT: the statements of a pipeline up to its Sync run in one implicit
            # transaction, so a lock that times out rolls the settings back with it
            try:
                with conn.pipeline():
                    # the tenant and synchronous_commit stay set on this connection for as long
                    # as the writer holds it (cleared by _give_back), so that every append is a
                    # single statement
                    conn.execute(
                        "SELECT set_config('threadline.tenant', %s, false), "
                        "set_config('lock_timeout', %s, true)",
                        (st.tenant, st.lock_wait),
                        prepare=True,
                    )
                    # whether this writer had to wait, and the synchronous_commit that follows
                    lock = conn.execute(_LOCK, (st.sync_commit, self._key, self._key), prepare=True)
                    # a statement of its own: its snapshot is taken after the lock was granted
                    cur = conn.execute(
                        _ACQUIRE_READ, (self._seen + 1, st.tenant, self.session_id), prepare=True
                    )
                waited = lock.fetchone()[0]
                locked = True
                got = cur.fetchall()
            except psycopg.errors.LockNotAvailable:
                pass
            if not locked:
                raise SessionLockedError(self.session_id, self._holder(conn))
        except BaseException:
            self._give_back(conn)
            raise
        self._conn = conn
        self._cur = conn.cursor()
        self._hand_on = waited
        self.let_go = False
        return self._took(got)

    def _took(self, got: list[Any]) -> list[Slot]:
        """The writer's state from :data:`_ACQUIRE_READ`'s rows (none: the session is gone, and
        the first append says so); returns the records appended since the load."""
        rows = [(r[2], r[3]) for r in got if r[2] is not None]
        self._next, self._open_tail = (got[0][0], got[0][1]) if got else (self._seen + 1, False)
        # a writer that died without its fold at release left records from next_seq on: they
        # are folded in with this writer's first append (or its release)
        self._pending = _Tail()
        self._unsummed = []
        tail = [bytes(raw) for seq, raw in rows if seq >= self._next]
        if tail:
            self._pending.add(_summary(tail))
        self._appends = 0
        self._folded = time.monotonic()
        new = [r for r in rows if r[0] > self._seen]
        # the highest seq stored, from which this writer numbers (lower than the load's when
        # another writer rewrote the session since: a purge)
        if rows:
            self._seen = rows[-1][0]
        elif got:
            self._seen = self._next - 1
        self._known = self._seen
        return _parse(new, LoadReport(), {}, 0) if new else []

    def _holder(self, conn: Any) -> int | None:
        """The client pid of the writer holding the lock (writers name it in
        application_name), or None when it cannot be seen."""
        row = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND "
            "((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(%s, 0)",
            (self._key,),
        ).fetchone()
        name = row[0] if row else ""
        return int(name.rsplit(":", 1)[1]) if name and name.startswith("threadline:") else None

    def _writer(self) -> Any:
        if self._conn is None:
            raise StoreError(f"Session '{self.session_id}' is not held for writing")
        return self._conn

    def append(self, lines: Sequence[bytes], records: Sequence[AnyRecord] | None = None) -> None:
        """One statement in autocommit, its own transaction and one round trip (the tenant and
        synchronous_commit were set on this connection by :meth:`acquire`): the records,
        numbered by this writer, in a plain INSERT; or, when a fold is due
        (:meth:`_fold_due`), in the statement that also folds what is pending into the
        session row."""
        if not lines:
            return
        conn = self._writer()
        decoded = (
            [_encoded(line, rec) for line, rec in zip(lines, records, strict=True)]
            if records is not None
            else [_decoded(line) for line in lines]
        )
        recs = [rec for _row, rec in decoded if rec is not None]
        after = self._seen + len(lines)  # this writer alone numbers the session's records
        fold = self._fold_due(after)
        head: tuple[Any, ...]
        if fold:
            # the records since the last fold are summarized now, together (one summary per
            # fold, not one per append)
            tail = self._pending.plus(summarize_records(_NO_HEADER, [*self._unsummed, *recs]))
            # the first append of a writer folds everything and leaves no open tail (a writer
            # that appends once and closes touches the session row once); from the second on
            # the appends between folds are left open for the readers to summarize
            still_open = self._appends > 0
            head = (
                after + 1,
                tail.modified,
                tail.message_count,
                tail.name,
                tail.first_message,
                still_open,
                self._store.tenant,
                self.session_id,
            )
            one, many = _APPEND_ONE, _APPEND_MANY
        else:
            head = (self._store.tenant, self.session_id)
            one, many = _INSERT_ONE, _INSERT_MANY
        if len(lines) == 1:
            query, params = one, (*head, after, *decoded[0][0], lines[0])
        else:
            cols = [list(col) for col in zip(*(row for row, _rec in decoded), strict=True)]
            query, params = many, (*head, self._seen, *cols, list(lines))
        try:
            if query is _INSERT_ONE:
                written = _insert_one(conn, self._cur, params)
            else:
                written = self._cur.execute(query, params, prepare=True).rowcount
        except psycopg.errors.ForeignKeyViolation:
            written = 0  # the session was deleted: the INSERT found no session row
        except psycopg.Error as exc:
            if conn.broken or conn.pgconn.status != psycopg.pq.ConnStatus.OK or self._hand_on:
                self._let_go(conn)
            raise StoreError(
                f"Writing to session '{self.session_id}' failed ({reason(exc)}); "
                "nothing was written. Check the database and retry"
            ) from None
        if written != len(lines):  # the fold found no session row to update: none inserted
            if self._hand_on:
                self._let_go(conn)
            raise not_found(self.session_id)
        self._seen = after
        self._appends += 1
        if fold:
            self._next, self._open_tail = after + 1, still_open
            self._pending = _Tail()
            self._unsummed = []
            self._folded = time.monotonic()
        else:
            self._unsummed += recs
        if self._hand_on:
            # a writer that waited folds with its one append (the first since it took the
            # lock), so nothing is left to fold when it hands the lock on
            self._hand_on_lock(conn)

    def append_at_leaf(self, line: bytes, record: AnyRecord, parent: str | None) -> AtLeaf | None:
        """One tree entry, appended by a session that does not hold the writer lock (a shared
        session): one statement and one round trip, ``tl_append_at_leaf`` (schema version 6, whose
        comment says what it does; its body as version 7 rewrote it) run through libpq. It takes the
        session's lock for its own transaction, places the record under the last one when other
        writers appended since this process last read the session, and returns what they appended. A
        writer that had to wait for the lock committed with synchronous_commit off; it then waits
        for the WAL flush (:data:`_HAND_ON`'s barrier) in a second round trip, after the lock went
        to the next writer: the appends of writers queued one behind the other share flushes. None
        (nothing written) when the function wrote nothing (the session gone or rewritten, its last
        record not the leaf), or when the line's parent is not where :func:`_parent_at` finds it:
        the caller takes the writer lock and appends."""
        at = _parent_at(line, parent)
        if at is None:
            return None
        row = _encoded(line, record)[0]
        st = self._store
        known = max(self._known, self._seen)
        carry, self._carry = self._carry, None
        if self._alone and carry is None:  # no other writer was about last time
            done = self._append_alone(line, record, row, parent, known)
            if done is not None:
                return done
            self._alone = False
        values = _libpq_values(
            (
                st.tenant,
                self.session_id,
                self._key,
                st.lock_wait,
                st.sync_commit,
                known,
                self._generation,
                parent,
                _TREE_TYPES,
                row[0],
                *row[2:],
                line,
                at[0] + 1,
                at[1],
                FOLD_RECORDS,
                *(carry or (None,) * 6),
            )
        )
        if values is None:
            return None
        # the flush barrier goes in the same pipeline when the last append waited (writers
        # taking turns); otherwise it follows only if this one did
        flush_too = self._waited and st.sync_commit == "on"
        conn = st.writer_connection()
        try:
            try:
                res, flushed = _append_call(conn, values, flush_too)
            except psycopg.errors.LockNotAvailable:
                raise SessionLockedError(self.session_id, self._holder(conn)) from None
            except psycopg.Error as exc:
                conn.close()
                raise StoreError(
                    f"Writing to session '{self.session_id}' failed ({reason(exc)}); nothing "
                    "was written. Check the database and retry"
                ) from None
            got = [[res.get_value(i, c) for c in range(6)] for i in range(res.ntuples)]
            self._waited = bool(got) and got[-1][4] == b"\x01"
            if self._waited and st.sync_commit == "on":
                try:
                    if flushed is None or flushed.status != _TUPLES_OK:
                        flushed = _run_prepared(
                            conn, _FLUSHED_NAME, _FLUSHED, [], [], 0, _TUPLES_OK
                        )
                except psycopg.Error as exc:
                    conn.close()
                    raise StoreError(
                        f"Session '{self.session_id}': the append was committed but confirming "
                        f"that it is durable failed ({reason(exc)}); it is not acknowledged (the "
                        "next read shows it if it was kept). Check the database and retry"
                    ) from None
                self.handed_on_lsn = flushed.get_value(0, 0).decode()
        finally:
            st.writer_done(conn)
        if not got:
            return None
        mine = got.pop()
        seq = int.from_bytes(mine[0], "big")
        self._known = seq
        self._alone = not self._waited and seq == known + 1  # neither waited nor was preceded
        if seq == known + 1 and self._seen == known:
            self._seen = seq  # the session takes the record in: it is up to date
        if mine[5] is not None:  # the open tail is due for a fold: carried by the next call
            tail = _Tail()
            tail.add(_summary([r[2] for r in got]))
            tail.add(summarize_records(_NO_HEADER, [record]))
            self._carry = (int.from_bytes(mine[5], "big"), seq, *tail.columns())
        return AtLeaf(behind=self._seen != seq)

    def _append_alone(
        self, line: bytes, record: AnyRecord, row: tuple[Any, ...], parent: str | None, known: int
    ) -> AtLeaf | None:
        """A shared append in the common case, no other writer at work: ``tl_append_alone``
        (schema version 7, whose comment says what it does), a plain INSERT numbered after the
        last record this process knows of, under its own leaf, which inserts nothing when
        another writer holds or is taking the session's lock, when that number is taken
        (another writer appended), or when the session row is not as expected (rewritten,
        gone, its tail not open). None then: the caller runs ``tl_append_at_leaf``, which waits
        for the lock and places the record. The records this writer appended one after
        another are kept, summarized only when they are folded: the append that makes the
        open tail FOLD_RECORDS long passes their summary and folds them in its own
        transaction when the tail is all its own; otherwise (others' records in the tail, a
        fold that did not apply) it reads the tail and carries the fold to the next append (or
        to release)."""
        st = self._store
        seq = known + 1
        own = self._own
        if own is None or own[1] != known:
            own = (seq, known, [])
        records = own[2]  # this record joins them once it is written
        fold: tuple[Any, ...] = (None,) * 5
        # the tail's FOLD_RECORDS-th record, the whole tail this writer's: fold it in the call
        due = own[0] == self._tail_from and (seq - own[0] + 1) % FOLD_RECORDS == 0
        if due:
            fold = (own[0], *_own_tail([*records, record]).columns())
        values = _libpq_values(
            (
                st.tenant,
                st.sync_commit,
                self.session_id,
                self._key,
                self._generation,
                seq,
                row[0],
                parent,
                *row[2:],
                line,
                *fold,
            )
        )
        if values is None:
            return None
        conn = st.writer_connection()
        try:
            res = _run_prepared(
                conn, _ALONE_NAME, _AT_LEAF_ALONE, values, _ALONE_FORMATS, 1, _TUPLES_OK
            )
        except psycopg.Error:
            conn.close()
            return None  # the usual path says what is wrong
        finally:
            st.writer_done(conn)
        got = res.get_value(0, 0) if res.ntuples else None
        if got is None:
            return None
        records.append(record)
        first = int.from_bytes(got, "big")
        self._known = seq
        if self._seen == known:
            self._seen = seq
        self._tail_from = first
        if due and first == seq + 1:  # folded in the call
            self._own = None
        elif (seq - first + 1) % FOLD_RECORDS == 0:
            if own[0] == first:
                tail = _own_tail(records)
            else:  # others' records too: read the tail
                tail = _Tail()
                tail.add(_summary(self._fetch(self._generation, first, seq - 1)))
                tail.add(summarize_records(_NO_HEADER, [record]))
            self._own = None
            self._carry = (first, seq, *tail.columns())
        else:
            self._own = (own[0], seq, records)
        return AtLeaf(behind=self._seen != seq)

    def read_newer(self) -> list[Slot]:
        """The records appended since the session last read it (after shared appends that
        others' records preceded), read as a load reads them."""
        with self._store.tx() as conn:
            rows = conn.execute(
                _LOAD_ROWS, (True, self._store.tenant, self.session_id, self._seen), prepare=True
            ).fetchall()
        if not rows:
            return []
        self._seen = rows[-1][0]
        self._known = max(self._known, self._seen)
        return load_rows(
            rows, functools.partial(self._fetch, self._generation), LoadReport(), {}, 0
        )

    def _let_go(self, conn: Any) -> None:
        """Give the lock and the connection up after a failed append (the session takes the
        lock again, with a catch-up read, before its next write)."""
        self._conn = self._cur = None
        self.let_go = True
        self._give_back(conn)

    def _fold_due(self, after: int) -> bool:
        """Whether an append up to seq ``after`` folds: a writer's first append (which also
        folds what a writer killed before its release left) and its second (which opens the
        tail), the first after a rewrite, and any that would bring the open tail to
        FOLD_RECORDS records or comes FOLD_SECONDS after the last fold. So the readers
        summarize fewer than FOLD_RECORDS records of a session, even one whose writer died."""
        return (
            self._appends == 0
            or not self._open_tail
            or after - self._next + 1 >= FOLD_RECORDS
            or time.monotonic() - self._folded >= FOLD_SECONDS
        )

    def _hand_on_lock(self, conn: Any) -> None:
        """After the append of a writer that waited for the lock (committed with
        synchronous_commit off: in the WAL and visible, not yet flushed): unlock, then wait
        until the WAL is flushed past the append, then give the connection back. One
        statement: the unlock takes effect when it runs, while the barrier (a transactional
        logical message, which gives the statement a transaction id and a WAL record, so
        that its commit is synchronous) waits for the flush at the statement's commit. The
        next writer appends meanwhile; its entry stands after this one in the WAL."""
        st = self._store
        self._conn = self._cur = None
        self.let_go = True
        try:
            row = conn.execute(
                _HAND_ON, (st.sync_commit, st.sync_commit == "on"), prepare=True
            ).fetchone()
        except psycopg.Error as exc:
            with contextlib.suppress(psycopg.Error):
                conn.close()
            st.writer_done(conn)
            # committed and visible, durability unknown: read back by the next catch-up
            raise StoreError(
                f"Session '{self.session_id}': the append was committed but confirming that it "
                f"is durable failed ({reason(exc)}); it is not acknowledged (the next write "
                "reads it back if it was kept). Check the database and retry"
            ) from None
        self.handed_on_lsn = row[0]
        st.writer_done(conn)

    def raw_lines(self) -> Iterator[bytes]:
        with self._store.tx() as conn:
            rows = conn.execute(
                "SELECT raw FROM tl_records WHERE tenant_id = %s AND session_id = %s ORDER BY seq",
                (self._store.tenant, self.session_id),
            ).fetchall()
        return iter([bytes(r[0]) for r in rows])

    def rewrite(self, header: bytes, lines: Iterable[bytes]) -> None:
        conn = self._writer()
        st = self._store
        data = list(lines)
        rows = [_row(line) for line in data]
        d = Delta(decode_header(header), data)
        with conn.transaction():
            st.set_tenant(conn)
            conn.execute(
                "DELETE FROM tl_records WHERE tenant_id = %s AND session_id = %s",
                (st.tenant, self.session_id),
            )
            _insert_records(conn, st.tenant, self.session_id, 1, rows, data)
            gen = conn.execute(
                "UPDATE tl_sessions SET header = %s, next_seq = %s, generation = generation + 1,"
                " modified = greatest(created, %s), message_count = %s, name = %s, "
                "first_message = %s, open_tail = false WHERE tenant_id = %s AND session_id = %s "
                "RETURNING generation",
                (
                    header,
                    len(data) + 1,
                    d.modified,
                    d.message_count,
                    d.name,
                    d.first_message,
                    st.tenant,
                    self.session_id,
                ),
            ).fetchone()
        self._seen = self._known = len(data)
        if gen is not None:
            self._generation = gen[0]
        self._next, self._open_tail, self._pending = len(data) + 1, False, _Tail()
        self._unsummed = []

    def backup(self, suffix: str) -> str | None:
        return None  # the database's own backups cover it; purge must leave no copy behind

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # every append is durable on its own

    def release(self) -> None:
        conn, self._conn, self._cur = self._conn, None, None
        if conn is not None:
            self._give_back(conn, self._fold_params())
        carry, self._carry = self._carry, None
        if carry is not None:  # a shared session's fold it did not pass on with an append
            self._fold_carried(carry)

    def _fold_carried(self, carry: tuple[Any, ...]) -> None:
        """A shared session's fold of the open tail, on its own at release: one round trip on
        a writer connection, one transaction that waits for the session's lock (as an append
        does, up to lock_timeout) and then folds, committed asynchronously (a fold lost in a
        crash leaves the tail open, which the listing reads). A failure leaves the tail open
        too, for the next writer told to fold."""
        st = self._store
        first, *columns = carry
        conn = st.writer_connection()
        try:
            with conn.pipeline():
                conn.execute(
                    "SELECT set_config('threadline.tenant', %s, true), "
                    "set_config('synchronous_commit', 'off', true), "
                    "set_config('lock_timeout', %s, true)",
                    (st.tenant, st.lock_wait),
                    prepare=True,
                )
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (self._key,),
                    prepare=True,
                )
                # its own statement: its snapshot is taken after the lock was granted
                conn.execute(
                    _FOLD_CARRIED,
                    (*columns, st.tenant, self.session_id, first, self._generation),
                    prepare=True,
                )
        except psycopg.Error:
            conn.close()
        finally:
            st.writer_done(conn)

    def _fold_params(self) -> tuple[Any, ...] | None:
        """The parameters of :data:`_FOLD` for what this writer left unfolded (and the open
        tail it set to be cleared), or None when the session row is up to date."""
        if not self._open_tail and self._next > self._seen:
            return None
        t = self._pending.plus(summarize_records(_NO_HEADER, self._unsummed))
        return (
            self._seen + 1,
            t.modified,
            t.message_count,
            t.name,
            t.first_message,
            self._store.tenant,
            self.session_id,
        )

    def _give_back(self, conn: Any, fold: tuple[Any, ...] | None = None) -> None:
        """Fold what is pending (``fold``: :meth:`_fold_params`), unlock and return the writer
        connection to its pool, in one round trip; a connection that cannot be unlocked is
        closed (closing drops its advisory locks) rather than pooled. A fold that fails leaves
        the session's tail open: the listing still counts it, the next writer folds it."""
        try:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
            if fold is None:
                # the lock and the tenant this writer set leave the connection in one statement
                conn.execute(_UNLOCK, prepare=True)
            else:
                with conn.pipeline() as p:
                    conn.execute(_FOLD, fold, prepare=True)
                    # its own transaction, committed before the unlock: the next writer takes
                    # the lock and reads the session row as folded
                    p.sync()
                    conn.execute(_UNLOCK, prepare=True)
        except psycopg.Error:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._store.writer_done(conn)

    def raw_header(self) -> bytes:
        with self._store.tx() as conn:
            row = conn.execute(
                "SELECT header FROM tl_sessions WHERE tenant_id = %s AND session_id = %s",
                (self._store.tenant, self.session_id),
            ).fetchone()
        if row is None:
            raise not_found(self.session_id)
        return bytes(row[0])

    def companion_files(self) -> list[str]:
        return []

    def size(self) -> int:
        with self._store.tx() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(length(raw) + 1), 0) FROM tl_records WHERE tenant_id = %s "
                "AND session_id = %s",
                (self._store.tenant, self.session_id),
            ).fetchone()
            head = conn.execute(
                "SELECT length(header) + 1 FROM tl_sessions WHERE tenant_id = %s"
                " AND session_id = %s",
                (self._store.tenant, self.session_id),
            ).fetchone()
        return int(row[0]) + (int(head[0]) if head else 0)


_NO_HEADER = SessionHeader(id="-", version=1, timestamp="")
# A session's records after seq (the last argument) as a load reads them: the record's JSON,
# or (the first argument true) NULL for a readable message, whose JSON stays on the server until
# it is used (a lazy slot reads it through a RowSource)
_LOAD_ROWS = (
    "SELECT seq, id, parent_id, timestamp, octet_length(raw), CASE WHEN %s AND "
    "type = 'message' AND role IS NOT NULL AND id IS NOT NULL AND timestamp IS NOT NULL "
    "THEN NULL ELSE raw END FROM tl_records WHERE tenant_id = %s AND session_id = %s AND "
    "seq > %s ORDER BY seq"
)
_GRACE_MS = 250  # the least a second writer waits before SessionLockedError

# What leaves a writer's connection when it lets go: its lock and the tenant it set
_UNLOCKED = "pg_advisory_unlock_all(), set_config('threadline.tenant', '', false)"
# The writer lock, and whether the writer had to wait for it (another writer held it or was
# queued: pg_try_advisory_lock fails then, as the queue is fair); a writer that waited commits
# its appends with synchronous_commit off and hands the lock on after each (_hand_on_lock).
_LOCK = (
    "SELECT w, set_config('synchronous_commit', CASE WHEN w THEN 'off' ELSE %s END, false) "
    "FROM (SELECT CASE WHEN pg_try_advisory_lock(hashtextextended(%s, 0)) THEN false "
    "ELSE pg_advisory_lock(hashtextextended(%s, 0)) IS NOT NULL END OFFSET 0) AS l(w)"
)
# Unlock, clear the tenant, and (durability "fsync"/"group") wait for the WAL flush: the
# transactional logical message takes a transaction id and writes WAL, so the statement's own
# commit is synchronous (pg_current_xact_id() alone is not: a transaction that wrote no WAL
# before its commit record commits asynchronously). Its LSN lies past the append's commit.
_HAND_ON = (
    "SELECT pg_current_wal_insert_lsn()::text, "
    + _UNLOCKED
    + ", set_config('synchronous_commit', %s, false), "
    "CASE WHEN %s THEN pg_logical_emit_message(true, 'threadline', '') END"
)

FOLD_RECORDS = 32  # a writer folds its records into the session row at least this often,
FOLD_SECONDS = 1.0  # and on its first append after this long (and when it releases the lock)

# The statements of a writer (schema version 5). It holds the session's advisory lock, so it
# numbers the records itself (seq: the highest it has seen + 1) and an append is one plain
# INSERT; the session row's list columns are folded in by _APPEND_* (now and then) and _FOLD
# (at release), which set next_seq past the records folded. _INSERT_* and _APPEND_* take
# (head…, seq, the columns of _row, raw): one record, or (head…, the seq before the first,
# arrays of each column) for several.
_COLUMNS = "tenant_id, session_id, seq, id, parent_id, type, timestamp, role, body, etext, raw"
_UNNEST = (
    "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::bytea[]) WITH ORDINALITY AS r(id, parent_id, type, timestamp, role, body, "
    "etext, raw, ord)"
)
_INSERT_ONE = (
    f"INSERT INTO tl_records ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
# _INSERT_ONE as libpq runs it (:func:`_insert_one`): the raw column in binary, the rest as text
_INSERT_ONE_NAME = b"threadline_insert_one"
_INSERT_ONE_LIBPQ = (
    f"INSERT INTO tl_records ({_COLUMNS}) VALUES ({', '.join(f'${i}' for i in range(1, 12))})"
).encode()
_INSERT_ONE_FORMATS = [0] * 10 + [1]
_INSERT_MANY = (
    f"INSERT INTO tl_records ({_COLUMNS}) SELECT %s, %s, %s + r.ord, r.id, r.parent_id, r.type, "
    f"r.timestamp, r.role, r.body, r.etext, r.raw {_UNNEST}"
)
# The fold: the list columns take in what a writer appended since the last fold; open_tail
# says whether it goes on appending without folding. The row lock this UPDATE takes is the
# session row's only one on the append path (the plain INSERT's foreign key check shares it).
_SET_FOLDED = (
    "UPDATE tl_sessions SET next_seq = %s, modified = greatest(modified, %s), "
    "message_count = message_count + %s, name = coalesce(%s, name), "
    "first_message = coalesce(first_message, %s)"
)
_FOLD = _SET_FOLDED + ", open_tail = false WHERE tenant_id = %s AND session_id = %s"
# an append that folds: one statement still (the records are inserted only if the session row
# was found, so a deleted session inserts nothing)
_BUMP = (
    f"WITH s AS ({_SET_FOLDED}, open_tail = %s WHERE tenant_id = %s AND session_id = %s "
    f"RETURNING tenant_id, session_id) INSERT INTO tl_records ({_COLUMNS}) "
)
_APPEND_ONE = _BUMP + "SELECT s.tenant_id, s.session_id, %s, %s, %s, %s, %s, %s, %s, %s, %s FROM s"
_APPEND_MANY = (
    _BUMP + "SELECT s.tenant_id, s.session_id, %s + r.ord, r.id, r.parent_id, r.type, "
    f"r.timestamp, r.role, r.body, r.etext, r.raw FROM s, (SELECT * {_UNNEST}) AS r"
)
_UNLOCK = "SELECT " + _UNLOCKED
# Taking the lock: the session row's fold state and every record the writer has not seen or
# that is not folded in yet (a writer killed before its release leaves those). One row with
# NULL record columns when there are no such records; none when the session is gone. The
# lower bound on seq must be a condition of the index scan, or every record of the session is
# read (1-5 ms at 2,000-5,000 records, for every writer that takes the lock): so LATERAL (a
# join's filter is not one), and no arithmetic on a column (the bound takes the seen seq + 1):
# under row-level security a qual that may raise an error (an overflow) is not leakproof and
# is filtered after the policy's, row by row.
_ACQUIRE_READ = (
    "SELECT s.next_seq, s.open_tail, r.seq, r.raw FROM tl_sessions s LEFT JOIN LATERAL "
    "(SELECT seq, raw FROM tl_records WHERE tenant_id = s.tenant_id AND session_id = "
    "s.session_id AND seq >= least(%s, s.next_seq) ORDER BY seq) r ON true "
    "WHERE s.tenant_id = %s AND s.session_id = %s"
)


# A shared append (PostgresLog.append_at_leaf): the function of schema version 6 (its comment
# says what it does; version 7 rewrote its body), through libpq (_run_prepared); the raw line in
# binary, the rows returned in binary (seq, parent_id, raw, mine, folded, waited).
_AT_LEAF_NAME = b"threadline_append_at_leaf"
_AT_LEAF_CALL = (
    "SELECT * FROM tl_append_at_leaf(" + ", ".join(f"${i}" for i in range(1, 26)) + ")"
).encode()
_AT_LEAF_FORMATS = [0] * 15 + [1] + [0] * 9
# A fold a shared session carries when it closes (the columns of tl_append_at_leaf's p_fold_*),
# run under the session's lock, and only if no one folded those records since
_FOLD_CARRIED = (
    "UPDATE tl_sessions SET next_seq = %s + 1, modified = greatest(modified, %s), "
    "message_count = message_count + %s, name = coalesce(%s, name), "
    "first_message = coalesce(first_message, %s) WHERE tenant_id = %s AND session_id = %s AND "
    "next_seq = %s AND generation = %s"
)
# After a shared append that waited (committed with synchronous_commit off): the barrier of
# _HAND_ON alone (the writer connection's synchronous_commit is the store's, "on" here)
_FLUSHED_NAME = b"threadline_flushed"
_FLUSHED = (
    b"SELECT pg_current_wal_insert_lsn()::text, CASE WHEN current_setting('threadline.flush', "
    b"true) = 'on' THEN pg_logical_emit_message(true, 'threadline', '') END, "
    b"set_config('threadline.flush', '', false)"
)
# A shared append with no other writer at work (PostgresLog._append_alone): the function of
# schema version 7 (its comment says what it does), through libpq; the raw line in binary, the
# session row's next_seq returned in binary (NULL: nothing inserted).
_ALONE_NAME = b"threadline_append_alone"
_AT_LEAF_ALONE = (
    "SELECT tl_append_alone(" + ", ".join(f"${i}" for i in range(1, 20)) + ")"
).encode()
_ALONE_FORMATS = [0] * 13 + [1] + [0] * 5
# the types of the known tree entries: the session's leaf is the last record when it is one
_TREE_TYPES = "{" + ",".join(sorted(ENTRY_CLASSES)) + "}"


def _parent_at(line: bytes, parent: str | None) -> tuple[int, int] | None:
    """Where ``line`` (a record as :func:`encode` writes it: type, id, then parent_id) holds
    its parent id's JSON: (offset, length), or None when it is not found there."""
    i = line.find(b',"parent_id":')
    if i < 0:
        return None
    i += 13
    token = msgspec.json.encode(parent)
    return (i, len(token)) if line.startswith(token, i) else None


def _insert_one(conn: Any, cur: Any, params: Sequence[Any]) -> int:
    """Run :data:`_INSERT_ONE` (a writer's usual append) through libpq's PQexecPrepared on the
    connection's ``pgconn`` (:func:`_run_prepared`): the same prepared statement,
    Bind/Execute/Sync and one round trip as ``cursor.execute(..., prepare=True)``, without
    psycopg's Python layers around it (its query conversion, adaptation and prepared-statement
    bookkeeping: ~40 µs of a ~100 µs client-side execute; bench/README.md). Returns the rows
    inserted. A text value holding NUL (refused by the limits before it gets here) goes through
    the cursor, which refuses it rather than letting libpq cut it short."""
    values = _libpq_values(params)
    if values is None:
        return int(cur.execute(_INSERT_ONE, params, prepare=True).rowcount)
    res = _run_prepared(conn, _INSERT_ONE_NAME, _INSERT_ONE_LIBPQ, values, _INSERT_ONE_FORMATS)
    return int(res.command_tuples or 0)


_TUPLES_OK = psycopg.pq.ExecStatus.TUPLES_OK
_IDLE = psycopg.pq.TransactionStatus.IDLE


def _append_call(conn: Any, values: Sequence[bytes | None], flush_too: bool) -> tuple[Any, Any]:
    """Run the shared append (:data:`_AT_LEAF_CALL`) and, with ``flush_too``, the flush
    barrier after it as a transaction of its own, in one pipeline (one round trip). Returns
    the call's result and the barrier's (None without it; an error result when it failed: the
    caller runs it again). Statements a connection does not know are prepared and the call
    run again (it wrote nothing then: it failed before it started)."""
    if not flush_too:
        res = _run_prepared(
            conn, _AT_LEAF_NAME, _AT_LEAF_CALL, values, _AT_LEAF_FORMATS, 1, _TUPLES_OK
        )
        return res, None
    steps = [(_AT_LEAF_NAME, values, _AT_LEAF_FORMATS, 1), (_FLUSHED_NAME, [], [], 0)]
    res, flushed = _pipelined(conn, steps)
    pg = conn.pgconn
    if res.status != _TUPLES_OK and res.error_field(_SQLSTATE) == b"26000":
        for name, query in ((_AT_LEAF_NAME, _AT_LEAF_CALL), (_FLUSHED_NAME, _FLUSHED)):
            _prepare(pg, name, query)
        res, flushed = _pipelined(conn, steps)
    if res.status != _TUPLES_OK:
        raise _libpq_error(res, pg)
    return res, flushed


def _pipelined(
    conn: Any, steps: Sequence[tuple[bytes, Sequence[bytes | None], Sequence[int], int]]
) -> list[Any]:
    """Prepared statements sent in one libpq pipeline, each its own transaction (a Sync after
    each), their results read back: one round trip. The waits for the server are select()
    calls (the GIL released). The last result of each statement is returned (an error result
    included); a connection left in an unknown state is closed."""
    pg = conn.pgconn
    fd = pg.socket
    out: list[Any] = []
    ok = False
    pg.enter_pipeline_mode()
    try:
        for name, values, formats, result_format in steps:
            pg.send_query_prepared(name, values, formats, result_format)
            pg.pipeline_sync()
        while pg.flush():
            select.select([fd], [fd], [])
        for _step in steps:
            last = None
            while (r := _next_result(pg, fd)) is not None:
                last = r
            sync = _next_result(pg, fd)
            if sync is None or sync.status != psycopg.pq.ExecStatus.PIPELINE_SYNC:
                raise psycopg.OperationalError("the server's replies were out of order")
            out.append(last)
        ok = True
    finally:
        if ok:
            pg.exit_pipeline_mode()
        else:
            conn.close()
    return out


def _next_result(pg: Any, fd: int) -> Any:
    """The next result of a pipeline, waiting for the server with the GIL released."""
    while pg.is_busy():
        select.select([fd], [], [])
        pg.consume_input()
    return pg.get_result()


def _libpq_values(params: Sequence[Any]) -> list[bytes | None] | None:
    """Parameters as libpq takes them (text, bytes as they are); None when a text value holds
    NUL, which libpq would cut short."""
    values: list[bytes | None] = []
    add = values.append
    for v in params:
        cls = v.__class__
        if cls is str:
            b = v.encode()
            if b"\x00" in b:
                return None
            add(b)
        elif v is None or cls is bytes:
            add(v)
        elif cls is int:
            add(b"%d" % v)
        elif cls is bytearray or cls is memoryview:
            add(bytes(v))
        else:
            b = str(v).encode()
            if b"\x00" in b:
                return None
            add(b)
    return values


def _run_prepared(
    conn: Any,
    name: bytes,
    query: bytes,
    values: Sequence[bytes | None],
    formats: Sequence[int],
    result_format: int = 0,
    status: Any = psycopg.pq.ExecStatus.COMMAND_OK,
) -> Any:
    """PQexecPrepared of the statement ``name`` on the connection's ``pgconn`` (libpq waits
    with the GIL released), prepared from ``query`` the first time a connection is asked for
    it (the server says it does not know it: SQLSTATE 26000). Returns the result; an error is
    raised as psycopg's exception for its SQLSTATE."""
    pg = conn.pgconn
    res = pg.exec_prepared(name, values, formats, result_format)
    if res.status != status and res.error_field(_SQLSTATE) == b"26000":
        _prepare(pg, name, query)
        res = pg.exec_prepared(name, values, formats, result_format)
    if res.status != status:
        raise _libpq_error(res, pg)
    return res


_SQLSTATE = psycopg.pq.DiagnosticField.SQLSTATE


def _prepare(pg: Any, name: bytes, query: bytes) -> None:
    """Prepare ``query`` as ``name`` on the libpq connection ``pg`` (one it already holds
    stays as it is)."""
    prepared = pg.prepare(name, query)
    if prepared.status != psycopg.pq.ExecStatus.COMMAND_OK and (
        prepared.error_field(_SQLSTATE) != b"42P05"  # already prepared
    ):
        raise _libpq_error(prepared, pg)


def _libpq_error(res: Any, pg: Any) -> psycopg.Error:
    """psycopg's exception for a failed libpq result (its class by SQLSTATE)."""
    primary = res.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY)
    message = (primary or res.error_message or pg.error_message or b"").decode(errors="replace")
    state = res.error_field(_SQLSTATE)
    try:
        cls = psycopg.errors.lookup(state.decode()) if state else psycopg.OperationalError
    except KeyError:
        cls = psycopg.DatabaseError
    return cls(message.strip() or "the server did not answer")


class _Tail:
    """What records not folded into the session row yet add to its list columns, merged as
    the fold statements merge them (so the listing's sum equals what a fold would store)."""

    __slots__ = ("first_message", "message_count", "modified", "name")

    def __init__(self) -> None:
        self.modified = ""
        self.message_count = 0
        self.name: str | None = None
        self.first_message: str | None = None

    def add(self, d: SessionSummary | _Tail) -> None:
        """Take in the summary of the records that follow."""
        self.modified = max(self.modified, d.modified)
        self.message_count += d.message_count
        if d.name is not None:
            self.name = d.name
        if self.first_message is None:
            self.first_message = d.first_message

    def columns(self) -> tuple[str, int, str | None, str | None]:
        """modified, message_count, name, first_message: the fold's list columns."""
        return (self.modified, self.message_count, self.name, self.first_message)

    def plus(self, d: SessionSummary) -> _Tail:
        out = _Tail()
        out.add(self)
        out.add(d)
        return out


def _own_tail(records: Sequence[AnyRecord]) -> _Tail:
    """The fold of records a shared writer appended alone, one after another."""
    return _Tail().plus(summarize_records(_NO_HEADER, records))


def _summary(lines: Sequence[bytes]) -> SessionSummary:
    """The list columns' share of stored record lines (as an append computes it)."""
    buf = b"".join(line + b"\n" for line in lines)
    slots, _ = parse_lines(buf, 0, len(buf), LoadReport(), 0, {})
    return summarize_records(_NO_HEADER, slots)


def _with_tail(row: Sequence[Any]) -> SessionSummary:
    """A list row of :data:`PostgresStore._LIST` with its open tail (its raw lines, the last
    column; NULL when the session has none) added to the folded columns."""
    s = summary_row(row)
    if row[7]:
        t = _Tail()
        t.add(s)
        t.add(_summary([bytes(raw) for raw in row[7]]))
        s.modified, s.message_count = max(s.modified, t.modified), t.message_count
        s.name, s.first_message = t.name, t.first_message
    return s


def _parse(rows: list[Any], report: LoadReport, sizes: dict[str, int], first: int) -> list[Slot]:
    buf = b"".join(bytes(r[1]) + b"\n" for r in rows)
    slots, _ = parse_lines(buf, 0, len(buf), report, first, sizes)
    return slots


def _row(line: bytes) -> tuple[Any, ...]:
    """Indexed columns of one record: id, parent_id, type, timestamp, role, body ('' when the
    server reads it from the JSON: :func:`_texts_of`), etext (:func:`stored_etext`)."""
    return _decoded(line)[0]


def _decoded(line: bytes) -> tuple[tuple[Any, ...], Any]:
    """The indexed columns of one record and the record (None when unreadable), decoding the
    line once."""
    eid, parent, kind, stamp = envelope(line)
    role = body = etext = None
    try:
        rec: Any = decode_record(line)
    except Exception:  # stored as it is; an unreadable message is simply not searchable
        rec = None
    msg = getattr(rec, "message", None) if kind == "message" else None
    if msg is not None:
        role = msg.role
        body = message_text(msg) or None
        if body is not None:
            etext = stored_etext(body, embed_text(msg))
            if body == _texts_of(line):
                body = ""  # tl_body(raw, '') reads it from the JSON
    return (eid, parent, kind, stamp, role, body, etext), rec


def _encoded(line: bytes, rec: AnyRecord) -> tuple[tuple[Any, ...], Any]:
    """What :func:`_decoded` returns for ``line`` when it is ``encode(rec)`` (the session's own
    appends), without decoding the line again or reading it as JSON (a third of an append's
    client CPU): msgspec wrote it from ``rec``, so it holds no field ``rec`` lacks, no NaN
    (written as null), no float beyond 1e308, and the session checked its nesting. What is left
    is checked on the bytes: a ``\\u`` escape (which jsonb may refuse) keeps ``body`` stored,
    and a run of over 100 digits (an integer :func:`_plain_number` would not vouch for) takes
    the line through :func:`_decoded`."""
    if _LONG_DIGITS.search(line) is not None:
        return _decoded(line)
    eid, parent, kind, stamp = envelope(line)
    role = body = etext = None
    msg = rec.message if kind == "message" and isinstance(rec, MessageEntry) else None
    if msg is not None:
        role = msg.role
        body = message_text(msg) or None
        if body is not None:
            etext = stored_etext(body, embed_text(msg))
            if b"\\u" not in line and body == _texts(msg):
                body = ""  # tl_body(raw, '') reads it from the JSON
    return (eid, parent, kind, stamp, role, body, etext), rec


_LONG_DIGITS = re.compile(rb"[0-9]{101}")


def _texts(msg: Message) -> str | None:
    """:func:`_texts_of` of a line msgspec encoded from a message: its text blocks' non-empty
    contents (no other block has a ``text`` field)."""
    parts = [b.text.content for b in msg.content if isinstance(b, TextBlock) and b.text.content]
    return "\n".join(parts)[:BODY_LIMIT] if parts else None


def _texts_of(line: bytes) -> str | None:
    """What ``tl_body(raw, '')`` (schema version 4) returns for the record ``line``: the
    non-empty ``text.content`` strings of the elements of ``message.content``, joined by
    newlines, cut at BODY_LIMIT characters; None where the server's reading could differ or
    fail (any ``\\u`` escape: jsonb refuses ``\\u0000`` and lone surrogates; a number jsonb may
    not read; a content that is not a string). The index reads the text of a row whose body is
    '' from its JSON, so that JSON must be one jsonb reads: the store never writes another."""
    if b"\\u" in line:
        return None
    try:  # what Python reads and jsonb may not (NaN, 1e999999, deep nesting) reads as None
        content = json.loads(
            line, parse_constant=_refuse, parse_float=_plain_number, parse_int=_plain_number
        )["message"]["content"]
    except Exception:
        return None
    if not isinstance(content, list):
        return None
    parts = []
    for block in content:
        inner = block.get("text") if isinstance(block, dict) else None
        if not isinstance(inner, dict) or inner.get("content") is None:
            continue
        if not isinstance(inner["content"], str):
            return None
        if inner["content"]:
            parts.append(inner["content"])
    return "\n".join(parts)[:BODY_LIMIT] if parts else None


def _refuse(name: str) -> Any:
    raise ValueError(name)


def _plain_number(literal: str) -> Any:
    """None for a JSON number jsonb reads for sure (up to 100 characters, an exponent within
    ±1000: numeric overflows far beyond); ValueError for any other."""
    exponent = literal.lower().partition("e")[2]
    if len(literal) > 100 or (exponent and abs(int(exponent)) > 1000):
        raise ValueError(literal)
    return None  # only the strings matter here


# the characters str.strip() removes (str.isspace(); U+3000 is the last of them), for the
# catalog's btrim of a body; NUL, which PostgreSQL's text cannot hold, is not among them. Written
# out, not computed at import (a test compares it with every code point's str.isspace())
STRIPPED = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def stored_etext(body: str, etext: str | None) -> str | None:
    """The ``etext`` column of a message whose searchable text is ``body`` (schema version 4):
    NULL when the text to embed is ``body`` stripped of surrounding whitespace, cut at
    EMBED_LIMIT characters (a message of text blocks only, with or without a trailing newline:
    the catalog reads ``left(btrim(body, STRIPPED), EMBED_LIMIT)``), '' when there is nothing
    to embed, the text itself otherwise. Rows written before stored NULL only where the text
    was ``body``'s start exactly, which that reading gives back for them (but where only
    whitespace follows the cut in a body longer than the text blocks: that whitespace is then
    left out)."""
    if etext is None:
        return ""
    return None if etext == body.strip()[:EMBED_LIMIT] else etext


def _insert_records(
    conn: Any,
    tenant: str,
    session_id: str,
    first_seq: int,
    rows: list[tuple[Any, ...]],
    lines: Sequence[bytes],
) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tl_records (tenant_id, session_id, seq, id, parent_id, type, timestamp, "
            "role, body, etext, raw) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (tenant, session_id, first_seq + i, *r, line)
                for i, (r, line) in enumerate(zip(rows, lines, strict=True))
            ],
        )


class PostgresStore(BaseStore):
    """Sessions of one tenant in PostgreSQL (``postgresql://…``, ``tenant=``)."""

    pool: ConnectionPool[Any]

    def __init__(
        self,
        url: str,
        *,
        tenant: str | None = None,
        schema: str = "public",
        app_role: str = APP_ROLE,
        min_size: int = 1,
        max_size: int = 16,
        durability: str = "fsync",
        pool: PostgresStore | None = None,
        max_writers: int = 64,
        lock_timeout: float = 0.0,
        writer_wait: float = 10.0,
        isolation: str = "setting",
    ) -> None:
        """``pool``: share the connection pool of another store of the same database and schema
        (a server serving many tenants keeps one pool; the tenant is set per transaction).

        ``max_writers``: how many sessions of this store may hold the writer lock at once (each
        holds a connection of the store's writer pool); the next writer waits up to
        ``writer_wait`` seconds for one to close, then gets a StoreError. ``lock_timeout``:
        seconds a writer waits in the server's lock queue for a session another writer holds
        before SessionLockedError (0: fail at once).

        ``isolation``: ``"setting"`` (trusted application code: the store works as
        ``app_role`` and names the tenant per transaction) or ``"role"`` (the URL logs in as
        a tenant's own role, made by :func:`create_tenant_role`; the role alone decides which
        rows it reaches, so raw SQL on that connection cannot switch tenants)."""
        if isolation not in ("setting", "role"):
            raise UserError(f"Unknown isolation {isolation!r}; use 'setting' or 'role'")
        self.isolation = isolation
        if tenant is None and isolation == "setting":
            tenant = "default"
        if tenant is not None and (
            not isinstance(tenant, str) or not tenant or len(tenant) > 128 or "\x00" in tenant
        ):
            raise UserError(f"Invalid tenant {tenant!r}: use 1-128 characters")
        if durability not in ("fsync", "flush", "group"):
            raise UserError(f"Unknown durability {durability!r}; use 'fsync', 'group' or 'flush'")
        if max_writers < 1:
            raise UserError(f"max_writers must be at least 1, not {max_writers}")
        if lock_timeout < 0 or writer_wait < 0:
            raise UserError("lock_timeout and writer_wait are seconds and cannot be negative")
        self.url = url
        self.tenant = tenant or ""
        self.schema = _schema(schema)
        self.app_role = app_role
        self.durability = durability
        self.lock_timeout = lock_timeout
        # lock_timeout as the server takes it, at least a short grace: a writer that just died
        # still holds its lock until its backend notices the closed socket, which under load
        # takes a moment
        self.lock_wait = f"{max(round(lock_timeout * 1000), _GRACE_MS)}ms"
        self.max_writers = max_writers
        # synchronous_commit is set in every transaction (set_config(..., true)), so stores of
        # different durability can share one pool, and on a writer's own connection while it
        # holds the writer lock: "flush" turns it off for bulk imports
        self.sync_commit = "off" if durability == "flush" else "on"
        self._owns_pool = pool is None
        self._writer_pool: ConnectionPool[Any] | None = None  # opened by the first writer
        self._writer_lock = threading.Lock()
        self._writer_wait = writer_wait
        self._writers_out = 0  # writer connections handed out and not given back
        # the writer connection given back last, kept out of the pool for the next writer when
        # no one waits on the pool (a shared session takes and gives back one per append: the
        # pool's get and put cost more client CPU than the append's own steps)
        self._idle_writer: Any = None
        self._pool_waiters = 0  # writers waiting on the writer pool
        if pool is not None:
            if pool.schema != self.schema or pool.url != url:
                raise UserError("A shared pool must come from a store of the same URL and schema")
            self.pool = pool.pool
            return
        # one direct attempt first: an unreachable server fails here within CONNECT_TIMEOUT
        # with one line, instead of a pool retrying in the background and logging warnings
        try:
            probe = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise StoreError(
                f"Cannot connect to PostgreSQL at {where(url)} ({reason(exc)}); "
                "check the URL and that the server runs"
            ) from None
        try:
            self._configure(probe)  # a role the store refuses is named here, not by the pool
        except psycopg.Error as exc:
            raise StoreError(
                f"Cannot use PostgreSQL at {where(url)} ({reason(exc)}); check "
                "the schema and the role's privileges"
            ) from None
        finally:
            probe.close()
        try:
            self.pool = ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"connect_timeout": CONNECT_TIMEOUT},
                configure=self._configure,
                open=True,
                timeout=30,
            )
            self.pool.wait(timeout=CONNECT_TIMEOUT * 2)
        except Exception as exc:
            with contextlib.suppress(Exception):
                self.pool.close()
            raise StoreError(
                f"Cannot connect to PostgreSQL at {where(url)} ({reason(exc)}); "
                "check the URL and that the server runs"
            ) from None
        if isolation == "role":
            self._role_tenant(tenant)
        with self.tx() as conn:
            row = conn.execute("SELECT to_regclass('tl_schema_migrations') IS NOT NULL").fetchone()
            version = (
                conn.execute("SELECT max(version) FROM tl_schema_migrations").fetchone()[0]
                if row[0]
                else 0
            )
        if (version or 0) < migrations.latest("postgres"):
            self.pool.close()
            raise StoreError(
                f"The database schema is at version {version or 0}, threadline "
                f"needs {migrations.latest('postgres')}; run: threadline db upgrade "
                "URL"
            )

    def _role_tenant(self, wanted: str | None) -> None:
        """Role isolation: the tenant is the one the login role was made for."""
        with self.pool.connection() as conn:
            row = conn.execute("SELECT tl_role_tenant(current_user)").fetchone()
        found = row[0] if row else None
        if found is None:
            self.pool.close()
            raise StoreError(
                "This login role is not a tenant role of the schema; create it "
                "with: threadline db tenant-role URL TENANT ROLE"
            )
        if wanted is not None and wanted != found:
            self.pool.close()
            raise UserError(f"This login role belongs to tenant {found!r}, not {wanted!r}")
        self.tenant = found

    def _configure(self, conn: Any) -> None:
        conn.autocommit = True
        conn.prepare_threshold = 0  # the hot statements are few: prepare them on first use
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        if self.isolation == "role":
            row = conn.execute(
                "SELECT r.rolsuper OR r.rolbypassrls OR pg_has_role(current_user, %s, 'MEMBER'),"
                " pg_has_role(current_user, %s, 'MEMBER') FROM pg_roles r WHERE r.rolname = "
                "current_user",
                (self.app_role, TENANT_GROUP),
            ).fetchone()
            if row is None or row[0] or not row[1]:
                raise StoreError(
                    "Role isolation needs a login role made by 'threadline db "
                    f"tenant-role' (a member of {TENANT_GROUP}, not of "
                    f"{self.app_role}, neither superuser nor BYPASSRLS)"
                )
            return  # synchronous_commit is set by every transaction (see __init__)
        user = conn.execute("SELECT current_user").fetchone()[0]
        if user != self.app_role:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self.app_role)))
        row = conn.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if row is None or row[0]:
            raise StoreError(
                f"The role {self.app_role} bypasses row-level security; threadline "
                "refuses to run as it"
            )

    def connect(self) -> Any:
        """A new connection of its own (not from the pool), configured like the pool's."""
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                application_name=f"threadline:{os.getpid()}",
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"Cannot connect to PostgreSQL at {where(self.url)} "
                f"({reason(exc)}); check that the server runs, then retry"
            ) from None
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def writer_connection(self) -> Any:
        """A connection of the writer pool for one writer (capped at ``max_writers``): the one
        given back last when it is kept (:meth:`writer_done`), else one from the pool."""
        with self._writer_lock:
            conn = self._idle_writer
            if conn is not None:
                self._idle_writer = None
                self._writers_out += 1
                return conn
            self._pool_waiters += 1
            wp = self._writer_pool
            if wp is None:
                wp = self._writer_pool = ConnectionPool(
                    self.url,
                    min_size=0,
                    max_size=self.max_writers,
                    configure=self._configure,
                    open=True,
                    timeout=self._writer_wait,
                    name=f"threadline-writers-{self.tenant}",
                    kwargs={
                        "application_name": f"threadline:{os.getpid()}",
                        "connect_timeout": CONNECT_TIMEOUT,
                    },
                )
        try:
            conn = wp.getconn(timeout=self._writer_wait)
        except PoolTimeout:
            with self._writer_lock:
                full = self._writers_out >= self.max_writers
            if not full:  # a free slot, yet no connection: the server refused or is gone
                raise StoreError(
                    f"Cannot open a writer connection to PostgreSQL at {where(self.url)} within "
                    f"{self._writer_wait:g} s; check that the server runs and accepts more "
                    "connections (max_connections), then retry"
                ) from None
            raise StoreError(
                f"Tenant '{self.tenant}' already has {self.max_writers} sessions open for "
                f"writing (max_writers) and none closed within {self._writer_wait:g} s; close "
                "sessions you no longer write to, or open the store with a larger max_writers"
            ) from None
        finally:
            with self._writer_lock:
                self._pool_waiters -= 1
        with self._writer_lock:
            self._writers_out += 1
        return conn

    def writer_done(self, conn: Any) -> None:
        """Give a writer connection back: kept for the next writer when none is kept yet and
        no writer waits on the pool (both decided under the lock that writer_connection takes,
        so a waiting writer always gets it through the pool), idle and open; else to the
        writer pool (a closed one is discarded)."""
        with self._writer_lock:
            self._writers_out -= 1
            if (
                self._idle_writer is None
                and self._pool_waiters == 0
                and self._writer_pool is not None
                and not conn.closed
                and conn.info.transaction_status == _IDLE
            ):
                self._idle_writer = conn
                return
        if self._writer_pool is not None:
            self._writer_pool.putconn(conn)
        else:  # pragma: no cover - the store was closed under an open writer
            conn.close()

    def set_tenant(self, conn: Any) -> None:
        """Scope the current transaction to this store's tenant and durability."""
        conn.execute(
            "SELECT set_config('threadline.tenant', %s, true), "
            "set_config('synchronous_commit', %s, true)",
            (self.tenant, self.sync_commit),
            prepare=True,
        )

    @contextlib.contextmanager
    def tx(self) -> Iterator[Any]:
        """A pooled connection inside a transaction scoped to this store's tenant. A lost
        connection or an unreachable server becomes a StoreError that says what to do."""
        try:
            with self.pool.connection() as conn, conn.transaction():
                self.set_tenant(conn)
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            raise StoreError(
                f"PostgreSQL at {where(self.url)} failed ({reason(exc)}); check "
                "that the server runs and is reachable, then retry"
            ) from None

    def exists(self, session_id: str) -> bool:
        check_session_id(session_id)
        with self.tx() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM tl_sessions WHERE tenant_id = %s AND session_id = %s",
                    (self.tenant, session_id),
                ).fetchone()
                is not None
            )

    def open_log(self, session_id: str) -> PostgresLog:
        return PostgresLog(self, check_session_id(session_id))

    def create_log(self, header: SessionHeader, lines: Iterable[bytes]) -> PostgresLog:
        """One transaction; ``lines`` is consumed in chunks (never held whole), each chunk
        inserted and added to the list columns as an append would."""
        try:
            with self.tx() as conn:
                conn.execute(
                    "INSERT INTO tl_sessions (tenant_id, session_id, header, created, modified, "
                    "name, message_count, first_message, parent_session, next_seq) VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        self.tenant,
                        header.id,
                        encode(header),
                        header.timestamp,
                        header.timestamp,
                        None,
                        0,
                        None,
                        header.parent_session,
                        1,
                    ),
                )
                seq = 1
                for chunk in chunked(lines, CREATE_CHUNK):
                    _insert_records(
                        conn, self.tenant, header.id, seq, [_row(line) for line in chunk], chunk
                    )
                    seq += len(chunk)
                    d = Delta(header, chunk)
                    conn.execute(
                        "UPDATE tl_sessions SET next_seq = %s, modified = greatest(modified, %s), "
                        "message_count = message_count + %s, name = coalesce(%s, name), "
                        "first_message = coalesce(first_message, %s) "
                        "WHERE tenant_id = %s AND session_id = %s",
                        (
                            seq,
                            d.modified,
                            d.message_count,
                            d.name,
                            d.first_message,
                            self.tenant,
                            header.id,
                        ),
                    )
        except psycopg.errors.UniqueViolation:
            raise UserError(f"Session '{header.id}' already exists; choose another id") from None
        return self.open_log(header.id)

    def session_ids(self) -> list[str]:
        with self.tx() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT session_id FROM tl_sessions WHERE tenant_id = %s", (self.tenant,)
                )
            ]

    def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self.tx() as conn:
            cur = conn.execute(
                "DELETE FROM tl_sessions WHERE tenant_id = %s AND session_id = %s",
                (self.tenant, session_id),
            )
            if cur.rowcount == 0:
                raise not_found(session_id)

    # the list columns and, of a session whose writer leaves records unfolded (open_tail),
    # those records' lines, read in the same statement (one snapshot: a fold between two
    # statements would count its records twice or not at all)
    _LIST = (
        "SELECT session_id, name, created, modified, message_count, first_message, "
        "parent_session, CASE WHEN open_tail THEN ARRAY(SELECT raw FROM tl_records r WHERE "
        "r.tenant_id = s.tenant_id AND r.session_id = s.session_id AND r.seq >= s.next_seq "
        "ORDER BY r.seq) END FROM tl_sessions s WHERE tenant_id = %s"
    )

    def list(self) -> SessionListing:
        """Every session of the tenant, most recently modified first (the list columns, plus
        the records of an open writer not folded into them yet)."""
        with self.tx() as conn:
            rows = conn.execute(self._LIST + " ORDER BY modified DESC", (self.tenant,)).fetchall()
        found = [_with_tail(r) for r in rows]
        if any(r[7] for r in rows):  # an open tail may have moved a session up
            found.sort(key=lambda s: s.modified, reverse=True)
        return SessionListing(self._located(found))

    def summary(self, session_id: str) -> SessionSummary:
        with self.tx() as conn:
            r = conn.execute(
                self._LIST + " AND session_id = %s", (self.tenant, session_id)
            ).fetchone()
        if r is None:
            raise not_found(session_id)
        return _with_tail(r)

    def catalog_location(self) -> CatalogLocation:
        return CatalogLocation(kind="postgres")

    def scrub(self) -> builtins.list[str]:
        """After a purge: rewrite the table files so the purged text leaves them (see
        :func:`scrub`); returns what may still hold it."""
        return scrub(self.url, self.schema)

    def close(self) -> None:
        super().close()
        with self._writer_lock:
            kept, self._idle_writer = self._idle_writer, None
        if self._writer_pool is not None:
            if kept is not None:
                self._writer_pool.putconn(kept)
            self._writer_pool.close()
            self._writer_pool = None
        if self._owns_pool:
            self.pool.close()
