"""The viewer end to end in headless Chromium against a real server on 127.0.0.1.

One walk through the main job on the example store: import the shipped examples into an empty
store, open the branched conversation, switch branches, set a tag, undo to it, digest a range and
switch the digest off, then check every step against the session file reopened from disk.
Screenshots of the main pages land in ``tests/artifacts/`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

import threadline as tl
from threadline import examples, formats
from threadline.model.content import ToolResultBlock, ToolUseBlock
from threadline.model.entries import MessageEntry, new_id
from web_support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, serve


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # The suite runs alongside other work: give every wait for a final state room for a loaded
    # machine. The waits stay for exact final states, so a longer limit weakens nothing.
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


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def disk(store_dir: Path, sid: str) -> tl.Session:
    """The session as stored, read by a fresh store object (no shared cache with the server)."""
    return tl.open_store(store_dir).open(sid, read_only=True)


def confirm_write(page: Page, done: str) -> None:
    """Go through preview → confirm and wait until the page has reloaded the session: the status
    names exactly this action as done (a change poll must not have replaced it)."""
    expect(page.get_by_test_id("preview")).to_be_visible()
    page.locator("#modal-ok").click()
    expect(page.locator("#status")).to_have_text(f"{done}: done")
    expect(page.locator("#modal")).to_be_hidden()


def assert_page_matches_disk(page: Page, store_dir: Path, sid: str) -> tl.Session:
    """Context size, visible context rows, leaf and tags on the page equal the file's."""
    s = disk(store_dir, sid)
    ctx = s.context()
    expect(page.get_by_test_id("ctx-total")).to_have_text(f"{len(ctx.messages)} messages")
    view_ids = ctx.view.ids()
    rows = page.locator(".ctx-row")
    shown = rows.evaluate_all("els => els.map(e => [Number(e.dataset.position), e.dataset.viewId])")
    assert shown == [[i, view_ids[i]] for i in range(len(shown))]
    assert len(shown) == min(len(view_ids), len(shown))
    leaf_rows = page.locator(".tree-row.leaf")
    expect(leaf_rows).to_have_count(1)
    assert leaf_rows.get_attribute("data-entry") == s.leaf_id
    return s


def open_session(page: Page, base: str, sid: str) -> None:
    page.goto(f"{base}#/s/{sid}")
    expect(page.locator("body")).to_have_attribute("data-ready", f"#/s/{sid}")
    expect(page.get_by_test_id("ctx-total")).to_be_visible()


def branched(store: Any) -> str:
    """The example session whose tree branches (the ChatGPT conversation)."""
    for row in store.list():
        s = store.open(row.id, read_only=True)
        if any(len(s.children(e)) > 1 for e in s.entry_ids()):
            return str(row.id)
    raise AssertionError("no example session has a branch")


