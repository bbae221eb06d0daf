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
from threadline.model.content import ImageBlock, ThinkingBlock

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
                node["children"], key=lambda c: mapping[c]["message"]["create_time"]
            )
        assert s.leaf_id == conv["current_node"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_context_is_the_current_branch(path: Path) -> None:
    store = tl.open_store("memory://")
    for s, conv in zip(
        importing.import_path(store, "chatgpt_export", path), conversations(path), strict=True
    ):
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
            for r, m in zip(roles, ctx.messages, strict=True)
        ]
        for k, m in zip(want, ctx.messages, strict=True):
            parts = mapping[k]["message"]["content"].get("parts")
            if parts and all(isinstance(p, str) for p in parts):
                assert m.text == "\n".join(parts)


def test_edited_and_regenerated_branches_are_siblings() -> None:
    (conv,) = conversations(GPT / "LibreChat_via_Apollo_ui__chatgpt-tree.json")
    forks = {k: n["children"] for k, n in conv["mapping"].items() if len(n["children"]) > 1}
    assert len(forks) == 2
    (s,) = importing.import_path(
        tl.open_store("memory://"), "auto", GPT / "LibreChat_via_Apollo_ui__chatgpt-tree.json"
    )
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
    calls = [
        k
        for k, n in mapping.items()
        if n["message"]
        and n["message"]["author"]["role"] == "assistant"
        and n["message"]["recipient"] != "all"
    ]
    assert sorted(u.id for m in msgs for u in m.tool_uses) == sorted(calls)
    for call in calls:
        (first_answer,) = [c for c in mapping[call]["children"]]
        (block,) = s.entry(first_answer).payload.tool_results
        assert block.tool_use_id == call
        assert (
            mapping[call]["message"]["content"]["text"]
            == s.entry(call).payload.tool_uses[0].input["code"]
        )
    openai_chat.validate(openai_chat.dump(msgs))


def test_a_file_without_mapping_is_refused_and_nothing_is_imported(tmp_path: Path) -> None:
    convs = conversations(GPT / "LibreChat_via_Apollo_ui__chatgpt-export.json")
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps([convs[0], {"title": "broken"}]))
    store = tl.open_store(tmp_path / "store")
    with pytest.raises(
        tl.UserError,
        match=r"conversations\.json: at \$\[1\]: conversation 1 has no "
        r"\"mapping\" object",
    ):
        importing.import_path(store, "chatgpt_export", bad)
    assert store.list() == []


def test_import_session_refuses_a_file_of_many_conversations() -> None:
    path = GPT / "LibreChat_via_Apollo_ui__chatgpt-export.json"
    with pytest.raises(tl.UserError, match="holds 2 conversations; use import_sessions"):
        chatgpt_export.import_session(tl.open_store("memory://"), path)
    assert len(chatgpt_export.import_sessions(tl.open_store("memory://"), path)) == 2


def node(
    key: str,
    parent: str | None,
    children: list[str],
    role: str | None,
    content: dict[str, Any] | None,
    t: float,
    **msg: Any,
) -> dict[str, Any]:
    message = (
        None
        if role is None
        else {
            "id": key,
            "author": {"role": role, "name": msg.pop("name", None), "metadata": {}},
            "create_time": t,
            "content": content,
            "recipient": msg.pop("recipient", "all"),
            "metadata": msg.pop("metadata", {}),
            **msg,
        }
    )
    return {"id": key, "parent": parent, "children": children, "message": message}


