"""``Session.repair()``: interrupted tool calls answered in the log, previewed, reversible
(docs/operations.md, "Repair")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import threadline as tl
from conftest import REALDATA
from threadline import formats, importing
from threadline.errors import UserError
from threadline.model.content import Message, text, tool_result, tool_use
from threadline.model.pairing import INTERRUPTED
from threadline.repair import RepairedCall

TRANSCRIPTS = [
    (fmt, p)
    for folder, fmt in (
        ("claude_code", "claude_code"),
        ("pi_session", "pi"),
        ("chatgpt_export", "chatgpt_export"),
        ("codex_cli", "codex"),
        ("google_adk", "google_adk"),
    )
    for p in sorted((REALDATA / folder).iterdir())
    if p.suffix != ".json" or folder != "pi_session"
]


def _imported() -> list[tuple[str, tl.Session]]:
    found = []
    for fmt, path in TRANSCRIPTS:
        for s in importing.import_path(tl.open_store("memory://"), fmt, path):
            found.append((path.name, s))
    return found


def test_the_real_transcripts_with_interrupted_calls_are_the_two_pi_sessions() -> None:
    dangling = {name: len(s.repair().calls) for name, s in _imported() if s.repair().calls}
    assert dangling == {
        "badlogic_pi-mono__before-compaction.jsonl": 2,
        "badlogic_pi-mono__large-session.jsonl": 18,
    }


@pytest.mark.parametrize(
    "name", ["badlogic_pi-mono__before-compaction.jsonl", "badlogic_pi-mono__large-session.jsonl"]
)
def test_a_repaired_real_session_is_accepted_strictly_and_undo_restores_it(
    name: str, tmp_path: Path
) -> None:
    store = tl.open_store(tmp_path)
    (s,) = importing.import_path(store, "pi", REALDATA / "pi_session" / name)
    original = s.context()
    entries = len(s.entries())
    preview = s.repair()
    assert not preview.applied and preview.op_ids == []
    assert len(s.entries()) == entries  # a preview writes nothing
    for fmt in formats.PROVIDER_FORMATS:
        with pytest.raises(UserError, match="answered_dangling_call"):
            formats.dump_context(fmt, s.context().messages, strict=True)

    done = s.repair(apply=True)
    assert done.applied and done.calls == preview.calls
    assert len(done.op_ids) == len({c.position for c in done.calls})
    reopened = store.open(s.id)  # written to the log, not only in memory
    for session in (s, reopened):
        messages = session.context().messages
        for fmt in formats.PROVIDER_FORMATS:
            formats.dump_context(fmt, messages, strict=True)
        assert session.repair().calls == []
    answers = [r for m in s.context().messages for r in m.tool_results if r.content == INTERRUPTED]
    assert sorted(r.tool_use_id for r in answers) == sorted(c.call_id for c in done.calls)
    assert all(r.is_error for r in answers)

    assert sorted(s.undo_repair()) == sorted(done.op_ids)
    assert list(s.context().messages) == list(original.messages)
    assert s.context().view.ids() == original.view.ids()
    assert list(store.open(s.id).context().messages) == list(original.messages)


def _split_turn_session() -> tl.Session:
    """Claude Code's shape: one turn's two parallel calls as two assistant messages; the first
    call's result never came (the user interrupted), the second's did."""
    s = tl.open_store("memory://").create()
    s.append_message("user", "look at a and b")
    s.append_message("assistant", [text("Reading both."), tool_use("a", "read", {"p": "a"})])
    s.append_message("assistant", [tool_use("b", "read", {"p": "b"})])
    s.append_message("tool", [tool_result("b", "B")])
    s.append_message("user", "stop, never mind")
    return s


def test_repair_answers_a_split_turn_right_after_its_last_assistant_message() -> None:
    s = _split_turn_session()
    ids = s.context().view.ids()
    done = s.repair(apply=True)
    assert done.calls == [
        RepairedCall(position=1, answer_after=2, entry_id=ids[1], call_id="a", name="read")
    ]
    roles = [(m.role, [r.tool_use_id for r in m.tool_results]) for m in s.context().messages]
    assert roles == [
        ("user", []),
        ("assistant", []),
        ("assistant", []),
        ("tool", ["a"]),
        ("tool", ["b"]),
        ("user", []),
    ]
    assert s.operations()[0].kind == "insert"
    for fmt in formats.PROVIDER_FORMATS:
        adjusted = formats.dump_context(fmt, s.context().messages, report=True).adjustments
        # the split turn itself stays in the log: OpenAI chat still gets it merged
        assert [a.kind for a in adjusted] == (["merged_turn"] if fmt == "openai_chat" else [])


def test_undo_repair_refuses_an_op_that_is_not_a_repair() -> None:
    s = _split_turn_session()
    op = s.insert(0, [Message(role="user", content=[text("note")])])
    with pytest.raises(UserError, match=f"Operation '{op}' is not a repair"):
        s.undo_repair([op])


def test_a_session_without_interrupted_calls_has_nothing_to_repair() -> None:
    s = tl.open_store("memory://").create()
    s.append_message("user", "hi")
    s.append_message("assistant", "hello")
    assert s.repair(apply=True).calls == []
    assert s.repair(apply=True).applied is False


# -- CLI ------------------------------------------------------------------------------------


def _cli_session(tmp_path: Path) -> tuple[str, list[str]]:
    s = tl.open_store(tmp_path).create()
    s.append_message("user", "look at a")
    s.append_message("assistant", [tool_use("a", "read", {"p": "a"})])
    s.append_message("user", "stop, never mind")
    s.close()
    return s.id, ["--store", str(tmp_path)]


def test_cli_repair_previews_then_applies_then_undoes(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    sid, store = _cli_session(tmp_path)
    call = tl.open_store(tmp_path).open(sid).context().view.ids()[1]
    run = CliRunner()
    res = run.invoke(cli, [*store, "repair", sid])
    assert res.exit_code == 0, res.output
    assert res.output == (
        f"Would answer 1 interrupted tool call(s):\n  [1] a (read) in {call}\n"
        f"Preview only: run `threadline repair {sid} --apply` to write them.\n"
    )
    res = run.invoke(cli, [*store, "repair", sid, "--apply"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-1] == (
        f"Wrote 1 insert operation(s); undo with `threadline repair {sid} --undo`."
    )
    res = run.invoke(cli, [*store, "context", sid, "--format", "openai_chat", "--strict"])
    assert res.exit_code == 0, res.output
    assert [m["role"] for m in json.loads(res.output)] == ["user", "assistant", "tool", "user"]
    res = run.invoke(cli, [*store, "repair", sid, "--undo", "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.output)["reverted"]) == 1
    res = run.invoke(cli, [*store, "repair", sid])
    assert res.output.startswith("Would answer 1 interrupted tool call(s):")


def test_cli_context_explains_adjustments_and_strict_refuses(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    sid, store = _cli_session(tmp_path)
    run = CliRunner()
    res = run.invoke(cli, [*store, "context", sid, "--format", "anthropic", "--explain"])
    assert res.exit_code == 0, res.stderr
    assert res.stderr == (
        "adjusted [1] answered_dangling_call: tool call 'a' (read) has no "
        "result; answered as interrupted\n1 adjustment(s) for anthropic\n"
    )
    payload = json.loads(res.stdout)
    assert payload["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "a",
        "content": INTERRUPTED,
        "is_error": True,
    }
    res = run.invoke(cli, [*store, "context", sid, "--format", "anthropic", "--strict"])
    assert res.exit_code == 2
    assert "answered_dangling_call: tool call 'a' (read) has no result" in res.stderr
    res = run.invoke(
        cli, [*store, "context", sid, "--format", "anthropic", "--dangling", "drop", "--explain"]
    )
    assert [m["role"] for m in json.loads(res.stdout)["messages"]] == ["user"]
    assert "dropped_dangling_call" in res.stderr
    res = run.invoke(cli, [*store, "export", sid, "--format", "gemini", "--explain"])
    assert res.exit_code == 0, res.stderr
    assert res.stderr.endswith("1 adjustment(s) for gemini\n")
    res = run.invoke(cli, [*store, "export", sid, "--format", "gemini", "--strict"])
    assert res.exit_code == 2
