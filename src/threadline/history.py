"""Purge: deletion that really removes content from the store (DESIGN §3).

Everything else in threadline is append-only; purge is the one exception, for content that must
not be kept (a pasted secret, personal data, a request to be forgotten). :func:`purge` previews by
default and returns a :class:`PurgePlan`: the entries, their types and sizes, and what else leaves
the view with them (a tool call or result whose partner is purged). Executing it:

1. appends a ``purge`` meta record naming the entries (so a crash after this point still hides
   them, and the next purge finishes the job: see ``pending``);
2. rewrites the log atomically (temp file, fsync, rename, fsync of the directory) with each purged
   entry's payload replaced by ``{"purged": true}``: id, type, parent and timestamp stay, so the
   tree stays whole; unknown records and every other line are kept byte for byte;
3. removes the purged content from the store's other files: backups (``<id>.jsonl.*.bak``), torn
   tails (``<id>.jsonl.torn``), stale temp files and the listing cache of the JSONL store;
4. tells the search index to forget the entries: ``store.catalog.forget(session_id, entry_ids)``
   when the store's catalog is in use, and every hook registered with :func:`on_purge`.

A crash at any point leaves either the old file or the new one, never a mixture: the rename is the
only step that replaces the session file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from threadline.errors import Hint, NotFoundError, StoreError, UserError
from threadline.model.content import ROLES, Message
from threadline.model.content import text as text_block
from threadline.model.entries import (
    Purge,
    PurgedEntry,
    encode_record,
    envelope_decoder,
)
from threadline.store.base import LazyMessage

if TYPE_CHECKING:
    from threadline.state import SessionState

__all__ = ["PurgeItem", "PurgePlan", "on_purge", "purge"]

PurgeHook = Callable[[Any, str, list[str]], None]
"""``hook(store, session_id, entry_ids)``: called after entries were purged from a session."""

_hooks: list[PurgeHook] = []
_NEEDLE_MIN = 4  # shorter strings are too common to identify purged content in debris
_NEEDLE_MAX = 64
_PREFIX_MIN = 8  # a torn fragment ending with this much of a purged string is dropped too
# Schema words that occur in every message: never treated as purged content.
_VOCABULARY = frozenset(ROLES) | {
    "text",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "base64",
    "url",
    "end_turn",
    "stop",
    "length",
}


def on_purge(hook: PurgeHook) -> PurgeHook:
    """Register ``hook(store, session_id, entry_ids)`` to run after every executed purge (search
    indexes use it to forget the entries). Usable as a decorator; returns the hook."""
    if hook not in _hooks:
        _hooks.append(hook)
    return hook


class PurgeItem(msgspec.Struct, kw_only=True):
    """One entry of a purge plan."""

    id: str
    type: str
    bytes: int
    already_purged: bool = False


class PurgePlan(msgspec.Struct, kw_only=True):
    """What a purge removes (``executed=False``: a preview) or removed.

    ``entry_ids`` are the entries whose content goes (``pending`` ones included: named by the
    ``purge`` record of an interrupted purge, still on disk); ``bytes`` is their encoded size;
    ``leaves_view`` are the purged entries now in the current view and ``also_leaving_view`` the
    other messages that leave it with them (tool calls or results whose partner is purged);
    ``files`` are the other files of the store that will be (or were) cleaned. ``fingerprint``
    identifies the exact plan: it changes when the session changes in a way that matters.
    ``residue`` (after execution) names what the backend could not scrub, e.g. PostgreSQL's
    write-ahead log. ``derived`` are the compactions, branch summaries and context operations
    (digest, revise, insert) that hold purged content, found two ways: ``summarized`` are those
    whose source range covers a purged entry (a compaction: the path before its first kept
    entry; a branch summary: the abandoned path it summarized; a digest or revise: its range),
    whose summary (a revise: its messages) the purge replaces by :data:`SUMMARY_PURGED`; the
    others copied purged text word for word (a distinctive string of it), which the purge
    replaces by ``[purged]``, keeping the rest. Both kinds keep their place, so the session
    opens and builds a context as before.
    """

    session_id: str
    entry_ids: list[str]
    items: list[PurgeItem]
    bytes: int
    leaves_view: list[str]
    also_leaving_view: list[str]
    pending: list[str]
    files: list[str]
    executed: bool
    fingerprint: str
    residue: list[str] = msgspec.field(default_factory=list)
    derived: list[str] = msgspec.field(default_factory=list)
    summarized: list[str] = msgspec.field(default_factory=list)


# -- planning --------------------------------------------------------------------------------


def _targets(session: SessionState, entry_ids: Sequence[str] | None, all: bool) -> list[str]:
    if all and entry_ids:
        raise UserError("purge: give entry ids or all=True, not both")
    if all:
        return list(session.slots)
    if entry_ids is None or isinstance(entry_ids, str) or not list(entry_ids):
        raise UserError(
            f"purge: name the entries to purge from session '{session.id}' (or pass "
            "all=True to purge every entry)"
        )
    out: list[str] = []
    for eid in entry_ids:
        if eid not in session.slots:
            raise NotFoundError(
                f"Entry '{eid}' not found in session '{session.id}'",
                hint=Hint("list_entries", session.id),
            )
        if eid not in out:
            out.append(eid)
    return out


def _view_after(session: SessionState, gone: set[str]) -> list[str]:
    from threadline.context import build_view

    saved = session.purged
    session.purged = saved | gone
    try:
        return build_view(session, session.path_ids(), frozenset()).ids.tolist()
    finally:
        session.purged = saved


def _companion_files(session: SessionState) -> list[Path]:
    return [Path(p) for p in session.log.companion_files()]


def _is_purged(session: SessionState, entry_id: str) -> bool:
    # a purged message line loads as a lazy slot; decoding it tells
    return isinstance(session.record(entry_id), PurgedEntry)


def _plan(session: SessionState, entry_ids: Sequence[str] | None, all: bool) -> PurgePlan:
    targets = _targets(session, entry_ids, all)
    slots = session.slots
    items = [
        PurgeItem(
            id=e,
            type=slots[e].type,
            bytes=session.size(e),
            already_purged=_is_purged(session, e),
        )
        for e in targets
    ]
    pending = [
        e for e in session.purged if e in slots and not _is_purged(session, e) and e not in targets
    ]
    doomed = [i.id for i in items if not i.already_purged] + pending
    before = session.context().view.ids()
    gone = set(doomed)
    after = set(_view_after(session, gone)) if gone else set(before)
    leaves = [v for v in before if v in gone]
    also = [v for v in before if v not in after and v not in gone]
    files = [str(p) for p in _companion_files(session)]
    summarized = summaries_of(session, doomed)
    derived = sorted(set(_derived_copies(session, doomed)) | set(summarized))
    import hashlib  # ~3.5 MB of OpenSSL mapped: loaded on first use, not at import

    digest = hashlib.sha256()
    for part in (
        session.id,
        *doomed,
        "|",
        *(f"{i.id}:{i.bytes}" for i in items),
        "|",
        *derived,
        "|",
        *summarized,
    ):
        digest.update(part.encode() + b"\0")
    return PurgePlan(
        session_id=session.id,
        entry_ids=doomed,
        items=items,
        bytes=sum(map(session.size, doomed)),
        leaves_view=leaves,
        also_leaving_view=also,
        pending=sorted(pending),
        files=files,
        executed=False,
        fingerprint=digest.hexdigest()[:32],
        derived=derived,
        summarized=summarized,
    )


# -- derived copies ----------------------------------------------------------------------------

_DERIVED_KINDS = frozenset({"compaction", "branch_summary", "context_op"})
_TOKEN_MIN = 8  # a copied token this long that holds a digit or symbol (keys, ids, addresses)
_WORD_MIN = 16  # a copied run of letters only this long
_EDGE = ".,;:!?\"'()[]{}<>`"


def copied_text(session: SessionState, entry_ids: Iterable[str]) -> list[str]:
    """What of the entries' text a summary could have copied: every string of at least
    ``_TOKEN_MIN`` characters, and every whitespace-separated token of it that is distinctive
    (``_TOKEN_MIN`` characters with a digit or symbol, like a key, a path or an address, or
    ``_WORD_MIN`` letters). Longest first, so redaction replaces whole strings before parts."""
    found: set[str] = set()
    for eid in entry_ids:
        slot = session.slots.get(eid)
        if slot is None or isinstance(slot, PurgedEntry):
            continue
        rec = session.record(eid)
        raw = getattr(rec, "raw", None)
        value: Any = None
        if isinstance(raw, bytes):
            with contextlib.suppress(msgspec.DecodeError):
                value = msgspec.json.decode(raw)
        elif not isinstance(rec, PurgedEntry):
            value = msgspec.to_builtins(rec.payload)
        for text in _all_strings(value):
            if len(text) >= _TOKEN_MIN and text not in _VOCABULARY:
                found.add(text)
            for token in text.split():
                token = token.strip(_EDGE)
                distinctive = len(token) >= _WORD_MIN or (
                    len(token) >= _TOKEN_MIN and not token.isalpha()
                )
                if distinctive and token not in _VOCABULARY:
                    found.add(token)
    return sorted(found, key=lambda t: (-len(t), t))


def _all_strings(value: Any) -> list[str]:
    out = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def _derived_copies(session: SessionState, doomed: Sequence[str]) -> list[str]:
    """Compactions, branch summaries and context operations (not purged themselves) whose
    payload holds text copied from the doomed entries."""
    if not doomed:
        return []
    gone = set(doomed)
    candidates = [
        e
        for e in session.special
        if session.types.get(e) in _DERIVED_KINDS and e not in gone and e not in session.purged
    ]
    if not candidates:
        return []
    copied = copied_text(session, doomed)
    if not copied:
        return []
    out = []
    for eid in candidates:
        rec = session.record(eid)
        if isinstance(rec, PurgedEntry):
            continue
        strings = _all_strings(msgspec.to_builtins(rec.payload))
        if any(c in text for text in strings for c in copied):
            out.append(eid)
    return sorted(out)


SUMMARY_PURGED = "[summary removed: it summarized content that was purged]"
"""What a summary whose source range covered a purged entry reads after the purge."""


def _source_range(session: SessionState, eid: str) -> list[str]:
    """The entries a compaction, branch summary, digest or revise was made from (``[]`` when
    it has none or they cannot be placed: a range not on the entry's own path)."""
    kind = session.types.get(eid)
    rec = session.record(eid)
    if isinstance(rec, PurgedEntry):
        return []
    payload: Any = rec.payload
    path = session.path_ids(eid)[:-1]  # the entry's ancestors, root first
    if kind == "compaction":
        # the summary stands for the path before its first kept entry (and, through the
        # previous summary it was updated from, for everything before that)
        first_kept = payload.first_kept_entry_id
        return path[: path.index(first_kept)] if first_kept in path else path
    if kind == "branch_summary":
        # the abandoned path: from where it left this entry's path to the old leaf
        if payload.from_id is None or payload.from_id not in session.slots:
            return []
        on_path = set(path)
        return [e for e in session.path_ids(payload.from_id) if e not in on_path]
    if kind == "context_op" and payload.kind in ("digest", "revise"):
        return _op_range(session, path, payload.start_id, payload.end_id)
    return []


def _op_range(
    session: SessionState, path: list[str], start: str | None, end: str | None
) -> list[str]:
    """What a digest or revise replaced: its range of the view it was made on (the default
    view of its ancestors), as entries: an earlier op's replacement (``<op>:<n>``) stands for
    that op, a revise/snip marker for nothing."""
    from threadline.context import build_view

    seen = build_view(session, path, frozenset()).ids.tolist()
    if start in seen and end in seen and seen.index(start) <= seen.index(end):
        out = []
        for vid in seen[seen.index(start) : seen.index(end) + 1]:
            head, _, tail = vid.partition(":")
            if not tail or tail.isdigit():
                out.append(head)
        return out
    # made on a tagged view: the entries on the path between its two ends
    ends = [(x or "").partition(":")[0] for x in (start, end)]
    if ends[0] not in path or ends[1] not in path:
        return []
    s, e = sorted((path.index(ends[0]), path.index(ends[1])))
    return path[s : e + 1]


def summaries_of(session: SessionState, doomed: Sequence[str]) -> list[str]:
    """Compactions, branch summaries, digests and revisions (not purged themselves) whose
    source range covers a doomed entry, directly or through another such summary (a digest
    of a range holding a compaction that summarized it)."""
    if not doomed:
        return []
    covered = set(doomed)
    candidates = {
        e: _source_range(session, e)
        for e in session.special
        if session.types.get(e) in _DERIVED_KINDS and e not in covered and e not in session.purged
    }
    found: set[str] = set()
    changed = True
    while changed:  # a summary of a summary: repeat until nothing new is covered
        changed = False
        for eid, source in candidates.items():
            if eid not in found and any(x in covered for x in source):
                found.add(eid)
                covered.add(eid)
                changed = True
    return sorted(found)


def _summary_removed(kind: str, payload: Any) -> Any:
    """The payload of a summary that covered purged content, its summary replaced."""
    if not isinstance(payload, dict):
        return payload
    out = dict(payload)
    if kind in ("compaction", "branch_summary"):
        out["summary"] = SUMMARY_PURGED
    elif kind == "context_op":
        if out.get("kind") == "digest":
            out["summary"] = SUMMARY_PURGED
        elif out.get("kind") == "revise":
            out["messages"] = [
                msgspec.to_builtins(Message(role="user", content=[text_block(SUMMARY_PURGED)]))
            ]
    return out


def _redact(value: Any, copied: Sequence[str]) -> Any:
    """``value`` with every copied string replaced by ``[purged]`` (iteratively rebuilt)."""
    if isinstance(value, str):
        for c in copied:
            if c in value:
                value = value.replace(c, REDACTED)
        return value
    if isinstance(value, list):
        return [_redact(v, copied) for v in value]
    if isinstance(value, dict):
        return {k: _redact(v, copied) for k, v in value.items()}
    return value


REDACTED = "[purged]"


# -- executing -------------------------------------------------------------------------------


def _strings(value: Any, out: set[bytes]) -> None:
    """Collect the JSON-escaped form of every string in a payload (iteratively)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if len(v) >= _NEEDLE_MIN and v not in _VOCABULARY:
                out.add(msgspec.json.encode(v)[1:-1][:_NEEDLE_MAX])
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _needles(session: SessionState, ids: Iterable[str]) -> set[bytes]:
    out: set[bytes] = set()
    for eid in ids:
        slot = session.slots[eid]
        if isinstance(slot, PurgedEntry):
            continue
        rec = session.record(eid) if isinstance(slot, LazyMessage) else slot
        payload = getattr(rec, "raw", None)
        if isinstance(payload, bytes):  # an unknown record: its whole line is the payload
            with contextlib.suppress(msgspec.DecodeError):
                _strings(msgspec.json.decode(payload), out)
            continue
        _strings(msgspec.to_builtins(rec.payload), out)
    out.update(e.encode() for e in ids)
    return out


class _Scrubber:
    """Turns a stored line into its purged form (or None to drop undecodable debris)."""

    def __init__(
        self,
        targets: set[str],
        needles: set[bytes],
        derived: set[str] | None = None,
        copied: Sequence[str] = (),
        summarized: set[str] | None = None,
    ) -> None:
        self.targets = targets
        self.needles = needles
        self.derived = derived or set()
        self.copied = copied
        self.summarized = summarized or set()

    def mentions(self, data: bytes) -> bool:
        """Whether debris holds a purged string, or ends with the start of one (a torn line is
        cut anywhere)."""
        for n in self.needles:
            if n in data:
                return True
            for k in range(len(n) - 1, _PREFIX_MIN - 1, -1):
                if data.endswith(n[:k]):
                    return True
        return False

    def line(self, line: bytes) -> bytes | None:
        try:
            env = envelope_decoder.decode(line)
        except msgspec.DecodeError:
            return None if self.mentions(line) else line
        if (
            env.id is not None
            and env.id in self.targets
            and env.type not in ("leaf", "bookmark", "op_state", "message_tags", "purge")
        ):
            return encode_record(
                PurgedEntry(
                    kind=env.type, id=env.id, parent_id=env.parent_id, timestamp=env.timestamp or ""
                )
            )
        if env.id is not None and env.id in self.derived:
            obj = msgspec.json.decode(line)
            if isinstance(obj, dict):
                payload = obj.get(env.type)
                if env.id in self.summarized:
                    payload = _summary_removed(env.type, payload)
                obj[env.type] = _redact(payload, self.copied)
                return msgspec.json.encode(obj)
        return line

    def lines(self, lines: Iterable[bytes]) -> list[bytes]:
        out = []
        for line in lines:
            new = self.line(line)
            if new is not None:
                out.append(new)
        return out


def _raw_header(session: SessionState) -> bytes:
    return session.log.raw_header()


def _clean_files(
    session: SessionState, files: list[Path], scrub: _Scrubber, everything: bool
) -> None:
    from threadline.store.jsonl import temp_path, write_file_atomic

    for path in files:
        if path.name.endswith(".tmp"):  # a crashed rewrite's leftover; we hold the lock
            path.unlink(missing_ok=True)
            continue
        data = path.read_bytes()
        if path.name.endswith(".torn"):
            kept = (
                []
                if everything
                else [frag for frag in data.split(b"\n") if frag and not scrub.mentions(frag)]
            )
            if kept:
                write_file_atomic(temp_path(path), path, None, kept, exclusive=False)
            else:
                path.unlink()
            continue
        # a backup: a whole session file (header + lines)
        head, _, rest = data.partition(b"\n")
        body = rest.split(b"\n")
        tail = body.pop() if body else b""  # bytes after the last newline: torn debris
        lines = scrub.lines(body)
        if tail and not scrub.mentions(tail):
            lines.append(tail)
        write_file_atomic(temp_path(path), path, head, lines, exclusive=False)
    if session.store is not None:  # a listing cache may hold the session's first message
        session.store.forget_listing(session.id)


def _reload(session: SessionState) -> None:
    """Re-read the rewritten log so no decoded copy (or mapping of the old file) survives."""
    session.reload()


def _notify(session: SessionState, ids: list[str]) -> None:
    failures = []
    for hook in list(_hooks):  # the catalog's hook (threadline.stores) registers first
        try:
            hook(session.store, session.id, list(ids))
        except Exception as exc:  # reported below: the session file itself is already clean
            failures.append(f"{getattr(hook, '__qualname__', hook)}: {exc}")
    if failures:
        raise StoreError(
            f"The entries were purged from session '{session.id}', but a search index could not "
            f"forget them ({'; '.join(failures)})",
            hint=Hint("rebuild_catalog"),
        )


def purge(
    session: SessionState,
    entry_ids: Sequence[str] | None = None,
    *,
    all: bool = False,
    dry_run: bool = True,
) -> PurgePlan:
    """Remove entries' content from the store, keeping their place in the tree.

    Returns the :class:`PurgePlan`; with ``dry_run=True`` (the default) nothing changes.
    ``all=True`` purges every entry of the session. Purging is final: the content is not kept
    anywhere (no backup), so preview first.
    """
    plan = _plan(session, entry_ids, all)
    if dry_run:
        return plan
    session.ensure_writer()
    new = [i.id for i in plan.items if not i.already_purged]
    doomed = plan.entry_ids
    if not doomed and not plan.files:
        return msgspec.structs.replace(plan, executed=True)
    derived = set(plan.derived)
    scrub = _Scrubber(
        set(doomed),
        _needles(session, doomed),
        derived,
        copied_text(session, doomed) if derived else (),
        set(plan.summarized),
    )
    if new:
        session.write("purge", Purge(entry_ids=new), tree=False)
    if doomed:
        header = _raw_header(session)
        lines = scrub.lines(session.log.raw_lines())
        session.log.rewrite(header, lines)
    _clean_files(session, _companion_files(session), scrub, everything=all)
    _reload(session)
    residue: list[str] = []
    if doomed:
        try:
            _notify(session, [*doomed, *sorted(derived)])
        finally:
            store = session.store
            if store is not None and hasattr(store, "scrub"):
                residue = store.scrub()
    return msgspec.structs.replace(plan, executed=True, residue=residue)