# Shapes of ChatGPT content types the real samples lack (image prompts, o1 thoughts, the python
# tool), written from the export's documented structure.
SYNTHETIC = {
    "id": "synthetic",
    "title": "shapes",
    "create_time": 1700000000.0,
    "current_node": "a2",
    "mapping": {
        "root": node("root", None, ["u1"], None, None, 0),
        "u1": node(
            "u1",
            "root",
            ["th"],
            "user",
            {
                "content_type": "multimodal_text",
                "parts": [
                    {
                        "content_type": "image_asset_pointer",
                        "asset_pointer": "file-service://file-1",
                        "width": 10,
                        "height": 10,
                    },
                    "what is this?",
                ],
            },
            1700000001.0,
        ),
        "th": node(
            "th",
            "u1",
            ["c1"],
            "assistant",
            {
                "content_type": "thoughts",
                "thoughts": [{"summary": "Looking", "content": "It looks like a cat."}],
            },
            1700000002.0,
        ),
        "c1": node(
            "c1",
            "th",
            ["o1"],
            "assistant",
            {"content_type": "code", "language": "python", "text": "print(1)"},
            1700000003.0,
            recipient="python",
        ),
        "o1": node(
            "o1",
            "c1",
            ["a2"],
            "tool",
            {"content_type": "execution_output", "text": "1"},
            1700000004.0,
            name="python",
        ),
        "a2": node(
            "a2",
            "o1",
            [],
            "assistant",
            {"content_type": "text", "parts": ["A cat."]},
            1700000005.0,
            metadata={"model_slug": "o1"},
        ),
    },
}


def test_images_thoughts_and_the_python_tool_map_to_blocks() -> None:
    mapping = SYNTHETIC["mapping"]
    (s,) = importing.import_path(
        tl.open_store("memory://"), "chatgpt_export", json.dumps(SYNTHETIC)
    )
    msgs = list(s.context().messages)
    assert s.context().view.ids() == ["u1", "th", "c1", "o1", "a2"]
    pointer = mapping["u1"]["message"]["content"]["parts"][0]["asset_pointer"]
    (img, _) = msgs[0].content
    assert isinstance(img, ImageBlock) and img.image.source.data == pointer
    assert msgs[0].text == "what is this?"
    (th,) = msgs[1].content
    assert isinstance(th, ThinkingBlock)
    assert th.thinking.content == mapping["th"]["message"]["content"]["thoughts"][0]["content"]
    (call,) = msgs[2].tool_uses
    assert (call.id, call.name, call.input) == ("c1", "python", {"code": "print(1)"})
    (result,) = msgs[3].tool_results
    assert (result.tool_use_id, result.content) == ("c1", "1")
    assert msgs[4].model == "o1"


def test_a_write_failing_midway_removes_the_sessions_already_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = GPT / "LibreChat_via_Apollo_ui__chatgpt-export.json"
    store = tl.open_store(tmp_path / "s")
    real = store.backend.create_log  # type: ignore[attr-defined]
    calls: list[str] = []

    def flaky(header: Any, lines: list[bytes]) -> Any:
        calls.append(header.id)
        if len(calls) == 2:
            raise tl.StoreError("disk full")
        return real(header, lines)

    monkeypatch.setattr(store.backend, "create_log", flaky)
    with pytest.raises(tl.StoreError, match="disk full"):
        chatgpt_export.import_sessions(store, path)
    assert len(calls) == 2
    assert store.list() == []
    assert not store.exists(calls[0])


def test_a_tool_message_in_a_parent_cycle_is_imported_without_hanging() -> None:
    # found by bench/fuzz.py: the search for the call a tool message answers followed a
    # parent cycle of non-message nodes forever
    conv = {
        "title": "cycle",
        "mapping": {
            "a": {"id": "a", "parent": "b", "children": ["b"], "message": None},
            "b": {"id": "b", "parent": "a", "children": ["t"], "message": None},
            "t": {
                "id": "t",
                "parent": "b",
                "children": [],
                "message": {
                    "author": {"role": "tool"},
                    "content": {"content_type": "text", "parts": ["result"]},
                },
            },
        },
        "current_node": "t",
    }
    (draft,) = importing.prepare("chatgpt_export", json.dumps([conv]).encode(), name="c.json")
    kinds = {r["id"]: r["type"] for r in map(json.loads, draft.lines())}
    assert kinds["t"] == "message"
    assert importing.messages_of(draft)[-1].text == "result"
