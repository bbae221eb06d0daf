"""Google ADK session dumps and eval sets from realdata/google_adk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.formats import gemini, google_adk

ADK = REALDATA / "google_adk"
SESSIONS = sorted(ADK.glob("*.session.json"))
EVALS = sorted(ADK.glob("*.test.json"))


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_a_session_dump_keeps_every_event_in_order(path: Path) -> None:
    doc = json.loads(path.read_text())
    (s,) = importing.import_path(tl.open_store("memory://"), "google_adk", path)
    assert s.id == doc["id"]
    ids = [e["id"] for e in doc["events"]]
    assert s.path_ids() == ids
    msgs = list(s.context().messages)
    assert [m.role for m in msgs] == [
        "assistant" if e["content"]["role"] == "model" else "user" for e in doc["events"]
    ]
    for m, e in zip(msgs, doc["events"], strict=True):
        assert m.provider_details["google_adk"]["author"] == e["author"]
        parts = e["content"]["parts"]
        assert m.text == "\n".join(p["text"] for p in parts if "text" in p)
        calls = [p["function_call"]["name"] for p in parts if "function_call" in p]
        assert [u.name for u in m.tool_uses] == calls


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_function_responses_answer_the_call_before_them(path: Path) -> None:
    (s,) = importing.import_path(tl.open_store("memory://"), "google_adk", path)
    msgs = list(s.context().messages)
    open_calls: list[str] = []
    for m in msgs:
        for r in m.tool_results:
            assert r.tool_use_id == open_calls.pop(0)
        open_calls.extend(u.id for u in m.tool_uses)
    assert open_calls == []


@pytest.mark.parametrize("path", EVALS, ids=lambda p: p.name)
def test_an_eval_set_gives_one_session_per_case(path: Path) -> None:
    doc = json.loads(path.read_text())
    store = tl.open_store("memory://")
    sessions = google_adk.import_sessions(store, path)
    assert len(sessions) == len(doc["eval_cases"])
    for s, case in zip(sessions, doc["eval_cases"], strict=True):
        assert s.name == case["eval_id"]
        msgs = list(s.context().messages)
        want = []
        for inv in case["conversation"]:
            for key, role in (("user_content", "user"), ("final_response", "assistant")):
                texts = [p["text"] for p in inv[key]["parts"] if p.get("text") is not None]
                want.append((role, "\n".join(texts)))
        assert [(m.role, m.text) for m in msgs] == want
        gemini.validate(gemini.dump([m for m in msgs if m.content]))
        finals = [m for m in msgs if m.role == "assistant"]
        for m, inv in zip(finals, case["conversation"], strict=True):
            assert m.provider_details["google_adk"]["intermediate_data"] == inv["intermediate_data"]


def test_a_json_file_of_another_kind_is_refused() -> None:
    path = REALDATA / "chatgpt_export" / "mitkury_chatgpt-export-parser__example-conversation.json"
    with pytest.raises(
        tl.UserError, match=r"example-conversation\.json: at \$: not a Google ADK dump"
    ):
        google_adk.import_sessions(tl.open_store("memory://"), path)
