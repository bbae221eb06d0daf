"""PostgreSQL role isolation (issue 13 item 10): a tenant logged in as its own role reaches its
own rows only, even through raw SQL that sets threadline.tenant or switches roles; the trusted
setting mode keeps working beside it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import threadline as tl
from conftest import PG_URL, pg_schema
from threadline.errors import StoreError, UserError
from threadline.store.postgres import TABLES, audit_rls, create_tenant_role


def as_role(role: str) -> str:
    return PG_URL.replace("postgres@", f"{role}@", 1)


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    schema = pg_schema()
    tag = uuid.uuid4().hex[:8]
    roles = {"alpha": f"tl_alpha_{tag}", "beta": f"tl_beta_{tag}"}
    for tenant, role in roles.items():
        create_tenant_role(PG_URL, tenant, role, schema=schema)
    sessions = {}
    for tenant, role in roles.items():
        store = tl.open_store(as_role(role), schema=schema, isolation="role", max_size=2)
        assert store.backend.tenant == tenant  # type: ignore[attr-defined]
        with store.create() as s:
            s.append_message("user", f"secret of {tenant}")
        sessions[tenant] = s.id
        store.close()
    # a trusted application store (setting mode) writes a third tenant beside them
    app = tl.open_store(PG_URL, tenant="gamma", schema=schema, max_size=2)
    with app.create() as s:
        s.append_message("user", "secret of gamma")
    sessions["gamma"] = s.id
    app.close()
    yield {"schema": schema, "roles": roles, "sessions": sessions}
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for role in roles.values():
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def raw(world: dict[str, Any], tenant: str) -> Any:
    conn = psycopg.connect(as_role(world["roles"][tenant]), autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(world["schema"])))
    return conn


def test_a_tenant_role_store_sees_only_its_tenant(world: dict[str, Any]) -> None:
    store = tl.open_store(
        as_role(world["roles"]["alpha"]), schema=world["schema"], isolation="role", max_size=1
    )
    try:
        assert [r.id for r in store.list()] == [world["sessions"]["alpha"]]
        assert not store.exists(world["sessions"]["beta"])
    finally:
        store.close()


@pytest.mark.parametrize("table", TABLES)
def test_raw_sql_that_sets_another_tenant_still_sees_only_its_own_rows(
    world: dict[str, Any], table: str
) -> None:
    with raw(world, "alpha") as conn:
        for setting in ("beta", "gamma"):
            conn.execute("SELECT set_config('threadline.tenant', %s, false)", (setting,))
            tenants = {
                r[0]
                for r in conn.execute(
                    sql.SQL("SELECT DISTINCT tenant_id FROM {}").format(sql.Identifier(table))
                )
            }
            assert tenants <= {"alpha"}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO tl_session_tags VALUES ('beta', %s, 'planted')",
                (world["sessions"]["beta"],),
            )


def test_raw_sql_cannot_switch_to_the_application_role_or_another_tenant(
    world: dict[str, Any],
) -> None:
    with raw(world, "alpha") as conn:
        for target in ("threadline_app", world["roles"]["beta"]):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(target)))
        conn.execute("SET ROLE threadline_tenant")  # its own group: sees nothing at all
        assert conn.execute("SELECT count(*) FROM tl_sessions").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM tl_tenant_roles")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE tl_tenant_roles SET tenant_id = 'beta'")


def test_the_trusted_setting_mode_still_isolates_by_setting(world: dict[str, Any]) -> None:
    app = tl.open_store(PG_URL, tenant="gamma", schema=world["schema"], max_size=1)
    try:
        assert [r.id for r in app.list()] == [world["sessions"]["gamma"]]
    finally:
        app.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        assert audit_rls(conn, world["schema"]) == []


def test_role_mode_refuses_roles_that_are_not_tenant_roles(world: dict[str, Any]) -> None:
    with pytest.raises(StoreError, match="Role isolation needs a login role made by"):
        tl.open_store(PG_URL, schema=world["schema"], isolation="role", max_size=1)
    with pytest.raises(UserError, match="belongs to tenant 'alpha', not 'beta'"):
        tl.open_store(
            as_role(world["roles"]["alpha"]),
            schema=world["schema"],
            isolation="role",
            tenant="beta",
            max_size=1,
        )
