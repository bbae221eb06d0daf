"""Run an agent framework's own session contract tests against threadline's adapter.

    python scripts/framework_contracts.py adk SUITE_FILE --store jsonl|sqlite|postgres
    python scripts/framework_contracts.py strands SUITE_FILE --store …
    python scripts/framework_contracts.py openai-agents SUITE_FILE --store …
    python scripts/framework_contracts.py adk|strands|openai-agents SUITE_FILE --reference

SUITE_FILE is the framework's test module, taken unmodified from a checkout of its repository:

- adk: ``tests/unittests/sessions/test_session_service.py`` (google/adk-python). Every session
  service that module makes (its ``get_session_service`` factory, behind the ``session_service``
  fixture) is a ``ThreadlineSessionService`` over a fresh store of the chosen backend. Tests
  that construct ADK's own services by class still test those.
- strands: ``tests/strands/session/test_repository_session_manager.py`` (strands-agents/
  sdk-python). The repository class it imports (``MockedSessionRepository``, behind its
  ``mock_repository`` fixture) becomes a ``ThreadlineSessionRepository`` over a fresh store per
  instance. The module imports ``tests.fixtures``: give the path inside a checkout (the script
  puts the checkout's root on ``sys.path``).

- openai-agents: ``tests/memory/test_session.py`` and ``test_session_limit.py``
  (openai/openai-agents-python). They construct ``SQLiteSession(session_id, db_path, …)``
  themselves; that name in the module becomes a ``ThreadlineSession`` on one fresh store per
  database path. Tests of SQLiteSession's own internals (its connections, locks, raw rows) then
  fail by construction.

``--reference`` leaves the suite alone: it runs on the framework's own backends, so a failure
both runs share is the suite's against the installed framework, not the adapter's.

Nothing of the framework's code is copied here: the suite is read from the checkout given, and
this script only swaps the backend. Extra arguments after ``--`` go to pytest. Exit status is
pytest's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

PG_URL = os.environ.get("THREADLINE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


class Stores:
    """Fresh stores of one backend; PostgreSQL schemas are dropped at the end."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dir = Path(tempfile.mkdtemp(prefix="tl-contracts-"))
        self.schemas: list[str] = []
        self.opened: list[Any] = []

    def new(self) -> Any:
        import threadline as tl

        name = uuid.uuid4().hex[:12]
        if self.kind == "jsonl":
            store = tl.open_store(self.dir / name)
        elif self.kind == "sqlite":
            store = tl.open_store(f"sqlite:///{self.dir}/{name}.db")
        elif self.kind == "postgres":
            from threadline.store.postgres import upgrade

            schema = f"c_{name}"
            upgrade(PG_URL, schema)
            self.schemas.append(schema)
            # a tenant per store too: the advisory writer locks are keyed by tenant and session id
            store = tl.open_store(PG_URL, tenant=f"contracts-{name}", schema=schema, max_size=2)
        else:
            raise SystemExit(f"unknown store {self.kind!r}: use jsonl, sqlite or postgres")
        self.opened.append(store)
        return store

    def close_open(self) -> None:
        """Close the stores a test opened (the suites close only their own services), so a
        run holds PostgreSQL connections for one test at a time."""
        for store in self.opened:
            store.close()
        self.opened.clear()

    def cleanup(self) -> None:
        self.close_open()
        if self.schemas:
            import psycopg
            from psycopg import sql

            with psycopg.connect(PG_URL, autocommit=True) as conn:
                for schema in self.schemas:
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                    )


class AdkPlugin:
    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self.stores.close_open()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from threadline.integrations.adk import ThreadlineSessionService

        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "get_session_service"):
            stores = self.stores
            module.get_session_service = (  # the suite's backend factory
                lambda *args, **kwargs: ThreadlineSessionService(stores.new())
            )


class StrandsPlugin:
    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self.stores.close_open()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from threadline.integrations.strands import ThreadlineSessionRepository

        module = getattr(item, "module", None)
        if module is None or not hasattr(module, "MockedSessionRepository"):
            return
        stores = self.stores

        class OnThreadline(ThreadlineSessionRepository):
            """The suite's repository class, on a fresh threadline store per instance."""

            def __init__(self) -> None:
                super().__init__(stores.new())

        module.MockedSessionRepository = OnThreadline


class OpenAiAgentsPlugin:
    """``SQLiteSession`` in the suite's modules becomes a ``ThreadlineSession``; sessions the
    suite opens on one database file share one fresh threadline store."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self.by_path: dict[str, Any] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self.by_path.clear()
        self.stores.close_open()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        from threadline.integrations.openai_agents import ThreadlineSession

        module = getattr(item, "module", None)
        if module is None or not hasattr(module, "SQLiteSession"):
            return
        plugin = self

        class OnThreadline(ThreadlineSession):
            """The suite's SQLiteSession, on the threadline store of its database path."""

            def __init__(
                self,
                session_id: str,
                db_path: Any = ":memory:",
                create_tables: bool = False,
                session_settings: Any = None,
                **kwargs: Any,
            ) -> None:
                key = str(db_path)
                store = plugin.by_path.get(key)
                if store is None or key == ":memory:":
                    store = plugin.by_path[key] = plugin.stores.new()
                super().__init__(session_id, store, session_settings=session_settings)

        module.SQLiteSession = OnThreadline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=["adk", "strands", "openai-agents"])
    parser.add_argument("suite", type=Path)
    parser.add_argument("--store", default="jsonl", choices=["jsonl", "sqlite", "postgres"])
    parser.add_argument(
        "--reference",
        action="store_true",
        help="run the suite unchanged, on the framework's own backends (no swap)",
    )
    args, rest = parser.parse_known_args()
    rest = [a for a in rest if a != "--"]
    suite = args.suite.resolve()
    stores = Stores(args.store)
    plugins: list[Any] = []
    if not args.reference:
        make = {"adk": AdkPlugin, "strands": StrandsPlugin, "openai-agents": OpenAiAgentsPlugin}
        plugins.append(make[args.framework](stores))
    root = suite.parent
    while root != root.parent and not (root / "tests").is_dir():
        root = root.parent
    sys.path.insert(0, str(root))
    ini = stores.dir / "pytest.ini"
    ini.write_text("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    try:
        return int(
            pytest.main(
                [
                    "-c",
                    str(ini),
                    "--rootdir",
                    str(root),
                    "-p",
                    "no:cacheprovider",
                    "-q",
                    str(suite),
                    *rest,
                ],
                plugins=plugins,
            )
        )
    finally:
        stores.cleanup()


if __name__ == "__main__":
    sys.exit(main())
