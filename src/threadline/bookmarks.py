"""Bookmarks (tags by name) and undo over a session tree (DESIGN §7).

A tag marks a boundary in the view, position ``p`` meaning "the first p messages". Setting one
appends a ``bookmark`` meta record binding the name to the entry behind message ``p - 1``, the
position and that message's :func:`~threadline.model.content.content_hash` (``p = 0`` binds to no
entry). Because the tag is bound to an entry, it *follows its message*: a tag set at the end of
the conversation stays valid, at the same position, as the conversation grows.

Each time tags are read their status is recomputed against the current view:

``valid``
    the tagged entry is in the view; the position is where it is now (plus one);
``other_branch``
    the entry is in the tree but not on the current path (undo to it switches branch);
``invalid``
    the entry is on the path but has left the view (compacted, snipped, digested, revised),
    with the reason ``Position p out of range (0-N)`` when the stored position exceeds the view
    length, else ``Message at position p has changed (hash mismatch)``.

Undo never deletes anything: it moves the leaf (a durable ``leaf`` record), so the abandoned part
stays in the tree and ``Session.branch`` (or ``undo_to`` a tag left there) returns to it.

The functions here are reached through the Session methods ``tag``, ``tags``, ``undo``,
``undo_to`` and ``clear``; their results are msgspec Structs (:class:`TagStatus`,
:class:`TagListing`, :class:`UndoResult`) that ``msgspec.to_builtins`` turns into JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from threadline.errors import Hint, NotFoundError, SessionLockedError, UserError
from threadline.model.content import content_hash
from threadline.model.entries import Bookmark

if TYPE_CHECKING:
    from threadline.state import SessionState

SESSION_START = "__session_start__"
"""The special tag at position 0: always valid, never set, moved or removed by users."""

NAME_RE = re.compile(r"\A[A-Za-z0-9_.-]{1,64}\Z")
_ANON_RE = re.compile(r"\Atag_([0-9]+)\Z")

VALID = "valid"
OTHER_BRANCH = "other_branch"
INVALID = "invalid"


class TagStatus(msgspec.Struct, kw_only=True):
    """One tag as it stands against the current view.

    ``position`` is the recomputed position for a valid tag and the stored one otherwise;
    ``reason`` explains an ``invalid`` or ``other_branch`` status; ``entry_id`` is the entry of
    message ``position - 1`` (``None`` at position 0); ``timestamp`` is when the tag was set;
    ``special`` marks ``__session_start__``.
    """

    name: str
    position: int
    status: str
    reason: str | None = None
    entry_id: str | None = None
    timestamp: str = ""
    special: bool = False
    hash: str | None = None


class TagListing(msgspec.Struct, kw_only=True):
    """The result of :func:`tags`: every tag sorted by position, and the invalid ones removed.

    Iterating (or indexing) a listing yields its :class:`TagStatus` items. Invalid tags are listed
    once, in the listing that removes them. ``removal_skipped`` is true when they could not be
    removed because another process holds the session's writer lock (or the session was opened
    read-only): they are then only reported.
    """

    tags: list[TagStatus]
    removed: list[str] = msgspec.field(default_factory=list)
    removal_skipped: bool = False

    def __iter__(self) -> Iterator[TagStatus]:
        return iter(self.tags)

    def __len__(self) -> int:
        return len(self.tags)

    def __getitem__(self, i: int) -> TagStatus:
        return self.tags[i]

    def get(self, name: str) -> TagStatus | None:
        """The tag called ``name``, or ``None``."""
        for t in self.tags:
            if t.name == name:
                return t
        return None

    def names(self) -> list[str]:
        return [t.name for t in self.tags]


class UndoResult(msgspec.Struct, kw_only=True):
    """What an :func:`undo`, :func:`undo_to` or :func:`clear` changed in the view.

    ``user_messages_removed`` and ``messages_removed`` count the messages of the view before
    that are not in the view after; ``messages_added`` counts the reverse (non-zero when the move
    switches branch or steps back before a compaction, whose hidden history comes back);
    ``tags_left_behind`` names the tags that were valid before and are not any more (they stay
    in the session, on the abandoned branch). ``cleared`` is true when the view is now empty.
    For ``undo_to``: ``tag`` is the tag's name, ``already_there`` says nothing moved because the
    view already ends at the tag, ``switched_branch`` that the tag was on another branch.
    """

    user_messages_removed: int
    messages_removed: int
    tags_left_behind: list[str] = msgspec.field(default_factory=list)
    messages_added: int = 0
    cleared: bool = False
    tag: str | None = None
    position: int | None = None
    already_there: bool = False
    switched_branch: bool = False
    leaf_id: str | None = None


class InvalidTagError(UserError):
    """``undo_to`` named a tag that is no longer valid; the tag was removed, the leaf not moved."""

    def __init__(self, name: str, reason: str, removed: bool) -> None:
        self.name = name
        self.reason = reason
        self.removed = removed
        short = "hash mismatch" if "hash mismatch" in reason else reason
        tail = (
            "Tag removed."
            if removed
            else (
                "The tag could not be removed because another process holds the session; "
                "it will be removed by the next listing."
            )
        )
        super().__init__(f"Tag '{name}' is no longer valid ({short}). {tail}")


# -- the view as tags see it -------------------------------------------------------------------


class _View:
    """The current view's ids, their positions, and the current path (computed once per call)."""

    def __init__(self, session: SessionState) -> None:
        self.session = session
        self.ids: list[str] = session.context().view.ids()
        self.index = {vid: i for i, vid in enumerate(self.ids)}
        self._path: set[str] | None = None

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def path(self) -> set[str]:
        if self._path is None:
            self._path = set(self.session.path_ids())
        return self._path

    def is_user_input(self, vid: str) -> bool:
        """A user input message that is an entry (not synthetic, not a summary)."""
        s = self.session
        return s.types.get(vid) == "message" and s.message_for_view_id(vid).is_user_input

    def last_user_inputs(self, n: int) -> list[str]:
        """Up to ``n`` user input ids, newest first; walks back only as far as needed, so an
        undo in a long session decodes only the messages it steps over."""
        out = []
        for vid in reversed(self.ids):
            if self.is_user_input(vid):
                out.append(vid)
                if len(out) == n:
                    break
        return out


