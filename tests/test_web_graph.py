"""The viewer's tree drawn as a graph, in headless Chromium: branch lanes, the active path, runs of
bookkeeping entries collapsed behind a filter, ANSI escapes stripped, on a session of 10,003
entries with a branch and a compaction; and the context's range selection cleared once a digest
is applied. The screenshot of the graph (tests/artifacts/web-graph.png) is the one kept in
docs/images/web-tree.png."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

import threadline as tl
from threadline.model.entries import (
    Compaction,
    CompactionEntry,
    Custom,
    CustomEntry,
    MessageEntry,
    new_id,
)
from web_support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, serve

BLOCKS = 2_000  # user, three progress records, assistant: 10,000 entries on the main line


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    expect.set_options(timeout=30_000)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    pg = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    pg.close()
    assert errors == []


def stamp(n: int) -> str:
    return f"2025-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"


def graph_session(store: Any) -> tuple[str, dict[str, str]]:
    """10,000 entries on the main line (every user turn followed by three Claude Code progress
    records), an abandoned two-message branch off the first answer, a compaction half way."""
    records: list[Any] = []
    ids: dict[str, str] = {}
    parent = None
    n = 0

    def add(rec: Any) -> str:
        nonlocal parent, n
        records.append(rec)
        parent = rec.id
        n += 1
        return str(rec.id)

    def message(role: str, text: str, at: int, parent_id: str | None) -> MessageEntry:
        return MessageEntry(
            id=new_id(),
            parent_id=parent_id,
            timestamp=stamp(at),
            message=tl.Message(role=role, content=[tl.text(text)]),
        )

    for block in range(BLOCKS):
        add(message("user", f"run step {block}", 10 * n + 10, parent))
        for k in range(3):
            add(
                CustomEntry(
                    id=new_id(),
                    parent_id=parent,
                    timestamp=stamp(10 * n + 10),
                    custom=Custom(custom_type="claude_code:progress", data={"k": k}),
                )
            )
        answer = add(
            message("assistant", f"\x1b[32mstep {block} passed\x1b[0m", 10 * n + 10, parent)
        )
        if block == 0:
            ids["fork"] = answer
        if block == BLOCKS // 2:
            ids["compaction"] = add(
                CompactionEntry(
                    id=new_id(),
                    parent_id=parent,
                    timestamp=stamp(10 * n + 10),
                    compaction=Compaction(
                        summary="the first half, summarized",
                        first_kept_entry_id=answer,
                        tokens_before=50_000,
                    ),
                )
            )
    ids["leaf"] = str(parent)
    # the abandoned branch: written first, so it is the first child of the fork
    first = message("user", "an abandoned question", 15, ids["fork"])
    second = message("assistant", "an abandoned answer", 16, first.id)
    ids["branch"] = first.id
    s = store.create()
    s.append_records([*records, first, second])
    s.branch(ids["leaf"])
    s.close()
    return s.id, ids


def test_the_tree_shows_branch_lanes_and_hides_bookkeeping_runs(page: Page, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "graph", durability="flush")
    sid, ids = graph_session(store)
    with serve(store) as base:
        page.goto(f"{base}#/s/{sid}")
        expect(page.get_by_test_id("ctx-total")).to_be_visible()
        # 2,000 user and 2,000 assistant rows, 2,000 progress runs, the compaction, the branch
        expect(page.get_by_test_id("tree-total")).to_have_text("6003 rows")
        expect(page.locator(f'.tree-row[data-entry="{ids["branch"]}"]')).to_be_visible()
        # the abandoned branch keeps lane 0, the active path continues in lane 1
        assert (
            page.locator(f'.tree-row[data-entry="{ids["branch"]}"]').get_attribute("data-lane")
            == "0"
        )
        fork = page.locator(f'.tree-row[data-entry="{ids["fork"]}"]')
        expect(fork.locator("svg.lanes path.fork")).to_have_count(1)
        assert page.locator('.tree-row.on-path[data-lane="1"]').count() >= 5
        assert page.locator('.tree-row[data-type="custom"]').count() == 0
        runs = page.locator(".tree-row.run-row")
        expect(runs.first).to_have_text("3 bookkeeping entries (3 custom)")
        assert "\x1b" not in page.locator(".tree-row").all_inner_texts()[1]
        expect(page.locator(f'.tree-row[data-entry="{ids["fork"]}"]')).to_contain_text(
            "step 0 passed"
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web-graph.png"))
        # the filter off: every progress record is a row of its own
        page.get_by_test_id("bookkeeping").check()
        expect(page.get_by_test_id("tree-total")).to_have_text("10003 rows")
        expect(page.locator('.tree-row[data-type="custom"]').first).to_contain_text(
            "custom: claude_code:progress"
        )
        assert page.locator(".tree-row.run-row").count() == 0
        # paged as before: the DOM stays small, the compaction and the leaf are reachable
        assert page.locator(".tree-row").count() <= 60
        page.get_by_test_id("tree").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        leaf = page.locator(f'.tree-row[data-entry="{ids["leaf"]}"]')
        expect(leaf).to_have_class("row tree-row on-path leaf  ")


def test_the_range_selection_is_cleared_once_a_digest_is_applied(
    page: Page, tmp_path: Path
) -> None:
    store = tl.open_store(tmp_path / "small")
    with store.create() as s:
        for n in range(4):
            s.append_message("user" if n % 2 == 0 else "assistant", f"message {n}")
    with serve(store) as base:
        page.goto(f"{base}#/s/{s.id}")
        expect(page.get_by_test_id("ctx-total")).to_have_text("4 messages")
        page.locator('.ctx-row[data-position="0"]').click()
        page.locator('.ctx-row[data-position="1"]').click(modifiers=["Shift"])
        expect(page.get_by_test_id("selection")).to_have_text("selected 0–1")
        page.get_by_test_id("btn-digest").click()
        page.locator('#modal textarea[name="summary"]').fill("the first exchange")
        page.locator("#modal-ok").click()
        expect(page.get_by_test_id("preview")).to_be_visible()
        page.locator("#modal-ok").click()
        expect(page.get_by_test_id("ctx-total")).to_have_text("3 messages")
        expect(page.get_by_test_id("selection")).to_have_count(0)
        assert page.locator(".ctx-row.selected").count() == 0
