"""PostgreSQL multi-tenancy: row-level security keeps tenants apart on every table, for every
statement kind, through pooled connections; the audit catches a planted policy mistake."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import threadline as tl
from conftest import PG_URL, pg_schema
from threadline.embedding import HashingEmbedder
from threadline.errors import UserError
from threadline.store.postgres import APP_ROLE, TABLES, PostgresStore, audit_rls


class World:
    """Two tenants, each with one session that has rows in every table."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.sessions: dict[str, str] = {}
        for tenant in ("alpha", "beta"):
            st = tl.open_store(PG_URL, tenant=tenant, schema=schema, max_size=2)
            with st.create() as s:
                s.append_message("user", f"secret plans of {tenant}")
                s.append_message("assistant", f"noted for {tenant}")
                s.append_session_info(f"{tenant} session")
            self.sessions[tenant] = s.id
            st.catalog.embedder = HashingEmbedder()
            st.catalog.search("plans", mode="semantic")  # fills tl_vectors
            st.catalog.add_tags(s.id, ["project"])
            st.catalog.delete_tag("project")  # a preview: leaves a row in tl_tag_tokens
            st.close()

    def app_conn(self) -> Any:
        """A connection working as the application role (like the store's own)."""
        conn = psycopg.connect(PG_URL)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(APP_ROLE)))
        conn.commit()
        return conn

    def insert_row(self, table: str, tenant: str) -> tuple[str, list[Any]]:
        sid = self.sessions[tenant]
        return {
            "tl_sessions": (
                "INSERT INTO tl_sessions (tenant_id, session_id, header, created, "
                "modified) VALUES (%s, %s, %s, '', '')",
                [tenant, "new-one", b"{}"],
            ),
            "tl_records": (
                "INSERT INTO tl_records (tenant_id, session_id, seq, type, raw) "
                "VALUES (%s, %s, 99, 'custom', %s)",
                [tenant, sid, b"{}"],
            ),
            # seq 3 is the session_info record: it has no vector yet
            "tl_vectors": (
                "INSERT INTO tl_vectors (tenant_id, session_id, seq, model, vec) "
                "VALUES (%s, %s, 3, 'm', %s)",
                [tenant, sid, b"\0\0\0\0"],
            ),
            "tl_session_tags": (
                "INSERT INTO tl_session_tags VALUES (%s, %s, 'new-tag')",
                [tenant, sid],
            ),
            "tl_tag_tokens": (
                "INSERT INTO tl_tag_tokens VALUES (%s, 'tok', 'delete_tag', '{}', '[]', '')",
                [tenant],
            ),
        }[table]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    yield World(pg_schema())


@pytest.fixture
def app(world: World) -> Iterator[Any]:
    conn = world.app_conn()
    yield conn
    conn.close()


def as_tenant(conn: Any, tenant: str) -> None:
    conn.execute("SELECT set_config('threadline.tenant', %s, true)", (tenant,))


@pytest.mark.parametrize("table", TABLES)
def test_every_table_has_rows_of_both_tenants_seen_by_the_owner(world: World, table: str) -> None:
    with psycopg.connect(PG_URL) as owner:  # the superuser owner bypasses RLS: the ground truth
        rows = owner.execute(
            sql.SQL("SELECT DISTINCT tenant_id FROM {}.{} ORDER BY 1").format(
                sql.Identifier(world.schema), sql.Identifier(table)
            )
        ).fetchall()
    assert rows == [("alpha",), ("beta",)]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("whose", ["own", "other"])