def _entry_of(session: SessionState, target: str) -> str | None:
    """The tree entry behind a view id (a synthetic ``<op_id>:<n>`` belongs to its op entry)."""
    if target in session.types:
        return target
    base = target.rsplit(":", 1)[0]
    return base if base in session.types else None


def _status(session: SessionState, view: _View, bm: Bookmark, stamp: str) -> TagStatus:
    special = bm.name == SESSION_START
    if special or bm.target_id is None:
        return TagStatus(
            name=bm.name, position=0, status=VALID, timestamp=stamp, special=special, hash=bm.hash
        )
    target = bm.target_id
    where = view.index.get(target)
    if where is not None:
        return TagStatus(
            name=bm.name,
            position=where + 1,
            status=VALID,
            entry_id=target,
            timestamp=stamp,
            hash=bm.hash,
        )
    entry = _entry_of(session, target)
    p = bm.position
    if entry is not None and entry not in view.path:
        return TagStatus(
            name=bm.name,
            position=p,
            status=OTHER_BRANCH,
            reason=f"Entry {target} is on another branch",
            entry_id=target,
            timestamp=stamp,
            hash=bm.hash,
        )
    if p > view.n:
        reason = f"Position {p} out of range (0-{view.n})"
    else:
        reason = f"Message at position {p} has changed (hash mismatch)"
    return TagStatus(
        name=bm.name,
        position=p,
        status=INVALID,
        reason=reason,
        entry_id=target,
        timestamp=stamp,
        hash=bm.hash,
    )


def _all_statuses(session: SessionState, view: _View) -> list[TagStatus]:
    marks = dict(session.bookmarks)
    times = dict(session.bookmark_times)
    if SESSION_START not in marks:
        marks[SESSION_START] = Bookmark(name=SESSION_START, target_id=None, position=0, hash=None)
        times[SESSION_START] = session.header.timestamp
    items = [_status(session, view, bm, times.get(name, "")) for name, bm in marks.items()]
    items.sort(key=lambda t: (t.position, not t.special, t.timestamp, t.name))
    return items


def _valid_names(session: SessionState, view: _View) -> set[str]:
    return {t.name for t in _all_statuses(session, view) if t.status == VALID and not t.special}


