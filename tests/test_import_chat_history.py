"""chat_history.json, old and wrapped layouts, built from a real Responses request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.cli.main import cli
from threadline.formats import chat_history, openai_responses

CASSETTE = (
    REALDATA
    / "api_openai_responses"
    / "pydantic_pydantic-ai__test_openai_responses__test_openai_responses_thinking_with_"
    "tool_calls.yaml"
)


def real_items() -> list[dict[str, Any]]:
    """The input of the cassette's second request: user, reasoning, call and its output."""
    doc = yaml.safe_load(CASSETTE.read_text())
    items: list[dict[str, Any]] = doc["interactions"][1]["request"]["parsed_body"]["input"]
    return items


def expected_type(item: dict[str, Any]) -> str:
    if item.get("type") in ("reasoning", "function_call", "function_call_output"):
        return str(item["type"])
    if item.get("role") == "user":
        return "input_text"
    return "message"


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat_history.json"
    path.write_text(json.dumps(real_items()))
    return path


def test_reading_an_old_file_migrates_it_after_a_backup(old_file: Path) -> None:
    original = old_file.read_bytes()
    entries = chat_history.read(old_file)
    backups = sorted(old_file.parent.glob("chat_history.json.*.bak"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == original
    on_disk = json.loads(old_file.read_text())
    assert on_disk == entries
    assert [e["content"] for e in on_disk] == real_items()
    assert [e["type"] for e in on_disk] == [expected_type(i) for i in real_items()]
    assert [e["size"] for e in on_disk] == [
        len(json.dumps(i, ensure_ascii=False).encode()) for i in real_items()
    ]
    # a wrapped file is read as it is: no second backup, no rewrite
    assert chat_history.read(old_file) == entries
    assert len(sorted(old_file.parent.glob("chat_history.json.*.bak"))) == 1


def test_migrate_reports_the_backup_and_leaves_wrapped_files_alone(old_file: Path) -> None:
    backup = chat_history.migrate(old_file)
    assert backup is not None and Path(backup).read_text() == json.dumps(real_items())
    assert chat_history.migrate(old_file) is None


def test_unwrapping_gives_back_the_openai_responses_items(old_file: Path) -> None:
    entries = chat_history.read(old_file)
    assert chat_history.unwrap(entries) == real_items()
    assert chat_history.load(old_file) == openai_responses.load(real_items())


def test_both_layouts_import_as_the_same_messages(old_file: Path, tmp_path: Path) -> None:
    store = tl.open_store("memory://")
    (old,) = importing.import_path(store, "auto", old_file)
    assert json.loads(old_file.read_text()) == real_items()  # importing never migrates
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps([chat_history.wrap(i) for i in real_items()]))
    (new,) = importing.import_path(store, "auto", wrapped)
    strip = [m.content for m in old.context().messages]
    assert [m.content for m in new.context().messages] == strip
    assert new.path_ids() == [e["id"] for e in json.loads(wrapped.read_text())]
    assert [m.role for m in old.context().messages] == ["user", "assistant", "assistant", "tool"]


def test_export_writes_the_wrapped_layout_with_the_entry_ids(tmp_path: Path) -> None:
    wrapped = tmp_path / "wrapped.json"
    entries = [chat_history.wrap(i) for i in real_items()]
    wrapped.write_text(json.dumps(entries))
    runner = CliRunner()
    store = str(tmp_path / "store")
    out = runner.invoke(cli, ["--store", store, "import", "--json", "chat_history", str(wrapped)])
    assert out.exit_code == 0, out.output
    sid = json.loads(out.stdout)["session_id"]
    res = runner.invoke(
        cli,
        [
            "--store",
            store,
            "export",
            sid,
            "--format",
            "chat_history",
            "-o",
            str(tmp_path / "out.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    back = json.loads((tmp_path / "out.json").read_text())
    assert [(e["id"], e["ts"], e["type"]) for e in back] == [
        (e["id"], e["ts"], e["type"]) for e in entries
    ]
    assert chat_history.unwrap(back) == openai_responses.dump(openai_responses.load(real_items()))


def test_load_of_dump_is_the_identity_on_messages() -> None:
    msgs = openai_responses.load(real_items())
    assert chat_history.load(chat_history.dump(msgs)) == msgs


def test_a_mixed_file_is_refused_naming_the_item(tmp_path: Path) -> None:
    path = tmp_path / "chat_history.json"
    items = real_items()
    path.write_text(json.dumps([chat_history.wrap(items[0]), items[1]]))
    with pytest.raises(
        tl.UserError,
        match=r"chat_history\.json: at \$\[0\]: the item looks like a wrapped "
        "entry but the file mixes layouts",
    ):
        chat_history.import_session(tl.open_store("memory://"), path)