def test_select_sees_only_the_own_tenants_rows(app: Any, table: str, whose: str) -> None:
    as_tenant(app, "alpha")
    target = "alpha" if whose == "own" else "beta"
    n = app.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s").format(sql.Identifier(table)),
        (target,),
    ).fetchone()[0]
    app.rollback()
    assert (n > 0) == (whose == "own")


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("whose", ["own", "other"])
def test_insert_is_allowed_only_for_the_own_tenant(
    world: World, app: Any, table: str, whose: str
) -> None:
    as_tenant(app, "alpha")
    stmt, params = world.insert_row(table, "alpha" if whose == "own" else "beta")
    if whose == "own":
        assert app.execute(stmt, params).rowcount == 1
    else:
        with pytest.raises(
            psycopg.errors.InsufficientPrivilege, match="violates row-level security policy"
        ):
            app.execute(stmt, params)
    app.rollback()


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("whose", ["own", "other"])
def test_update_reaches_only_the_own_tenants_rows(app: Any, table: str, whose: str) -> None:
    as_tenant(app, "alpha")
    target = "alpha" if whose == "own" else "beta"
    n = app.execute(
        sql.SQL("UPDATE {} SET tenant_id = tenant_id WHERE tenant_id = %s").format(
            sql.Identifier(table)
        ),
        (target,),
    ).rowcount
    app.rollback()
    assert (n > 0) == (whose == "own")


@pytest.mark.parametrize("table", TABLES)
def test_update_cannot_move_a_row_to_another_tenant(app: Any, table: str) -> None:
    as_tenant(app, "alpha")
    with pytest.raises(
        psycopg.errors.InsufficientPrivilege, match="new row violates row-level security policy"
    ):
        app.execute(
            sql.SQL("UPDATE {} SET tenant_id = 'beta' WHERE tenant_id = 'alpha'").format(
                sql.Identifier(table)
            )
        )
    app.rollback()


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("whose", ["own", "other"])
def test_delete_reaches_only_the_own_tenants_rows(app: Any, table: str, whose: str) -> None:
    as_tenant(app, "alpha")
    target = "alpha" if whose == "own" else "beta"
    n = app.execute(
        sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(sql.Identifier(table)), (target,)
    ).rowcount
    app.rollback()
    assert (n > 0) == (whose == "own")


@pytest.mark.parametrize("table", TABLES)
def test_without_a_tenant_setting_nothing_is_visible(app: Any, table: str) -> None:
    n = app.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()[0]
    app.rollback()
    assert n == 0


def test_the_tenant_setting_does_not_outlive_its_transaction(world: World) -> None:
    st = tl.open_store(PG_URL, tenant="alpha", schema=world.schema, min_size=1, max_size=1)
    try:
        assert [s.name for s in st.list()] == ["alpha session"]
        with st.backend.pool.connection() as conn:  # the same (only) pooled connection
            assert conn.execute("SELECT current_setting('threadline.tenant', true)").fetchone()[
                0
            ] in (None, "")
            assert conn.execute("SELECT current_user").fetchone()[0] == APP_ROLE
    finally:
        st.close()


def test_the_application_role_neither_owns_the_tables_nor_bypasses_rls(world: World) -> None:
    with psycopg.connect(PG_URL) as owner:
        role = owner.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", (APP_ROLE,)
        ).fetchone()
        owners = owner.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = %s", (world.schema,)
        ).fetchall()
    assert role == (False, False)
    assert (APP_ROLE,) not in owners


def test_audit_passes_on_the_migrated_schema(world: World) -> None:
    with psycopg.connect(PG_URL) as owner:
        assert audit_rls(owner, world.schema) == []


def test_audit_fails_when_a_table_does_not_force_rls_on_its_owner() -> None:
    schema = pg_schema()
    with psycopg.connect(PG_URL, autocommit=True) as owner:
        owner.execute(
            sql.SQL("ALTER TABLE {}.tl_session_tags NO FORCE ROW LEVEL SECURITY").format(
                sql.Identifier(schema)
            )
        )
        assert audit_rls(owner, schema) == [
            "tl_session_tags: row level security not forced (the owner bypasses it)"
        ]


def test_audit_fails_on_a_policy_without_with_check() -> None:
    schema = pg_schema()
    with psycopg.connect(PG_URL, autocommit=True) as owner:
        owner.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        owner.execute("DROP POLICY tenant_isolation ON tl_records")
        owner.execute(
            "CREATE POLICY reads ON tl_records FOR SELECT USING "
            "(tenant_id = current_setting('threadline.tenant', true))"
        )
        assert audit_rls(owner, schema) == [
            "tl_records: no FOR ALL policy with USING and WITH CHECK on threadline.tenant"
        ]