def _remove(session: SessionState, name: str) -> None:
    bm = session.bookmarks[name]
    session.write(
        "bookmark",
        Bookmark(
            name=name, target_id=bm.target_id, position=bm.position, hash=bm.hash, removed=True
        ),
        tree=False,
    )


def _check_name(name: str) -> None:
    if name.startswith("__"):
        raise UserError(
            f"Tag name '{name}' is reserved (names starting with '__' are "
            "threadline's own); choose another name"
        )
    if not NAME_RE.match(name):
        raise UserError(f"Invalid tag name {name!r}: use 1-64 letters, digits, '_', '.' or '-'")


def _anonymous_name(session: SessionState) -> str:
    highest = 0
    for name in session.bookmarks:
        m = _ANON_RE.match(name)
        if m:
            highest = max(highest, int(m.group(1)))
    return f"tag_{highest + 1}"


# -- public functions ----------------------------------------------------------------------------


def tag(session: SessionState, name: str | None = None, position: int | None = None) -> TagStatus:
    """Bookmark ``position`` (default: the end of the view) as ``name`` (default: ``tag_<k>``).

    Positions run from 0 (before the first message) to N (after the last). Setting an existing
    name moves it. Returns the new tag's status.
    """
    if name is not None:
        _check_name(name)
    session.ensure_writer()  # take the lock first: the view then includes other writers' work
    view = _View(session)
    p = view.n if position is None else position
    if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= view.n:
        raise UserError(f"Invalid position {p} (0-{view.n} allowed)")
    if name is None:
        name = _anonymous_name(session)
    if p == 0:
        target, digest = None, None
    else:
        target = view.ids[p - 1]
        digest = content_hash(session.message_for_view_id(target))
    session.write(
        "bookmark", Bookmark(name=name, target_id=target, position=p, hash=digest), tree=False
    )
    return TagStatus(
        name=name,
        position=p,
        status=VALID,
        entry_id=target,
        timestamp=session.bookmark_times.get(name, ""),
        hash=digest,
    )


def untag(session: SessionState, name: str) -> None:
    """Remove tag ``name`` (a ``bookmark`` record with ``removed``; nothing else changes).
    ``__session_start__`` always exists and cannot be removed."""
    if name.startswith("__"):
        raise UserError(f"Tag '{name}' is threadline's own and cannot be removed")
    if name not in session.bookmarks:
        raise NotFoundError(
            f"Tag '{name}' not found in session '{session.id}'", hint=Hint("list_tags", session.id)
        )
    session.ensure_writer()
    _remove(session, name)


def tags(session: SessionState) -> TagListing:
    """Every tag with its status, sorted by position (``__session_start__`` first).

    Invalid tags are listed and removed (a ``bookmark`` record with ``removed``); the next
    listing no longer shows them. When another process holds the writer lock, or the session is
    read-only, they are only reported (``removal_skipped``).
    """
    view = _View(session)
    items = _all_statuses(session, view)
    invalid = [t.name for t in items if t.status == INVALID]
    if not invalid:
        return TagListing(tags=items)
    if session.read_only:
        return TagListing(tags=items, removal_skipped=True)
    try:
        session.ensure_writer()
    except SessionLockedError:
        return TagListing(tags=items, removal_skipped=True)
    for name in invalid:
        if name in session.bookmarks:
            _remove(session, name)
    return TagListing(tags=items, removed=invalid)


def _move(
    session: SessionState, before: _View, valid_before: set[str], target: str | None
) -> UndoResult:
    """Move the leaf to ``target`` (``None``: before the first entry) and describe the change."""
    session.move_leaf(target)
    after = _View(session)
    gone = [vid for vid in before.ids if vid not in after.index]
    users_gone = sum(1 for vid in gone if before.is_user_input(vid))
    added = sum(1 for vid in after.ids if vid not in before.index)
    left = sorted(valid_before - _valid_names(session, after))
    return UndoResult(
        user_messages_removed=users_gone,
        messages_removed=len(gone),
        messages_added=added,
        tags_left_behind=left,
        cleared=after.n == 0,
        leaf_id=session.leaf,
    )


def _restart(session: SessionState) -> None:
    """Re-set ``__session_start__`` so its timestamp records when the conversation restarted."""
    session.write(
        "bookmark", Bookmark(name=SESSION_START, target_id=None, position=0, hash=None), tree=False
    )