def test_example_store_walkthrough(page: Page, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    store = tl.open_store(store_dir)
    # Keyword side of the hybrid search only: embedding the 914-message pi example with the
    # NumPy MiniLM takes minutes (reported to the catalog's owner).
    store.catalog.embedder = None
    with serve(store) as base:
        # -- an empty store offers the examples; importing asks first ----------------------
        page.goto(base)
        expect(page.get_by_test_id("empty-store")).to_be_visible()
        shot(page, "01-empty-store")
        page.get_by_test_id("import-examples").click()
        expect(page.locator("#modal-title")).to_have_text("Import the examples")
        page.locator("#modal-ok").click()
        expect(page.get_by_test_id("sessions")).to_be_visible()
        listed = page.locator("tr[data-session]").evaluate_all(
            "els => els.map(e => e.dataset.session)"
        )
        stored = [r.id for r in tl.open_store(store_dir).list()]
        assert listed == stored
        assert len(stored) == len(examples.available())
        shot(page, "02-session-list")

        # -- open the branched conversation ------------------------------------------------
        sid = branched(tl.open_store(store_dir))
        page.locator(f'tr[data-session="{sid}"] a').first.click()
        expect(page.locator("body")).to_have_attribute("data-ready", f"#/s/{sid}")
        before = assert_page_matches_disk(page, store_dir, sid)
        shot(page, "03-session")

        # -- switch branches: a leaf of the tree that is off the current path --------------
        s = before
        on_path = set(s.path_ids())
        other = next(
            e
            for e in s.entry_ids()
            if e not in on_path and not s.children(e) and s.entry(e).type == "message"
        )
        page.locator(f'.tree-row[data-entry="{other}"]').click()
        expect(page.get_by_test_id("entry-meta")).to_contain_text(other)
        page.get_by_test_id("btn-branch").click()
        expect(page.get_by_test_id("preview")).to_contain_text(f"to {other}")
        shot(page, "04-branch-preview")
        confirm_write(page, "Branch here")
        s = assert_page_matches_disk(page, store_dir, sid)
        assert s.leaf_id == other
        n = len(s.context().messages)
        assert n >= 3

        # -- set a tag after message 1 (position 2) ----------------------------------------
        page.locator('.ctx-row[data-position="1"]').click()
        expect(page.get_by_test_id("selection")).to_have_text("selected 1–1")
        page.get_by_test_id("btn-tag-here").click()
        page.locator('#modal-body input[name="name"]').fill("checkpoint")
        page.locator("#modal-ok").click()
        confirm_write(page, "Set a tag at position 2")
        s = assert_page_matches_disk(page, store_dir, sid)
        tags = {t.name: t for t in s.tags().tags}
        assert (tags["checkpoint"].position, tags["checkpoint"].status) == (2, "valid")
        expect(page.locator('.ctx-row[data-position="1"] .chip.bookmark')).to_have_text(
            "⚑ checkpoint"
        )

        # -- undo to it ---------------------------------------------------------------------
        page.get_by_test_id("tab-tags").click()
        page.locator('li[data-tag="checkpoint"]').get_by_test_id("undo-to").click()
        expect(page.get_by_test_id("preview")).to_contain_text(f"Context: {n} → 2 messages.")
        confirm_write(page, "Undo to tag checkpoint")
        s = assert_page_matches_disk(page, store_dir, sid)
        assert len(s.context().messages) == 2
        assert s.leaf_id == s.context().view[1].entry_id

        # -- remove the tag ----------------------------------------------------------------
        page.get_by_test_id("tab-tags").click()
        page.locator('li[data-tag="checkpoint"]').get_by_test_id("untag").click()
        confirm_write(page, "Remove tag checkpoint")
        s = assert_page_matches_disk(page, store_dir, sid)
        assert [t.name for t in s.tags().tags] == ["__session_start__"]
        page.get_by_test_id("tab-tags").click()
        expect(page.locator('li[data-tag="checkpoint"]')).to_have_count(0)

        # -- digest positions 0-1, then switch the digest off --------------------------------
        page.locator('.ctx-row[data-position="0"]').click()
        page.locator('.ctx-row[data-position="1"]').click(modifiers=["Shift"])
        expect(page.get_by_test_id("selection")).to_have_text("selected 0–1")
        page.get_by_test_id("btn-digest").click()
        page.locator('#modal-body textarea[name="summary"]').fill("The user asked; it answered.")
        page.locator("#modal-ok").click()
        expect(page.get_by_test_id("preview")).to_contain_text("Context: 2 → 1 messages.")
        confirm_write(page, "Digest 0–1")
        s = assert_page_matches_disk(page, store_dir, sid)
        msgs = list(s.context().messages)
        assert [(m.role, m.text) for m in msgs] == [("system", "The user asked; it answered.")]
        (op,) = s.operations()
        assert (op.kind, op.state) == ("digest", "active")

        page.get_by_test_id("tab-ops").click()
        expect(page.locator(f'li[data-op="{op.id}"]')).to_have_attribute("data-state", "active")
        page.locator(f'li[data-op="{op.id}"]').get_by_test_id("op-toggle").click()
        expect(page.get_by_test_id("preview")).to_contain_text("Context: 1 → 2 messages.")
        confirm_write(page, "Switch off digest")
        s = assert_page_matches_disk(page, store_dir, sid)
        (op,) = s.operations()
        assert op.state == "inactive"
        assert len(s.context().messages) == 2
        page.get_by_test_id("tab-ops").click()
        expect(page.locator(f'li[data-op="{op.id}"]')).to_have_attribute("data-state", "inactive")
        shot(page, "05-operations")

        # -- search across sessions: the page lists what the catalog's hybrid search finds --
        page.get_by_role("link", name="← sessions").click()
        page.get_by_test_id("search").fill("atoms")
        page.get_by_test_id("search").press("Enter")
        expect(page.locator("body")).to_have_attribute("data-ready", "#/?q=atoms")
        catalog = tl.open_store(store_dir).catalog
        catalog.embedder = None
        hits = catalog.search("atoms", k=50)
        found = list(dict.fromkeys(h.session_id for h in hits))
        assert sid in found
        listed = page.locator("tr[data-session]").evaluate_all(
            "els => els.map(e => e.dataset.session)"
        )
        assert listed == found
        shot(page, "06-search")

        # -- manage_tags: preview, then confirm exactly the previewed set ------------------
        panel = page.get_by_test_id("manage-tags")
        panel.locator('input[name="query"]').fill("atoms")
        panel.locator('input[name="tag"]').fill("science")
        page.get_by_test_id("mt-preview").click()
        expect(page.get_by_test_id("mt-preview-body")).to_contain_text("science")
        assert catalog.session_tags(sid) == []
        shot(page, "07-manage-tags-preview")
        page.locator("#modal-ok").click()
        expect(page.locator("#modal")).to_be_hidden()
        tagged = [r.id for r in catalog.sessions(tag="science")]
        assert set(tagged) == set(found)
        expect(page.locator('a.chip[data-tag="science"]')).to_have_text(f"science ({len(tagged)})")
        page.get_by_role("link", name="clear search").click()
        expect(page.locator("body")).to_have_attribute("data-ready", "#/")
        page.locator('a.chip[data-tag="science"]').click()
        expect(page.locator("body")).to_have_attribute("data-ready", "#/?tag=science")
        listed = page.locator("tr[data-session]").evaluate_all(
            "els => els.map(e => e.dataset.session)"
        )
        assert listed == tagged


def test_ten_thousand_messages_keep_the_dom_bounded(page: Page, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "big", durability="flush")
    s = store.create()
    records: list[Any] = []
    parent = None
    for i in range(10_000):
        role = "user" if i % 2 == 0 else "assistant"
        rec = MessageEntry(
            id=new_id(),
            parent_id=parent,
            timestamp=f"2025-01-01T00:00:{i:05d}Z",
            message=tl.Message(role=role, content=[tl.text(f"message number {i}")]),
        )
        records.append(rec)
        parent = rec.id
    s.append_records(records)
    s.close()
    with serve(store) as base:
        open_session(page, base, s.id)
        expect(page.get_by_test_id("ctx-total")).to_have_text("10000 messages")
        expect(page.get_by_test_id("tree-total")).to_have_text("10000 rows")
        assert page.locator(".ctx-row").count() <= 40
        assert page.locator(".tree-row").count() <= 60
        shot(page, "08-ten-thousand")
        # scroll both lists to the end: the last rows are fetched and shown, the DOM stays small
        page.get_by_test_id("context").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        page.get_by_test_id("tree").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        expect(page.locator('.ctx-row[data-position="9999"]')).to_contain_text(
            "message number 9999"
        )
        expect(page.locator(f'.tree-row[data-entry="{records[-1].id}"]')).to_contain_text(
            "message number 9999"
        )
        assert page.locator(".ctx-row").count() <= 40
        assert page.locator(".tree-row").count() <= 60


def test_tool_pairs_render_in_the_entry_details(page: Page, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "tools")
    s = store.create()
    s.append_message("user", "list files")
    call = s.append_message("assistant", [tl.tool_use("c1", "ls", {"path": "."})])
    s.append_message("tool", [tl.tool_result("c1", "a.txt\nb.txt")])
    s.close()
    with serve(store) as base:
        open_session(page, base, s.id)
        page.locator(f'.tree-row[data-entry="{call}"]').click()
        expect(page.get_by_test_id("message")).to_contain_text("→ ls [c1]")
        size = disk(tmp_path / "tools", s.id).metadata()
        expected = next(m.size for m in size if m.id == call)
        expect(page.get_by_test_id("entry-size")).to_have_text(f"{expected} bytes")
        msg = disk(tmp_path / "tools", s.id).entry(call).payload
        assert isinstance(msg.content[0], ToolUseBlock)
        page.locator('.ctx-row[data-position="2"]').click()
        expect(page.get_by_test_id("message")).to_contain_text("← result [c1]\na.txt\nb.txt")
        result = disk(tmp_path / "tools", s.id).context().messages[2].content[0]
        assert isinstance(result, ToolResultBlock)

        # the provider selector shows what each provider receives for this context
        page.get_by_test_id("tab-payload").click()
        page.get_by_test_id("provider").select_option("anthropic")
        expect(page.get_by_test_id("payload")).to_contain_text('"tool_use_id": "c1"')
        shown = json.loads(page.get_by_test_id("payload").inner_text())
        messages = list(disk(tmp_path / "tools", s.id).context().messages)
        assert shown == formats.dump_context("anthropic", messages)
        page.get_by_test_id("provider").select_option("openai_chat")
        expect(page.get_by_test_id("payload")).to_contain_text('"tool_call_id": "c1"')
        shown = json.loads(page.get_by_test_id("payload").inner_text())
        assert shown == formats.dump_context("openai_chat", messages)
        shot(page, "10-provider-payload")


def test_the_provider_tab_opens_on_the_sessions_format_and_repairs_an_interrupted_call(
    page: Page, tmp_path: Path
) -> None:
    store = tl.open_store(tmp_path / "cut")
    s = store.create()
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_message("user", "read a")
    s.append_message("assistant", [tl.tool_use("c1", "read", {"p": "a"})])
    s.append_message("user", "stop")
    s.close()
    with serve(store) as base:
        open_session(page, base, s.id)
        page.get_by_test_id("tab-payload").click()
        expect(page.get_by_test_id("adjustment-list")).to_contain_text(
            "answered dangling call [1] tool call 'c1' (read) has no result; answered as "
            "interrupted"
        )
        expect(page.get_by_test_id("provider")).to_have_value("anthropic")
        shown = json.loads(page.get_by_test_id("payload").inner_text())
        assert shown == formats.dump_context(
            "anthropic", disk(tmp_path / "cut", s.id).context().messages
        )
        shot(page, "11-provider-adjustments")
        page.get_by_test_id("btn-repair").click()
        confirm_write(page, "Repair interrupted tool calls")
        assert disk(tmp_path / "cut", s.id).repair().calls == []
        page.get_by_test_id("tab-payload").click()
        expect(page.get_by_test_id("adjustments")).to_contain_text(
            "Sent as it is: the send policy changed nothing."
        )
        expect(page.get_by_test_id("btn-repair")).to_have_count(0)


def test_sidechains_are_folded_and_open_on_click(page: Page, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "cc")
    examples.import_examples(store)
    sid = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"  # the Claude Code example with sub-agents
    s = store.open(sid, read_only=True)
    assert s.header.metadata["example"]["licence"] == "MIT"
    with serve(store) as base:
        open_session(page, base, sid)
        expect(page.locator(".col-head", has_text="sidechain(s) folded")).to_contain_text(
            "2 sidechain(s) folded"
        )
        total = len(s.entry_ids())
        folded = page.get_by_test_id("tree-total").inner_text()
        hidden = total - int(folded.split()[0])
        assert hidden > 0
        page.get_by_test_id("tree").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        first = page.get_by_test_id("unfold").first
        n = int(first.inner_text().split()[1])
        first.click()
        expect(page.get_by_test_id("tree-total")).to_have_text(f"{total - hidden + n} rows")
        shot(page, "09-sidechain-open")


def test_the_pages_own_writes_never_read_as_a_change_on_disk(page: Page, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "own")
    s = store.create()
    first = s.append_message("user", "first")
    second = s.append_message("assistant", "second")
    s.close()
    with serve(store) as base:
        open_session(page, base, s.id)
        info_url = f"{base}api/sessions/{s.id}"
        reloads: list[str] = []  # one tags listing per reload of the page
        page.on("request", lambda r: reloads.append(r.url) if "/tags" in r.url else None)
        # Poll as often as the page can (it also polls on focus): every write below races polls.
        page.evaluate("() => { setInterval(() => window.dispatchEvent(new Event('focus')), 5); }")
        for target, n in ((first, 1), (second, 2)):
            page.locator(f'.tree-row[data-entry="{target}"]').click()
            expect(page.get_by_test_id("entry-meta")).to_contain_text(target)
            page.get_by_test_id("btn-branch").click()
            reloads.clear()
            confirm_write(page, "Branch here")
            expect(page.get_by_test_id("ctx-total")).to_have_text(f"{n} messages")
            # Polls after the write find nothing new: the status stays, nothing reloads again.
            for _ in range(3):
                with page.expect_response(lambda r: r.url == info_url):
                    pass
            expect(page.locator("#status")).to_have_text("Branch here: done")
            assert len(reloads) == 1
        assert disk(tmp_path / "own", s.id).leaf_id == second


def test_the_page_reloads_when_another_process_appends(page: Page, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "live")
    s = store.create()
    s.append_message("user", "first")
    s.close()
    with serve(store) as base:
        open_session(page, base, s.id)
        expect(page.get_by_test_id("ctx-total")).to_have_text("1 messages")
        with tl.open_store(tmp_path / "live").open(s.id) as agent:
            agent.append_message("assistant", "written by an agent")
        expect(page.get_by_test_id("ctx-total")).to_have_text("2 messages", timeout=15_000)
        expect(page.locator('.ctx-row[data-position="1"]')).to_contain_text("written by an agent")
        expect(page.locator("#status")).to_have_text("Reloaded: the session changed on disk")


def test_a_search_typed_while_the_list_loads_is_what_the_page_ends_on(
    page: Page, tmp_path: Path
) -> None:
    # The list's answer is held back until the search's has been rendered: its late answer must
    # not mark the page ready for the list or set the status (it did: a walkthrough step, a
    # search typed while "← sessions" still loaded, failed once that way)
    store = tl.open_store(tmp_path / "race")
    store.catalog.embedder = None
    for text in ("atoms and molecules", "nothing to see"):
        s = store.create()
        s.append_message("user", text)
        s.close()
    held: list[Any] = []

    def hold_the_list(route: Any) -> None:
        if "q=atoms" in route.request.url:
            route.continue_()
        else:
            held.append(route)

    with serve(store) as base:
        page.goto(base)
        expect(page.locator("body")).to_have_attribute("data-ready", "#/")
        page.route("**/api/sessions*", hold_the_list)
        page.evaluate("location.hash = '#/?tag='")  # the list, held
        page.evaluate("location.hash = '#/?q=atoms'")  # then at once a search
        expect(page.locator("body")).to_have_attribute("data-ready", "#/?q=atoms")
        expect(page.locator("#status")).to_have_text("1 session(s)")
        assert len(held) == 1
        with page.expect_response("**/api/sessions?q=&tag=*"):
            held[0].continue_()
        page.wait_for_timeout(500)  # the late answer has been read and handled by now
        assert page.locator("body").get_attribute("data-ready") == "#/?q=atoms"
        assert page.locator("#status").inner_text() == "1 session(s)"
        expect(page.locator("tr[data-session]")).to_have_count(1)


def test_the_viewer_revises_resequences_and_inserts_and_expands_markers(
    page: Page, tmp_path: Path
) -> None:
    store_dir = tmp_path / "ops"
    store = tl.open_store(store_dir)
    s = store.create()
    for i in range(6):
        s.append_message("user" if i % 2 == 0 else "assistant", f"m{i}")
    sid = s.id
    s.close()
    with serve(store) as base:
        open_session(page, base, sid)

        # -- revise positions 1-2 into one assistant message: markers before and after ----------
        page.locator('.ctx-row[data-position="1"]').click()
        page.locator('.ctx-row[data-position="2"]').click(modifiers=["Shift"])
        page.get_by_test_id("btn-revise").click()
        page.locator('#modal-body textarea[name="text"]').fill("A better first answer.")
        page.locator("#modal-ok").click()
        expect(page.get_by_test_id("preview")).to_contain_text("Context: 6 → 7 messages.")
        confirm_write(page, "Revise 1–2")
        s = assert_page_matches_disk(page, store_dir, sid)
        (rev,) = s.operations()
        assert [m.text for m in s.context().messages] == [
            "m0",
            f"[threadline marker: revise {rev.id} replaced 2 messages with the 1 below; "
            f'expand_operation("{rev.id}") shows the originals]',
            "A better first answer.",
            f"[threadline marker: end of revise {rev.id}]",
            "m3",
            "m4",
            "m5",
        ]
        expect(page.locator(".ctx-row.marker")).to_have_count(2)
        assert page.locator(".ctx-row.marker").evaluate_all(
            "els => els.map(e => e.dataset.position)"
        ) == ["1", "3"]

        # -- resequence 4-5 (the form proposes the reversed order) ------------------------------
        page.locator('.ctx-row[data-position="4"]').click()
        page.locator('.ctx-row[data-position="5"]').click(modifiers=["Shift"])
        page.get_by_test_id("btn-resequence").click()
        expect(page.locator('#modal-body input[name="new_order"]')).to_have_value("5,4")
        page.locator("#modal-ok").click()
        confirm_write(page, "Resequence 4–5")
        s = assert_page_matches_disk(page, store_dir, sid)
        assert [m.text for m in s.context().messages][4:] == ["m4", "m3", "m5"]

        # -- insert a user note after position 6 ------------------------------------------------
        page.locator('.ctx-row[data-position="6"]').click()
        page.get_by_test_id("btn-insert").click()
        page.locator('#modal-body select[name="role"]').select_option("user")
        page.locator('#modal-body textarea[name="text"]').fill("(I meant PostgreSQL.)")
        page.locator("#modal-ok").click()
        expect(page.get_by_test_id("preview")).to_contain_text("Context: 7 → 8 messages.")
        confirm_write(page, "Insert after 6")
        s = assert_page_matches_disk(page, store_dir, sid)
        msgs = list(s.context().messages)
        assert (msgs[7].role, msgs[7].text) == ("user", "(I meant PostgreSQL.)")
        assert [o.kind for o in s.operations()] == ["revise", "resequence", "insert"]

        # -- expand the revise from the operations tab, then collapse it -----------------------
        page.get_by_test_id("tab-ops").click()
        page.locator(f'li[data-op="{rev.id}"]').get_by_test_id("op-expand").click()
        confirm_write(page, "Expand revise")
        s = assert_page_matches_disk(page, store_dir, sid)
        assert [m.text for m in s.context().messages][2:4] == ["m1", "m2"]
        page.get_by_test_id("tab-ops").click()
        page.locator(f'li[data-op="{rev.id}"]').get_by_test_id("op-collapse").click()
        confirm_write(page, "Collapse revise")
        s = assert_page_matches_disk(page, store_dir, sid)
        assert [m.text for m in s.context().messages][2] == "A better first answer."
        shot(page, "11-revise-resequence-insert")