def test_a_tenant_name_that_looks_like_sql_is_just_a_name(world: World) -> None:
    evil = "x'); DROP TABLE tl_sessions; --"
    st = tl.open_store(PG_URL, tenant=evil, schema=world.schema, max_size=1)
    try:
        with st.create() as s:
            s.append_message("user", "hello from a strange tenant")
        assert [r.first_message for r in st.list()] == ["hello from a strange tenant"]
    finally:
        st.close()
    alpha = tl.open_store(PG_URL, tenant="alpha", schema=world.schema, max_size=1)
    try:
        assert [r.name for r in alpha.list()] == ["alpha session"]
    finally:
        alpha.close()


def test_manage_tags_and_search_stay_within_the_tenant(world: World) -> None:
    alpha = tl.open_store(PG_URL, tenant="alpha", schema=world.schema, max_size=2)
    beta = tl.Store(PostgresStore(PG_URL, tenant="beta", schema=world.schema, pool=alpha.backend))
    try:
        alpha.catalog.embedder = beta.catalog.embedder = None
        assert {h.session_id for h in alpha.catalog.search("secret plans")} == {
            world.sessions["alpha"]
        }
        plan = alpha.catalog.find_and_tag("secret plans", "classified")
        assert (plan.count, plan.sample) == (1, ["alpha session"])
        with pytest.raises(UserError, match="Unknown or already used token"):
            beta.catalog.find_and_tag("secret plans", "classified", dry_run=False, token=plan.token)
        done = alpha.catalog.find_and_tag(
            "secret plans", "classified", dry_run=False, token=plan.token
        )
        assert done.changed == 1
        assert beta.catalog.tags() == {"project": 1}  # its own tag, no "classified"
        assert beta.catalog.session_tags(world.sessions["alpha"]) == []
    finally:
        beta.close()
        alpha.close()


def test_random_operations_of_many_tenants_through_one_pool_never_cross() -> None:
    schema = pg_schema()
    tenants = [f"t{i}" for i in range(4)]
    first = tl.open_store(PG_URL, tenant=tenants[0], schema=schema, min_size=2, max_size=4)
    stores: dict[str, Any] = {tenants[0]: first}
    for t in tenants[1:]:
        stores[t] = tl.Store(PostgresStore(PG_URL, tenant=t, schema=schema, pool=first.backend))
    made: dict[str, set[str]] = {t: set() for t in tenants}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(25):
                t = rnd.choice(tenants)
                st = stores[t]
                op = rnd.choice(["create", "append", "list", "tag", "search"])
                with lock:
                    mine = sorted(made[t])
                if op == "create" or not mine:
                    with st.create() as s:
                        s.append_message("user", f"note of {t}")
                    with lock:
                        made[t].add(s.id)
                elif op == "append":
                    sid = rnd.choice(mine)
                    try:
                        with st.open(sid) as s:
                            s.append_message("assistant", f"reply of {t}")
                    except tl.SessionLockedError:
                        pass  # another worker writes this session right now: refused, fine
                elif op == "list":
                    seen = {r.id for r in st.list()}
                    with lock:
                        others = set().union(*(made[o] for o in tenants if o != t))
                    assert not seen & others
                elif op == "tag":
                    st.catalog.add_tags(rnd.choice(mine), [t])
                else:
                    st.catalog.embedder = None
                    hits = st.catalog.search("note reply")
                    with lock:
                        others = set().union(*(made[o] for o in tenants if o != t))
                    assert not {h.session_id for h in hits} & others
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert errors == []
        for t in tenants:
            st = stores[t]
            assert {r.id for r in st.list()} == made[t]
            assert set(st.catalog.tags()) <= {t}
            for sid in made[t]:
                texts = [e.message.text for e in st.open(sid, read_only=True).entries()]
                assert all(text.endswith(f"of {t}") for text in texts)
    finally:
        for t in reversed(tenants):
            stores[t].close()