def undo(session: SessionState, n: int = 1) -> UndoResult:
    """Step back before the n-th last user input message of the view.

    Only user input counts: a user message carrying a tool result is not input, and synthetic
    messages (from context operations) are not entries. When ``n`` exceeds the user input
    messages, everything is cleared. Undoing into the kept range of a compaction returns to the
    history as it was before that compaction (the compaction entry comes after it on the path).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UserError(f"Undo count must be a whole number of at least 1 (got {n!r})")
    session.ensure_writer()
    before = _View(session)
    valid_before = _valid_names(session, before)
    inputs = before.last_user_inputs(n)
    if n > len(inputs):
        result = _move(session, before, valid_before, None)
        _restart(session)
        return result
    target = inputs[-1]
    return _move(session, before, valid_before, session.tree.parent[target])


def undo_to(session: SessionState, name: str) -> UndoResult:
    """Restore the view to the position of tag ``name``.

    The tag is validated first: an invalid tag is removed and :class:`InvalidTagError` raised
    (the leaf does not move). When the view already ends at the tag, nothing moves
    (``already_there``). A tag on another branch switches to that branch.
    """
    session.ensure_writer()
    view = _View(session)
    if name == SESSION_START:
        bm = Bookmark(name=SESSION_START, target_id=None, position=0, hash=None)
    else:
        found = session.bookmarks.get(name)
        if found is None:
            raise NotFoundError(
                f"Tag '{name}' not found in session '{session.id}'",
                hint=Hint("list_tags", session.id),
            )
        bm = found
    st = _status(session, view, bm, session.bookmark_times.get(name, ""))
    if st.status == INVALID:
        _remove(session, name)
        raise InvalidTagError(name, st.reason or "", removed=True)
    if st.position == view.n and st.status == VALID:
        return UndoResult(
            user_messages_removed=0,
            messages_removed=0,
            tag=name,
            position=st.position,
            already_there=True,
            leaf_id=session.leaf,
            cleared=view.n == 0,
        )
    valid_before = _valid_names(session, view)
    target = None if bm.target_id is None else _entry_of(session, bm.target_id)
    result = _move(session, view, valid_before, target)
    result.tag = name
    result.switched_branch = st.status == OTHER_BRANCH
    result.position = len(session.context().messages)
    return result


def clear(session: SessionState) -> UndoResult:
    """Start the conversation over: the leaf moves before the first entry and
    ``__session_start__`` is set again. Nothing is deleted; tags stay, on the abandoned branch."""
    session.ensure_writer()
    before = _View(session)
    result = _move(session, before, _valid_names(session, before), None)
    _restart(session)
    return result


# -- rename, history, export and import (the tag seed's extensions) -------------------------------


def rename(session: SessionState, old: str, new: str) -> TagStatus:
    """Rename tag ``old`` to ``new``: the tag keeps its entry, position and hash, and its history
    continues under the new name (the record says ``renamed_from``). ``new`` must not exist."""
    for name in (old, new):
        if name.startswith("__"):
            raise UserError(f"Tag '{name}' is threadline's own and cannot be renamed")
    _check_name(new)
    if old not in session.bookmarks:
        raise NotFoundError(
            f"Tag '{old}' not found in session '{session.id}'; run "
            f"'threadline tags {session.id}' to list the tags"
        )
    session.ensure_writer()
    if new in session.bookmarks:
        raise UserError(f"Tag '{new}' already exists; remove it first or choose another name")
    bm = session.bookmarks[old]
    session.write(
        "bookmark",
        Bookmark(
            name=new, target_id=bm.target_id, position=bm.position, hash=bm.hash, renamed_from=old
        ),
        tree=False,
    )
    _remove(session, old)
    found = tags(session).get(new)
    assert found is not None
    return found


class TagEvent(msgspec.Struct, kw_only=True):
    """One step of a tag's history: ``action`` is ``set`` (created), ``moved``, ``removed`` or
    ``renamed`` (it took the name ``name`` from ``renamed_from``); ``position``, ``entry_id``
    and ``hash`` are what the record bound the name to."""

    name: str
    action: str
    timestamp: str
    position: int
    entry_id: str | None = None
    hash: str | None = None
    renamed_from: str | None = None


def history(session: SessionState, name: str) -> list[TagEvent]:
    """Every move of tag ``name``, oldest first, following renames back to the tag's first
    name (a tag renamed ``a`` -> ``b`` shows ``a``'s moves, the rename, then ``b``'s)."""
    names = {name}
    log = session.bookmark_log
    for _stamp, bm in reversed(log):  # follow renames back
        if bm.name in names and bm.renamed_from:
            names.add(bm.renamed_from)
    if not any(bm.name in names for _stamp, bm in log):
        raise NotFoundError(
            f"Tag '{name}' has no history in session '{session.id}'; run "
            f"'threadline tags {session.id}' to list the tags"
        )
    out: list[TagEvent] = []
    alive: set[str] = set()
    left_by_rename: set[str] = set()
    for stamp, bm in log:
        if bm.name not in names:
            continue
        if bm.removed:
            alive.discard(bm.name)
            if bm.name in left_by_rename:  # the second half of a rename: already told
                left_by_rename.discard(bm.name)
                continue
            action = "removed"
        elif bm.renamed_from:
            left_by_rename.add(bm.renamed_from)
            action = "renamed"
        else:
            action = "moved" if bm.name in alive else "set"
        if not bm.removed:
            alive.add(bm.name)
        out.append(
            TagEvent(
                name=bm.name,
                action=action,
                timestamp=stamp,
                position=bm.position,
                entry_id=bm.target_id,
                hash=bm.hash,
                renamed_from=bm.renamed_from,
            )
        )
    return out


EXPORT_VERSION = 1


def export_tags(session: SessionState) -> dict[str, object]:
    """The session's tags as JSON-ready data: ``{"session_id", "version", "tags": [{name,
    position, entry_id, hash, timestamp}]}`` (``__session_start__`` is not exported: every
    session has its own)."""
    rows = []
    for name, bm in session.bookmarks.items():
        if name.startswith("__"):
            continue
        rows.append(
            {
                "name": name,
                "position": bm.position,
                "entry_id": bm.target_id,
                "hash": bm.hash,
                "timestamp": session.bookmark_times.get(name, ""),
            }
        )
    rows.sort(key=lambda r: (str(r["position"]).zfill(12), str(r["name"])))
    return {"session_id": session.id, "version": EXPORT_VERSION, "tags": rows}


class TagImport(msgspec.Struct, kw_only=True):
    """What :func:`import_tags` did: tags set, and tags skipped with the reason."""

    imported: list[str]
    skipped: dict[str, str] = msgspec.field(default_factory=dict)


def import_tags(session: SessionState, data: object, *, replace: bool = False) -> TagImport:
    """Set the tags of an :func:`export_tags` document on ``session`` (the same session, a fork
    or a copy holding the same entry ids). A tag is bound to its entry again, with the exported
    position and hash; a tag whose entry is not in this session, or whose name exists here
    (unless ``replace``), is skipped and reported. All rows are checked before anything is
    written."""
    if not isinstance(data, dict) or not isinstance(data.get("tags"), list):
        raise UserError(
            'A tag export is {"session_id", "version", "tags": [...]}; give the '
            "JSON that export_tags (threadline tag-export) wrote"
        )
    plan: list[Bookmark] = []
    result = TagImport(imported=[])
    for k, row in enumerate(data["tags"]):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("name"), str)
            or isinstance(row.get("position"), bool)
            or not isinstance(row.get("position"), int)
        ):
            raise UserError(f"Tag row {k} needs a name and an integer position, got {row!r:.80}")
        name, target = row["name"], row.get("entry_id")
        _check_name(name)
        if target is not None and str(target) not in session.slots:
            result.skipped[name] = f"entry '{target}' is not in session '{session.id}'"
        elif name in session.bookmarks and not replace:
            result.skipped[name] = "a tag with this name exists (pass replace=True to overwrite)"
        else:
            plan.append(
                Bookmark(
                    name=name,
                    target_id=None if target is None else str(target),
                    position=row["position"],
                    hash=None if row.get("hash") is None else str(row["hash"]),
                )
            )
    if plan:
        session.ensure_writer()
    for bm in plan:
        session.write("bookmark", bm, tree=False)
        result.imported.append(bm.name)
    return result
