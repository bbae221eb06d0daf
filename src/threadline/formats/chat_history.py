"""``chat_history.json``: an agent's OpenAI Responses history, plain or wrapped with metadata.

Two layouts of the same file exist:

- the **old** one: a JSON list of Responses API items, exactly what the API takes as ``input``;
- the **wrapped** one: a list of ``{"id", "ts", "type", "size", "content"}`` entries, where
  ``content`` is one unchanged Responses item, ``id`` a UUID, ``ts`` an ISO 8601 timestamp,
  ``size`` the item's JSON size in bytes and ``type`` what the item is: ``input_text`` (a user
  message), ``output_text`` (an assistant text message), ``reasoning``, ``function_call``,
  ``function_call_output`` or ``message`` (any other message item).

Unwrapping a wrapped file (``get_history()`` in the original manager) gives the old layout, which
is the :mod:`threadline.formats.openai_responses` dump; so :func:`load` reads either layout and
:func:`dump` writes the wrapped one. :func:`read` migrates an old file in place the way the
original manager does on first load: it first writes a timestamped backup beside it
(``chat_history.json.<YYYYmmddTHHMMSS>.bak``), then replaces the file atomically.

Importing (:func:`parse`) never changes the source file: each item becomes one message entry,
chained in order, with the wrapper's ``id`` and ``ts`` as entry id and timestamp (``L<n>`` and
the import time for old files).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from threadline.errors import UserError
from threadline.formats import openai_responses
from threadline.importing import (
    Draft,
    ImportReport,
    Source,
    at,
    bad,
    json_at,
    messages_of,
    read_json,
    source_name,
    write,
)
from threadline.model.content import Message
from threadline.model.entries import MessageEntry, now

NAME = "chat_history"
ENTRY_TYPES = (
    "input_text",
    "output_text",
    "reasoning",
    "function_call",
    "function_call_output",
    "message",
)
_WRAPPER_KEYS = frozenset({"id", "ts", "type", "size", "content"})


def entry_type(item: dict[str, Any]) -> str:
    """The wrapped ``type`` of a Responses item (the item's kind, not its role)."""
    kind = item.get("type")
    if kind in ("reasoning", "function_call", "function_call_output"):
        return str(kind)
    content = item.get("content")
    first = content[0] if isinstance(content, list) and content else None
    first_type = first.get("type") if isinstance(first, dict) else None
    role = item.get("role")
    if role == "user" and (first_type == "input_text" or isinstance(content, str)):
        return "input_text"
    if role == "assistant" and first_type == "output_text" and kind is None:
        return "output_text"
    return "message"


def item_size(item: Any) -> int:
    """The JSON size of an item in bytes, as the wrapper's ``size`` records it."""
    return len(json.dumps(item, ensure_ascii=False).encode("utf-8"))


def wrap(item: dict[str, Any], *, id: str | None = None, ts: str | None = None) -> dict[str, Any]:
    """One Responses item in its metadata envelope."""
    return {
        "id": id or str(uuid.uuid4()),
        "ts": ts or datetime.now().isoformat(timespec="microseconds"),
        "type": entry_type(item),
        "size": item_size(item),
        "content": item,
    }


def is_wrapped(entries: Any) -> bool:
    """True for the wrapped layout (an empty list counts as wrapped: nothing to migrate)."""
    if not isinstance(entries, list):
        return False
    return all(
        isinstance(e, dict) and {"id", "type", "content"} <= e.keys() and e.keys() <= _WRAPPER_KEYS
        for e in entries
    )


def unwrap(entries: Sequence[dict[str, Any]]) -> list[Any]:
    """The plain Responses items of wrapped entries (``get_history()``)."""
    return [e["content"] for e in entries]


def _items(doc: Any, label: str) -> tuple[list[Any], list[dict[str, Any]] | None]:
    """(items, wrappers or None for the old layout); refuses anything else."""
    base: tuple[str, ...] = ()
    if isinstance(doc, dict) and isinstance(doc.get("content"), list) and "id" not in doc:
        doc = doc["content"]
        base = ("content",)
    if not isinstance(doc, list):
        raise bad(
            label,
            json_at(),
            "a chat history is a JSON list of Responses items or of "
            '{"id","ts","type","size","content"} entries',
        )
    if doc and is_wrapped(doc):
        return [e["content"] for e in doc], doc
    for k, item in enumerate(doc):
        if not isinstance(item, dict):
            raise bad(label, json_at(*base, k), "the item is not an object")
        if "content" in item and {"id", "type"} <= item.keys() and "role" not in item:
            raise bad(
                label,
                json_at(*base, k),
                "the item looks like a wrapped entry but the file mixes "
                "layouts; migrate or fix it by hand",
            )
    return list(doc), None


def load(data: Any) -> list[Message]:
    """Messages from either layout (a path, JSON text, or the parsed list)."""
    label = source_name(data) if isinstance(data, (str, bytes, os.PathLike)) else "<data>"
    items, _ = _items(read_json(data, label), label)
    return openai_responses.load(items)


def dump(
    messages: Sequence[Message],
    *,
    ids: Sequence[str] | None = None,
    timestamps: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Wrapped entries for ``messages``. With ``ids`` (one per message, e.g. the context's view
    ids) the entries keep them: the first item of message ``i`` gets ``ids[i]``, later items of
    the same message ``ids[i]:<k>``; ``timestamps`` likewise give each entry's ``ts``."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        kept = (m.provider_details or {}).get(NAME)
        items = openai_responses.shape([m])
        for k, item in enumerate(items):
            eid = None if ids is None else (ids[i] if k == 0 else f"{ids[i]}:{k}")
            entry = wrap(item, id=eid, ts=None if timestamps is None else timestamps[i])
            if isinstance(kept, dict) and len(items) == 1:
                # an imported entry keeps the type and size it was wrapped with
                entry.update({key: kept[key] for key in ("type", "size") if key in kept})
            out.append(entry)
    return out


# -- the file on disk -----------------------------------------------------------------------


def read(path: str | os.PathLike[str], *, migrate: bool = True) -> list[dict[str, Any]]:
    """The wrapped entries of a ``chat_history.json``; an old-layout file is migrated in place
    (backup first) unless ``migrate=False``, in which case it is wrapped in memory only."""
    label = str(path)
    if not Path(path).exists():
        return []
    doc = read_json(path, label)
    items, wrapped = _items(doc, label)
    if wrapped is not None:
        return wrapped
    entries = [wrap(item) for item in items]
    if migrate and items:
        backup(path)
        save(path, entries)
    return entries


def migrate(path: str | os.PathLike[str]) -> str | None:
    """Migrate an old-layout file to the wrapped one; returns the backup's path, or None when
    the file was already wrapped."""
    label = str(path)
    items, wrapped = _items(read_json(path, label), label)
    if wrapped is not None or not items:
        return None
    kept = backup(path)
    save(path, [wrap(item) for item in items])
    return kept


def backup(path: str | os.PathLike[str]) -> str:
    """Copy the file to ``<name>.<YYYYmmddTHHMMSS[_n]>.bak`` beside it; returns the copy's path."""
    src = Path(path)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    dest = src.with_name(f"{src.name}.{stamp}.bak")
    n = 1
    while dest.exists():
        dest = src.with_name(f"{src.name}.{stamp}_{n}.bak")
        n += 1
    _atomic_write(dest, src.read_bytes())
    return str(dest)


def save(path: str | os.PathLike[str], entries: Sequence[dict[str, Any]]) -> None:
    """Write wrapped entries atomically (temp file, fsync, rename)."""
    data = json.dumps(list(entries), ensure_ascii=False, indent=2).encode("utf-8")
    _atomic_write(Path(path), data)


def _atomic_write(dest: Path, data: bytes) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, dest)
    dfd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def statistics(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The seed's statistics of wrapped entries: ``total_entries``, ``total_size_kb``,
    ``stats_by_type`` (``{type: {"count", "size"}}``, sizes in bytes), ``oldest``, ``newest``
    and ``size_distribution`` (entries per size bucket)."""
    by_type: dict[str, dict[str, int]] = {}
    buckets = {"<1KB": 0, "1-10KB": 0, "10-100KB": 0, ">=100KB": 0}
    total = 0
    for e in entries:
        size = int(e.get("size") or item_size(e.get("content")))
        total += size
        row = by_type.setdefault(str(e.get("type", "message")), {"count": 0, "size": 0})
        row["count"] += 1
        row["size"] += size
        key = (
            "<1KB"
            if size < 1024
            else "1-10KB"
            if size < 10240
            else "10-100KB"
            if size < 102400
            else ">=100KB"
        )
        buckets[key] += 1
    stamps = sorted(str(e["ts"]) for e in entries if e.get("ts"))
    return {
        "total_entries": len(entries),
        "total_size_kb": round(total / 1024, 2),
        "stats_by_type": dict(sorted(by_type.items())),
        "oldest": stamps[0] if stamps else None,
        "newest": stamps[-1] if stamps else None,
        "size_distribution": buckets,
    }


class ChatHistoryManager:
    """A ``chat_history.json`` file managed the way the wrapped-chat-history seed describes.

    The file holds wrapped entries; an old-layout file (a plain list of Responses items) is
    migrated on first load: a timestamped backup is written beside it, the file is replaced
    atomically, and one line saying so goes to ``echo`` (default: standard error). Every change
    re-reads the file first and writes it back atomically, so entries another process appended
    are kept. ``get_history()`` gives the plain items OpenAI expects, unchanged.
    """

    def __init__(
        self, path: str | os.PathLike[str] = "chat_history.json", *, echo: Any = None
    ) -> None:
        self.path = Path(path)
        self._echo = echo if echo is not None else (lambda line: print(line, file=sys.stderr))
        self.migrated_backup: str | None = None
        self._entries = self._load()

    def _load(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        label = str(self.path)
        items, wrapped = _items(read_json(self.path, label), label)
        if wrapped is not None:
            return wrapped
        entries = [wrap(item) for item in items]
        if entries:
            self.migrated_backup = backup(self.path)
            save(self.path, entries)
            self._echo(
                f"Migrated {self.path} to the wrapped format: {len(entries)} entries "
                f"wrapped with id, ts, type and size; backup at {self.migrated_backup}"
            )
        return entries

    def _write(self, entries: list[dict[str, Any]]) -> None:
        save(self.path, entries)
        self._entries = entries

    def get_wrapped_history(self) -> list[dict[str, Any]]:
        """Every wrapped entry ``{"id", "ts", "type", "size", "content"}``, oldest first."""
        self._entries = self._load()
        return [dict(e) for e in self._entries]

    def get_history(self) -> list[Any]:
        """The plain Responses items (each entry's ``content``), as OpenAI takes them."""
        return unwrap(self.get_wrapped_history())

    def add_entry(self, entry: dict[str, Any]) -> str:
        """Wrap one Responses item, save it, and return its new id."""
        return self.append_entries([entry])[0]

    def append_entries(self, entries: Sequence[dict[str, Any]]) -> list[str]:
        """Wrap and save several items; returns their ids in order."""
        for k, item in enumerate(entries):
            if not isinstance(item, dict):
                raise UserError(
                    f"Entry {k} is a {type(item).__name__}; give Responses items "
                    "(JSON objects) to add_entry / append_entries"
                )
        wrapped = [wrap(item) for item in entries]
        self._write([*self._load(), *wrapped])
        return [w["id"] for w in wrapped]

    def get_entry_by_id(self, entry_id: str) -> dict[str, Any] | None:
        """The whole wrapped entry with this id, or None."""
        return next((dict(e) for e in self._load() if e.get("id") == entry_id), None)

    def get_metadata(self) -> list[dict[str, Any]]:
        """``id``, ``ts``, ``type`` and ``size`` of every entry, without the content."""
        return [{k: e.get(k) for k in ("id", "ts", "type", "size")} for e in self._load()]

    def get_stats(self) -> dict[str, Any]:
        """:func:`statistics` of the file's entries."""
        return statistics(self._load())

    def delete_entries_by_ids(self, entry_ids: Sequence[str]) -> int:
        """Delete the entries with these ids; returns how many were deleted (unknown ids are
        ignored). The file is rewritten atomically; nothing else changes."""
        doomed = set(entry_ids)
        entries = self._load()
        kept = [e for e in entries if e.get("id") not in doomed]
        if len(kept) != len(entries):
            self._write(kept)
        return len(entries) - len(kept)

    def delete_all(self) -> int:
        """Delete every entry in one step; returns how many there were."""
        n = len(self._load())
        self._write([])
        return n


def migrate_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Migrate ``path`` explicitly (backup first) and return what ``threadline
    migrate-chat-history`` prints: ``migrated``, ``backup``, ``path`` and :func:`statistics`."""
    if not Path(path).exists():
        raise UserError(f"{str(path)!r} does not exist; give the path of a chat_history.json")
    kept = migrate(path)
    entries = read(path, migrate=False)
    return {"path": str(path), "migrated": kept is not None, "backup": kept, **statistics(entries)}


# -- importing ------------------------------------------------------------------------------


def parse(source: Source, *, name: str | None = None) -> list[Draft]:
    """A chat history (either layout) as one draft; the source file is left as it is."""
    label = source_name(source, name)
    doc = read_json(source, label)
    items, wrapped = _items(doc, label)
    base: tuple[str, ...] = ("content",) if isinstance(doc, dict) else ()
    report = ImportReport(format=NAME, source=label)
    draft = Draft(
        report,
        metadata={"source": {"format": NAME, "layout": "old" if wrapped is None else "wrapped"}},
    )
    stamp = now()
    prev: str | None = None
    for k, item in enumerate(items):
        at(json_at(*base, k, "content") if wrapped is not None else json_at(*base, k))
        env = wrapped[k] if wrapped is not None else None
        try:
            msgs = openai_responses.load([item])
        except UserError as exc:
            raise bad(label, None, f"{exc}") from None
        if len(msgs) != 1:
            raise bad(label, None, "the item is not one Responses item")
        msg = msgs[0]
        if env is not None:
            extra = {key: env[key] for key in ("type", "size") if key in env}
            msg.provider_details = {**(msg.provider_details or {}), NAME: extra}
        wanted = str(env["id"]) if env is not None else f"L{k + 1}"
        ts = str(env.get("ts")) if env is not None and env.get("ts") else stamp
        prev = draft.add(
            MessageEntry(id=draft.unique_id(wanted), parent_id=prev, timestamp=ts, message=msg)
        )
    if draft.created is None and wrapped:
        stamps = [str(e["ts"]) for e in wrapped if e.get("ts")]
        draft.created = min(stamps) if stamps else None
    return [draft]


def import_session(store: Any, source: Source, *, session_id: str | None = None) -> Any:
    """Import a chat history as a new threadline session (the file is not changed)."""
    (draft,) = parse(source)
    (session,) = write(store, [draft], [session_id])
    return session


def messages(source: Source) -> list[Message]:
    """The imported session's messages (as :func:`load`, but one message per item)."""
    (draft,) = parse(source)
    return messages_of(draft)


__all__ = [
    "ENTRY_TYPES",
    "ChatHistoryManager",
    "backup",
    "dump",
    "entry_type",
    "import_session",
    "is_wrapped",
    "item_size",
    "load",
    "messages",
    "migrate",
    "migrate_report",
    "parse",
    "read",
    "save",
    "statistics",
    "unwrap",
    "wrap",
]
