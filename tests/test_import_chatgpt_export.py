"""ChatGPT conversations.json exports from realdata/chatgpt_export imported as session trees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.formats import chatgpt_export, openai_chat

GPT = REALDATA / "chatgpt_export"
FILES = sorted(GPT.glob("*.json"))


def conversations(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    return doc if isinstance(doc, list) else [doc]


def shown(node: dict[str, Any]) -> bool:
    """A node the model reads: it has a message with some text, or is not system/hidden."""
    msg = node.get("message")
    if not msg:
        return False
    parts = msg["content"].get("parts")
    empty = parts is not None and all(p == "" for p in parts)
    hidden = (msg.get("metadata") or {}).get("is_visually_hidden_from_conversation")
    return not ((hidden or msg["author"]["role"] == "system") and empty)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_conversation_becomes_a_session_with_its_tree(path: Path) -> None:
    store = tl.open_store("memory://")
    sessions = importing.import_path(store, "chatgpt_export", path)
    convs = conversations(path)
    assert len(sessions) == len(convs)
    for s, conv in zip(sessions, convs, strict=True):
        mapping = conv["mapping"]
        assert s.id == conv.get("conversation_id", conv["id"])
        assert s.name == conv["title"]
        assert len(s.entry_ids()) == len(mapping) + 1  # + the session name
        for key, node in mapping.items():
            assert s.entry(key).parent_id == node["parent"]
            assert [c.id for c in s.children(key)] == sorted(
                node["children"], key=lambda c: mapping[c]["message"]["create_time"])
        assert s.leaf_id == conv["current_node"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_context_is_the_current_branch(path: Path) -> None:
    store = tl.open_store("memory://")
    for s, conv in zip(importing.import_path(store, "chatgpt_export", path),
                       conversations(path), strict=True):
        mapping = conv["mapping"]
        branch = []
        cur = conv["current_node"]
        while cur is not None:
            branch.append(cur)
            cur = mapping[cur]["parent"]
        want = [k for k in reversed(branch) if shown(mapping[k])]
        ctx = s.context()
        assert ctx.view.ids() == want
        roles = [mapping[k]["message"]["author"]["role"] for k in want]
        assert [m.role for m in ctx.messages] == [
            "tool" if r == "tool" and m.tool_results else "custom" if r == "tool" else r
            for r, m in zip(roles, ctx.messages, strict=True)]
        for k, m in zip(want, ctx.messages, strict=True):
            parts = mapping[k]["message"]["content"].get("parts")
            if parts and all(isinstance(p, str) for p in parts):
                assert m.text == "\n".join(parts)


def test_edited_and_regenerated_branches_are_siblings() -> None:
    (conv,) = conversations(GPT / "LibreChat_via_Apollo_ui__chatgpt-tree.json")
    forks = {k: n["children"] for k, n in conv["mapping"].items() if len(n["children"]) > 1}
    assert len(forks) == 2
    (s,) = importing.import_path(tl.open_store("memory://"), "auto",
                                 GPT / "LibreChat_via_Apollo_ui__chatgpt-tree.json")
    for key, children in forks.items():
        assert sorted(c.id for c in s.children(key)) == sorted(children)
        kinds = {conv["mapping"][c]["message"]["author"]["role"] for c in children}
        assert len(kinds) == 1  # an edited prompt (users) or a regenerated answer (assistants)


def test_browsing_calls_pair_with_their_first_result_and_dump_valid() -> None:
    path = GPT / "LibreChat_via_Apollo_ui__chatgpt-export.json"
    conv = conversations(path)[0]
    mapping = conv["mapping"]
    (s, _) = importing.import_path(tl.open_store("memory://"), "chatgpt_export", path)
    msgs = list(s.context().messages)
    calls = [k for k, n in mapping.items() if n["message"]
             and n["message"]["author"]["role"] == "assistant"
             and n["message"]["recipient"] != "all"]
    assert sorted(u.id for m in msgs for u in m.tool_uses) == sorted(calls)
    for call in calls:
        (first_answer,) = [c for c in mapping[call]["children"]]
        (block,) = s.entry(first_answer).payload.tool_results
        assert block.tool_use_id == call
        assert mapping[call]["message"]["content"]["text"] == \
            s.entry(call).payload.tool_uses[0].input["code"]
    openai_chat.validate(openai_chat.dump(msgs))


def test_a_file_without_mapping_is_refused_and_nothing_is_imported(tmp_path: Path) -> None:
    convs = conversations(GPT / "LibreChat_via_Apollo_ui__chatgpt-export.json")
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps([convs[0], {"title": "broken"}]))
    store = tl.open_store(tmp_path / "store")
    with pytest.raises(tl.UserError, match=r"conversations\.json: conversation 1 has no "
                                           r"\"mapping\" object"):
        importing.import_path(store, "chatgpt_export", bad)
    assert store.list() == []


def test_import_session_refuses_a_file_of_many_conversations() -> None:
    path = GPT / "LibreChat_via_Apollo_ui__chatgpt-export.json"
    with pytest.raises(tl.UserError, match="holds 2 conversations; use import_sessions"):
        chatgpt_export.import_session(tl.open_store("memory://"), path)
    assert len(chatgpt_export.import_sessions(tl.open_store("memory://"), path)) == 2
