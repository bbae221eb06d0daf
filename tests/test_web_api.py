"""The viewer's JSON API, in process: paging, details, previews that change nothing, writes that
go through the library, the write guards, and the CLI command's refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import threadline as tl
from threadline.cli.main import cli
from threadline.web import create_app

WRITE = {"X-Threadline": "1"}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return tl.open_store(tmp_path / "store")


@pytest.fixture
def client(store: Any) -> TestClient:
    return TestClient(create_app(store), base_url="http://127.0.0.1")


def branched(store: Any) -> tuple[tl.Session, dict[str, str]]:
    s = store.create()
    ids = {}
    ids["u1"] = s.append_message("user", "first question")
    ids["a1"] = s.append_message("assistant", "first answer")
    ids["u2"] = s.append_message("user", "second question")
    ids["a2"] = s.append_message("assistant", "second answer")
    s.branch(ids["a1"])
    ids["u2b"] = s.append_message("user", "other question")
    ids["a2b"] = s.append_message("assistant", "other answer")
    s.close()
    return s, ids


def test_tree_rows_draw_branches_as_lanes_like_git_log_graph(
    store: Any, client: TestClient
) -> None:
    s, ids = branched(store)
    body = client.get(f"/api/sessions/{s.id}/tree").json()
    got = [
        (r["id"], r["lane"], r["through"], r["forks"], r["depth"], r["on_path"], r["leaf"])
        for r in body["rows"]
    ]
    assert got == [
        (ids["u1"], 0, [], [], 0, True, False),
        (ids["a1"], 0, [], [1], 1, True, False),  # the branch point opens lane 1
        (ids["u2"], 0, [1], [], 2, False, False),  # lane 1 waits beside the first branch
        (ids["a2"], 0, [1], [], 3, False, False),
        (ids["u2b"], 1, [], [], 2, True, False),  # the second branch starts in lane 1
        (ids["a2b"], 1, [], [], 3, True, True),
    ]
    assert (body["total"], body["lanes"]) == (6, 2)


def test_runs_of_bookkeeping_entries_are_one_row_unless_asked(
    store: Any, client: TestClient
) -> None:
    s = store.create()
    first = s.append_message("user", "run the tests")
    progress = [s.append_custom("claude_code:progress", {"n": n}) for n in range(5)]
    answer = s.append_message("assistant", "\x1b[32m5 passed\x1b[0m in 0.1s")
    s.close()
    rows = client.get(f"/api/sessions/{s.id}/tree").json()["rows"]
    assert [(r["id"], r["type"], r["run"], r["summary"]) for r in rows] == [
        (first, "message", 0, "run the tests"),
        (progress[0], "run", 5, "5 bookkeeping entries (5 custom)"),
        (answer, "message", 0, "5 passed in 0.1s"),  # ANSI colour codes stripped
    ]
    every = client.get(f"/api/sessions/{s.id}/tree?bookkeeping=1").json()["rows"]
    assert [r["id"] for r in every] == [first, *progress, answer]


def test_outline_keeps_branch_points_labels_and_the_leaf(store: Any, client: TestClient) -> None:
    s, ids = branched(store)
    s = store.open(s.id)
    s.set_label(ids["u1"], "start")
    s.close()
    body = client.get(f"/api/sessions/{s.id}/tree?outline=1").json()
    assert [r["id"] for r in body["rows"]] == [
        ids["u1"],
        ids["a1"],
        ids["a2"],
        store.open(s.id).leaf_id,
    ]


def test_context_pages_carry_positions_and_view_ids(store: Any, client: TestClient) -> None:
    s, ids = branched(store)
    body = client.get(f"/api/sessions/{s.id}/context?offset=1&limit=2").json()
    assert body["total"] == 4
    assert [(r["position"], r["view_id"], r["role"], r["preview"]) for r in body["rows"]] == [
        (1, ids["a1"], "assistant", "first answer"),
        (2, ids["u2b"], "user", "other question"),
    ]


def test_entry_details_give_size_place_and_record(store: Any, client: TestClient) -> None:
    s, ids = branched(store)
    d = client.get(f"/api/sessions/{s.id}/entries/{ids['u2']}").json()
    meta = {m.id: m for m in store.open(s.id).metadata()}
    assert (d["parent_id"], d["children"], d["on_path"], d["positions"], d["size"]) == (
        ids["a1"],
        [ids["a2"]],
        False,
        [],
        meta[ids["u2"]].size,
    )
    assert d["record"]["message"] == {
        "role": "user",
        "content": [{"type": "text", "text": {"content": "second question"}}],
    }


def test_unknown_entry_is_a_404_naming_it(store: Any, client: TestClient) -> None:
    s, _ = branched(store)
    r = client.get(f"/api/sessions/{s.id}/entries/nope")
    assert r.status_code == 404
    assert r.json()["error"].startswith(f"Entry 'nope' not found in session '{s.id}'")


def test_preview_changes_nothing_and_apply_does_what_it_showed(
    store: Any, client: TestClient
) -> None:
    s, ids = branched(store)
    before = (tmp := store.backend._path(s.id)).read_bytes()
    p = client.post(
        f"/api/sessions/{s.id}/preview",
        headers=WRITE,
        json={"action": "branch", "args": {"entry_id": ids["a2"]}},
    ).json()
    assert tmp.read_bytes() == before
    assert (p["leaf_before"], p["leaf_after"], p["context_before"], p["context_after"]) == (
        ids["a2b"],
        ids["a2"],
        4,
        4,
    )
    assert (p["diff"]["at"], p["diff"]["removed"], p["diff"]["added"]) == (2, 2, 2)
    assert [r["preview"] for r in p["diff"]["added_rows"]] == ["second question", "second answer"]
    r = client.post(
        f"/api/sessions/{s.id}/apply",
        headers=WRITE,
        json={"action": "branch", "args": {"entry_id": ids["a2"]}},
    ).json()
    assert (r["leaf_id"], r["context_messages"]) == (ids["a2"], 4)
    assert store.open(s.id).leaf_id == ids["a2"]


def test_digest_preview_shows_the_summary_replacing_the_range(
    store: Any, client: TestClient
) -> None:
    s, _ = branched(store)
    p = client.post(
        f"/api/sessions/{s.id}/preview",
        headers=WRITE,
        json={"action": "digest", "args": {"start": "0", "end": "1", "summary": "intro"}},
    ).json()
    assert (p["context_before"], p["context_after"]) == (4, 3)
    assert p["diff"]["added_rows"] == [
        {"view_id": f"{p['result']}:0", "role": "system", "preview": "intro"}
    ]
    assert store.open(s.id).operations() == []


def test_undo_through_the_api_moves_the_leaf_on_disk(store: Any, client: TestClient) -> None:
    s, ids = branched(store)
    r = client.post(
        f"/api/sessions/{s.id}/apply", headers=WRITE, json={"action": "undo", "args": {"n": 1}}
    ).json()
    assert r["result"]["user_messages_removed"] == 1
    assert store.open(s.id).leaf_id == ids["a1"]


def test_a_refused_operation_comes_back_as_a_400_with_the_library_message(
    store: Any, client: TestClient
) -> None:
    s, _ = branched(store)
    r = client.post(
        f"/api/sessions/{s.id}/preview",
        headers=WRITE,
        json={"action": "snip", "args": {"start": 2, "end": 9}},
    )
    assert r.status_code == 400
    assert "9" in r.json()["error"]


def test_writes_need_the_header_and_a_loopback_host(store: Any, client: TestClient) -> None:
    s, ids = branched(store)
    body = {"action": "branch", "args": {"entry_id": ids["a1"]}}
    r = client.post(f"/api/sessions/{s.id}/apply", json=body)
    assert (r.status_code, r.json()) == (403, {"error": "Writes need the X-Threadline header"})
    other = TestClient(create_app(store), base_url="http://evil.example")
    r = other.post(f"/api/sessions/{s.id}/apply", json=body, headers=WRITE)
    assert (r.status_code, r.json()) == (
        403,
        {
            "error": "Refusing a request for host "
            "'evil.example': the viewer answers "
            "only on 127.0.0.1, localhost or [::1]"
        },
    )
    assert store.open(s.id).leaf_id == ids["a2b"]


def test_another_process_appending_is_seen_on_the_next_request(
    store: Any, client: TestClient
) -> None:
    s, _ = branched(store)
    assert client.get(f"/api/sessions/{s.id}/context").json()["total"] == 4
    with tl.open_store(store.url).open(s.id) as other:
        other.append_message("user", "from elsewhere")
    assert client.get(f"/api/sessions/{s.id}/context").json()["total"] == 5


def test_a_write_returns_the_version_the_page_sees_next_and_only_others_change_it(
    store: Any, client: TestClient
) -> None:
    s, ids = branched(store)
    url = f"/api/sessions/{s.id}"
    before = client.get(url).json()["version"]
    r = client.post(
        f"{url}/apply", headers=WRITE, json={"action": "branch", "args": {"entry_id": ids["a2"]}}
    ).json()
    assert r["version"] != before
    assert client.get(url).json()["version"] == r["version"]
    assert client.get(url).json()["version"] == r["version"]
    with tl.open_store(store.url).open(s.id) as other:
        other.append_message("user", "from elsewhere")
    assert client.get(url).json()["version"] != r["version"]


def test_the_viewer_releases_the_writer_lock_after_each_write(
    store: Any, client: TestClient
) -> None:
    s, ids = branched(store)
    client.post(
        f"/api/sessions/{s.id}/apply",
        headers=WRITE,
        json={"action": "label", "args": {"target_id": ids["u1"], "label": "start"}},
    )
    with tl.open_store(store.url).open(s.id) as other:
        other.append_message("user", "the CLI can still write")
        assert other.get_label(ids["u1"]) == "start"


def test_purge_preview_then_confirm_with_its_fingerprint(store: Any, client: TestClient) -> None:
    s, ids = branched(store)
    url = f"/api/sessions/{s.id}/purge"
    p = client.post(url, headers=WRITE, json={"entry_ids": [ids["a2"]]}).json()
    assert (p["executed"], p["plan"]["entry_ids"]) == (False, [ids["a2"]])
    assert ids["a2"] not in store.open(s.id).state.purged
    stale = client.post(
        url, headers=WRITE, json={"entry_ids": [ids["a2"]], "confirm": True, "fingerprint": "other"}
    )
    assert stale.status_code == 400
    done = client.post(
        url,
        headers=WRITE,
        json={"entry_ids": [ids["a2"]], "confirm": True, "fingerprint": p["plan"]["fingerprint"]},
    ).json()
    assert done["executed"] is True
    assert ids["a2"] in store.open(s.id).state.purged


def test_search_and_tag_filter_list_the_matching_sessions(store: Any, client: TestClient) -> None:
    a = store.create()
    a.append_message("user", "the walrus sings")
    a.close()
    b = store.create()
    b.append_message("user", "nothing here")
    b.close()
    store.catalog.embedder = None  # keyword search only: no model in the test
    found = client.get("/api/sessions?q=walrus").json()
    assert [r["id"] for r in found["sessions"]] == [a.id]
    assert found["sessions"][0]["hit"]["entry_id"] == a.leaf_id
    plan = client.post(
        "/api/catalog/manage_tags",
        headers=WRITE,
        json={"op": "find_and_tag", "query": "walrus", "tag": "zoo"},
    ).json()
    assert (plan["executed"], plan["count"]) == (False, 1)
    assert client.get("/api/sessions?tag=zoo").json()["sessions"] == []
    done = client.post(
        "/api/catalog/manage_tags",
        headers=WRITE,
        json={
            "op": "find_and_tag",
            "query": "walrus",
            "tag": "zoo",
            "confirm": True,
            "token": plan["token"],
        },
    ).json()
    assert (done["executed"], done["changed"]) == (True, 1)
    listed = client.get("/api/sessions?tag=zoo").json()
    assert ([r["id"] for r in listed["sessions"]], listed["tags"]) == ([a.id], {"zoo": 1})


def test_web_command_refuses_a_port_out_of_range(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        cli, ["web", "--store", str(tmp_path), "--port", "70000", "--no-browser"]
    )
    assert (r.exit_code, r.output) == (2, "Error: Port 70000 is out of range; use 0-65535\n")


def test_provider_payload_is_the_formats_dump_of_the_context(
    store: Any, client: TestClient
) -> None:
    from threadline import formats

    s, _ = branched(store)
    body = client.get(f"/api/sessions/{s.id}/payload?format=anthropic").json()
    expected = formats.dump_context("anthropic", list(store.open(s.id).context().messages))
    assert body == {
        "format": "anthropic",
        "own_format": "openai_chat",
        "payload": expected,
        "adjustments": [],
    }
    bad = client.get(f"/api/sessions/{s.id}/payload?format=telex")
    assert (bad.status_code, bad.json()["error"]) == (
        400,
        "Unknown provider format 'telex'; choose one of: openai_chat, openai_responses, "
        "anthropic, gemini, bedrock",
    )


def test_the_payload_opens_on_the_model_in_use_and_lists_the_adjustments(
    store: Any, client: TestClient
) -> None:
    s = store.create()
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_message("user", "read a")
    call = s.append_message("assistant", [tl.tool_use("c1", "read", {"p": "a"})])
    s.append_message("user", "stop")
    s.close()
    body = client.get(f"/api/sessions/{s.id}/payload").json()
    assert (body["format"], body["own_format"]) == ("anthropic", "anthropic")
    assert body["adjustments"] == [
        {
            "kind": "answered_dangling_call",
            "position": 1,
            "view_id": call,
            "detail": "tool call 'c1' (read) has no result; answered as interrupted",
        }
    ]
    # the repair action: previewed on a copy, then written; the payload then needs no change
    p = client.post(
        f"/api/sessions/{s.id}/preview", headers=WRITE, json={"action": "repair", "args": {}}
    ).json()
    assert (p["context_before"], p["context_after"], p["diff"]["added"]) == (3, 4, 1)
    assert store.open(s.id).repair().calls != []
    client.post(f"/api/sessions/{s.id}/apply", headers=WRITE, json={"action": "repair", "args": {}})
    assert client.get(f"/api/sessions/{s.id}/payload").json()["adjustments"] == []
    client.post(
        f"/api/sessions/{s.id}/apply", headers=WRITE, json={"action": "undo_repair", "args": {}}
    )
    assert len(client.get(f"/api/sessions/{s.id}/payload").json()["adjustments"]) == 1


def test_compaction_preview_writes_nothing_and_confirm_writes_its_summary(
    store: Any, client: TestClient
) -> None:
    s = store.create()
    for i in range(6):
        s.append_message("user", f"question {i} " + "words " * 200)
        s.append_message("assistant", f"answer {i} " + "words " * 200)
    s.close()
    url = f"/api/sessions/{s.id}/compact"
    p = client.post(url, headers=WRITE, json={"keep_recent_tokens": 300}).json()
    assert p["executed"] is False
    assert store.open(s.id).leaf_id == p["leaf_id"]
    assert p["summarized_messages"] + p["kept_entries"] == 12
    done = client.post(
        url,
        headers=WRITE,
        json={"keep_recent_tokens": 300, "confirm": True, "leaf_id": p["leaf_id"]},
    ).json()
    after = store.open(s.id)
    rec = after.entry(done["entry_id"])
    assert (rec.type, rec.payload.summary, rec.payload.first_kept_entry_id) == (
        "compaction",
        p["summary"],
        p["first_kept_entry_id"],
    )
    assert done["context_messages"] == 1 + p["kept_entries"]


def test_compaction_confirm_is_refused_when_the_leaf_moved(store: Any, client: TestClient) -> None:
    s = store.create()
    for i in range(6):
        s.append_message("user", f"question {i} " + "words " * 200)
        s.append_message("assistant", f"answer {i} " + "words " * 200)
    s.close()
    url = f"/api/sessions/{s.id}/compact"
    r = client.post(
        url,
        headers=WRITE,
        json={"keep_recent_tokens": 300, "confirm": True, "leaf_id": "elsewhere"},
    )
    assert (r.status_code, r.json()["error"]) == (
        400,
        f"Session '{s.id}' moved on since the compaction preview; preview again",
    )
    assert [e.type for e in store.open(s.id).entries()] == ["message"] * 12


def test_threadline_web_serves_on_loopback_and_announces_the_url(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    import httpx

    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from threadline.cli.main import main; main()",
            "web",
            "--store",
            str(tmp_path / "s"),
            "--port",
            "0",
            "--no-browser",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith(f"threadline web: {tmp_path / 's'} at http://127.0.0.1:")
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        for _ in range(200):
            try:
                info = httpx.get(url + "api/info").json()
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert info["store"] == str(tmp_path / "s")
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_write_while_another_writer_holds_the_lock_is_a_409_and_changes_nothing(
    store: Any, client: TestClient
) -> None:
    import os

    s, ids = branched(store)
    with tl.open_store(store.url).open(s.id) as agent:
        agent.append_message("user", "the agent holds the lock now")
        r = client.post(
            f"/api/sessions/{s.id}/apply",
            headers=WRITE,
            json={"action": "branch", "args": {"entry_id": ids["a1"]}},
        )
        assert (r.status_code, r.json()["error"]) == (
            409,
            f"Session '{s.id}' is locked by pid {os.getpid()}; close the other writer or "
            "open read-only",
        )
        leaf = agent.leaf_id
    assert store.open(s.id).leaf_id == leaf


def test_the_running_viewer_embeds_the_search_backlog_in_the_background(store: Any) -> None:
    import time

    from threadline.embedding import HashingEmbedder

    s = store.create()
    s.append_message("user", "a message waiting to be embedded")
    s.close()
    store.catalog.embedder = HashingEmbedder()
    assert store.catalog.embed_budget is None
    with TestClient(create_app(store), base_url="http://127.0.0.1"):  # runs the lifespan
        assert store.catalog.embed_budget == 0.0  # a search never embeds: it answers at once
        deadline = time.monotonic() + 30
        while store.catalog.index_status().pending:
            assert time.monotonic() < deadline, "the backlog was never embedded"
            time.sleep(0.05)
        assert store.catalog.index_status().embedded == 1


def test_a_search_during_indexing_says_how_far_it_is(store: Any, client: TestClient) -> None:
    from threadline.embedding import HashingEmbedder

    s = store.create()
    for n in range(3):
        s.append_message("user", f"deploy step {n}")
    s.close()
    store.catalog.embedder = HashingEmbedder()
    store.catalog.embed_budget = 0.0
    body = client.get("/api/sessions?q=deploy").json()
    assert body["index"] == {"embedded": 0, "total": 3, "semantic": True}
    assert [r["id"] for r in body["sessions"]] == [s.id]  # keyword hits need no vector


def test_a_tag_is_removed_through_the_api(store: Any, client: TestClient) -> None:
    s, _ids = branched(store)
    with store.open(s.id) as w:
        w.tag("checkpoint")
    assert "untag" in client.get("/api/info").json()["actions"]
    r = client.post(
        f"/api/sessions/{s.id}/apply",
        headers=WRITE,
        json={"action": "untag", "args": {"name": "checkpoint"}},
    )
    assert r.status_code == 200
    assert [t.name for t in store.open(s.id).tags()] == ["__session_start__"]


def test_the_session_list_names_unreadable_sessions(store: Any, client: TestClient) -> None:
    s = store.create()
    s.append_message("user", "fine")
    (store.backend.directory / "broken.jsonl").write_bytes(b"this is not a session header\n")
    body = client.get("/api/sessions").json()
    assert [row["id"] for row in body["sessions"]] == [s.id]
    assert body["skipped"] == [
        {
            "id": "broken",
            "reason": "not a session header: JSON is malformed: invalid character (byte 4)",
        }
    ]


def test_a_tree_page_decodes_only_the_messages_it_shows(
    store: Any, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadline.store.base import LazyMessage

    s = store.create()
    for i in range(300):
        s.append_message("user" if i % 2 == 0 else "assistant", f"message {i}")
    s.close()
    decoded: list[str] = []
    real = LazyMessage.decode

    def counting(self: LazyMessage) -> Any:
        decoded.append(self.id)
        return real(self)

    monkeypatch.setattr(LazyMessage, "decode", counting)
    body = client.get(f"/api/sessions/{s.id}/tree?offset=100&limit=20").json()
    assert (body["total"], len(body["rows"])) == (300, 20)
    assert [r["summary"] for r in body["rows"]] == [f"message {i}" for i in range(100, 120)]
    assert sorted(decoded) == sorted(r["id"] for r in body["rows"])
