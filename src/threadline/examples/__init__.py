"""Example sessions shipped with threadline: real transcripts, marked as examples.

The files under ``data/`` are copied byte for byte from public repositories (licences and sources
in ``data/NOTICE.md``). :func:`import_examples` converts them with threadline's importers into a
store, so a first run of ``threadline web`` on an empty store has something real to show: a pi
coding-agent session, a branched ChatGPT conversation and two Claude Code sessions (one with
sub-agent sidechains).
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib import resources
from typing import Any

import msgspec

from threadline.errors import UserError


class Example(msgspec.Struct, frozen=True, kw_only=True):
    """One shipped example: its file, the importer format, where it came from."""

    file: str
    format: str
    title: str
    source: str
    licence: str


EXAMPLES: tuple[Example, ...] = (
    Example(
        file="LibreChat_via_Apollo_ui__chatgpt-tree.json",
        format="chatgpt_export",
        title="ChatGPT conversation with branches (edited prompt, regenerated answer)",
        source="ZhangChunXian/Apollo_ui@6bb8e234ae66 "
        "api/server/utils/import/__data__/chatgpt-tree.json (LibreChat)",
        licence="MIT",
    ),
    Example(
        file="badlogic_pi-mono__large-session.jsonl",
        format="pi",
        title="pi coding-agent session",
        source="badlogic/pi-mono@83378aad7e74 "
        "packages/coding-agent/test/fixtures/large-session.jsonl",
        licence="MIT",
    ),
    Example(
        file="marot_spotter__short.jsonl",
        format="claude_code",
        title="Claude Code session (short)",
        source="marot/spotter@8cc42b0bd39d test/fixtures/transcripts/short.jsonl",
        licence="MIT",
    ),
    Example(
        file="d-kimuson_claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        format="claude_code",
        title="Claude Code session with sub-agent sidechains",
        source="d-kimuson/claude-code-viewer@9367cf006be9 mock-global-claude-dir/projects/"
        "sample-project/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        licence="MIT",
    ),
)


def path(example: Example) -> Any:
    """The packaged file of ``example`` (a Traversable; ``str()`` it for a filesystem path)."""
    return resources.files("threadline.examples") / "data" / example.file


def _importing() -> Any:
    try:
        return importlib.import_module("threadline.importing")
    except ModuleNotFoundError as exc:
        if exc.name != "threadline.importing":
            raise
        return None


def available() -> list[Example]:
    """The examples this installation can import (their importer is installed)."""
    importing = _importing()
    if importing is None:
        return []
    out = []
    for ex in EXAMPLES:
        target = importing.FORMATS.get(ex.format)
        if target is not None and importlib.util.find_spec(target) is not None:
            out.append(ex)
    return out


def importable() -> bool:
    """True when at least one example can be imported here."""
    return bool(available())


def import_examples(store: Any) -> list[str]:
    """Import every available example into ``store``; returns the new session ids.

    Each session's header metadata carries ``{"example": {"title", "source", "licence"}}``, so
    a viewer can mark it as an example. Each file is written in one atomic step by the importer.
    """
    importing = _importing()
    examples = available()
    if importing is None or not examples:
        raise UserError(
            "The importers the examples need are not installed; "
            "import your own transcripts with 'threadline import'"
        )
    created: list[str] = []
    for ex in examples:
        with resources.as_file(path(ex)) as file:
            drafts = importing.module(ex.format).parse(str(file), name=ex.file)
            for draft in drafts:
                draft.metadata["example"] = {
                    "title": ex.title,
                    "source": ex.source,
                    "licence": ex.licence,
                }
            created.extend(s.id for s in importing.write(store, drafts))
    return created
