"""Relevance scoring and objective-conditioned context (the context-manipulation seed's future
phases, built).

Two things an agent can do with an *objective* — a line of text saying what it is working on:

* **Score and propose.** :func:`score_context` embeds every message of the current view and the
  objective with the catalog's embedder and gives each message its cosine similarity to the
  objective. :func:`propose` turns the least relevant stretches into proposed context operations
  (a digest or a snip per stretch), previewed, nothing written; :func:`apply` writes exactly the
  proposed operations, which are ordinary reversible ops (``toggle``/``revert`` undo them).
  A tool call and its results are one unit (a stretch never splits them), the newest messages and
  a leading system prompt are never proposed, and markers break stretches.
* **Infer the active tags.** Conditional operations apply only when one of their tags is active
  (DESIGN §6). :func:`infer_active_tags` derives the active tags from the latest user turns:
  a tag is active when its words appear in them, or when its description (its words and the
  messages tagged with it) is similar enough to them. :func:`objective_context` is the context
  built with those tags.

This module sits just above :mod:`threadline.stores`: it uses the embedder of the store's catalog
(or an embedder given explicitly) and the Session's public API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from threadline.embedding import INSTALL_HINT, Embedder, default_embedder
from threadline.errors import UserError
from threadline.model.content import Message
from threadline.model.search_text import message_text
from threadline.stores import opened_catalog

if TYPE_CHECKING:
    from threadline.context import Context
    from threadline.session import Session

__all__ = [
    "MessageScore",
    "Proposal",
    "RelevancePlan",
    "apply",
    "infer_active_tags",
    "objective_context",
    "propose",
    "score_context",
]

DEFAULT_THRESHOLD = 0.2
DEFAULT_TAG_THRESHOLD = 0.35
_TEXT_LIMIT = 2000


class MessageScore(msgspec.Struct, kw_only=True):
    """One message of the view with its similarity to the objective (-1..1)."""

    position: int
    id: str
    role: str
    score: float
    preview: str


class Proposal(msgspec.Struct, kw_only=True):
    """A proposed operation on positions ``start``..``end`` (inclusive) of the view it was
    computed on; ``score`` is the highest score inside (every message is below the threshold)."""

    kind: Literal["digest", "snip"]
    start: int
    end: int
    ids: list[str]
    score: float
    summary: str | None = None


class RelevancePlan(msgspec.Struct, kw_only=True):
    """What :func:`propose` found: every message's score and the proposed operations, for the
    view at ``leaf_id`` (``apply`` refuses a plan for another view)."""

    session_id: str
    leaf_id: str | None
    objective: str
    threshold: float
    scores: list[MessageScore]
    proposals: list[Proposal]
    view_ids: list[str]
    active_tags: list[str] = msgspec.field(default_factory=list)
    applied: list[str] = msgspec.field(default_factory=list)  # op ids, once applied


def _embedder(session: Session, embedder: Embedder | None) -> Embedder:
    """``embedder``, else the embedder of the session's catalog when it is open, else the
    catalog's default (the MiniLM model of the ``semantic`` extra)."""
    if embedder is not None:
        return embedder
    backend = session.store
    catalog = opened_catalog(backend) if backend is not None else None
    found = catalog.embedder if catalog is not None else default_embedder()
    if found is None:
        raise UserError(f"Relevance scoring needs an embedder; {INSTALL_HINT}")
    return found


def _text(m: Message) -> str:
    return message_text(m)[:_TEXT_LIMIT]


def _preview(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def score_context(
    session: Session,
    objective: str,
    *,
    embedder: Embedder | None = None,
    active_tags: Iterable[str] | None = None,
) -> list[MessageScore]:
    """Every message of the view (``active_tags`` as for ``context()``) scored against
    ``objective`` with the catalog's embedder (cosine similarity). Markers score 0."""
    if not isinstance(objective, str) or not objective.strip():
        raise UserError("Give an objective: a line of text saying what the conversation is for")
    emb = _embedder(session, embedder)
    ctx = session.context(active_tags=active_tags)
    msgs = list(ctx.messages)
    view = list(ctx.view)
    texts = [_text(m) for m in msgs]
    wanted = [i for i, v in enumerate(view) if v.kind != "marker" and texts[i].strip()]
    sims = [0.0] * len(msgs)
    if wanted:
        vectors = emb.embed([objective] + [texts[i] for i in wanted])
        target = vectors[0]
        for row, i in enumerate(wanted, start=1):
            sims[i] = float(vectors[row] @ target)
    return [
        MessageScore(
            position=i,
            id=view[i].id,
            role=msgs[i].role,
            score=round(sims[i], 4),
            preview=_preview(texts[i]),
        )
        for i in range(len(msgs))
    ]


def _units(msgs: Sequence[Message], kinds: Sequence[str]) -> list[tuple[int, int]]:
    """The view cut into units that a proposal takes whole: a tool call with the results that
    follow it is one unit; every other message is its own. Markers are units of their own."""
    units: list[tuple[int, int]] = []
    i, n = 0, len(msgs)
    while i < n:
        j = i
        calls = {u.id for u in msgs[i].tool_uses}
        while calls and j + 1 < n and kinds[j + 1] != "marker" and msgs[j + 1].tool_results:
            j += 1
            calls -= {r.tool_use_id for r in msgs[j].tool_results}
        units.append((i, j))
        i = j + 1
    return units


def propose(
    session: Session,
    objective: str,
    *,
    embedder: Embedder | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    action: Literal["digest", "snip"] = "digest",
    keep_recent: int = 4,
    min_messages: int = 2,
    active_tags: Iterable[str] | None = None,
) -> RelevancePlan:
    """Propose operations over the stretches of the view least relevant to ``objective``:
    runs of at least ``min_messages`` messages whose every score is below ``threshold``,
    outside the last ``keep_recent`` messages and a leading system prompt, each tool call kept
    with its results. ``action`` is ``digest`` (the stretch becomes one system message naming
    what was set aside) or ``snip``. Nothing is written."""
    if action not in ("digest", "snip"):
        raise UserError(f"action must be 'digest' or 'snip', got {action!r}")
    if keep_recent < 0 or min_messages < 1:
        raise UserError("keep_recent must be >= 0 and min_messages >= 1")
    tags = sorted(set(active_tags or ()))
    scores = score_context(session, objective, embedder=embedder, active_tags=tags)
    ctx = session.context(active_tags=tags)
    msgs = list(ctx.messages)
    kinds = [v.kind for v in ctx.view]
    n = len(msgs)
    frozen_from = max(0, n - keep_recent)
    first = 1 if msgs and msgs[0].role == "system" else 0
    runs: list[list[tuple[int, int]]] = [[]]
    for lo, hi in _units(msgs, kinds):
        low = (
            lo >= first
            and hi < frozen_from
            and kinds[lo] != "marker"
            and all(scores[k].score < threshold for k in range(lo, hi + 1))
        )
        if low:
            runs[-1].append((lo, hi))
        elif runs[-1]:
            runs.append([])
    proposals: list[Proposal] = []
    for run in runs:
        if not run:
            continue
        start, end = run[0][0], run[-1][1]
        if end - start + 1 < min_messages:
            continue
        ids = [s.id for s in scores[start : end + 1]]
        summary = None
        if action == "digest":
            gist = "; ".join(s.preview for s in scores[start : end + 1][:4] if s.preview)
            more = end - start + 1 - min(4, end - start + 1)
            summary = (
                f"[{end - start + 1} messages set aside as less relevant to: "
                f"{_preview(objective, 120)}] {gist}" + (f"; … {more} more" if more else "")
            )
        proposals.append(
            Proposal(
                kind=action,
                start=start,
                end=end,
                ids=ids,
                summary=summary,
                score=max(s.score for s in scores[start : end + 1]),
            )
        )
    return RelevancePlan(
        session_id=session.id,
        leaf_id=session.leaf_id,
        objective=objective,
        threshold=threshold,
        scores=scores,
        proposals=proposals,
        view_ids=ctx.view.ids(),
        active_tags=tags,
    )


def apply(
    session: Session, plan: RelevancePlan, *, tags: Iterable[str] | None = None
) -> RelevancePlan:
    """Write exactly the proposed operations (last stretch first, so the earlier positions stay
    right) and return the plan with their op ids in ``applied``, in proposal order. Each is an
    ordinary reversible operation; ``tags`` makes them conditional. A plan made for another
    view of the session is refused."""
    if plan.session_id != session.id:
        raise UserError(f"The plan was made for session '{plan.session_id}', not '{session.id}'")
    current = session.context(active_tags=plan.active_tags).view.ids()
    if current != plan.view_ids:
        raise UserError("The session changed since the relevance plan was made; propose again")
    made: list[str] = []
    for p in reversed(plan.proposals):
        if p.kind == "digest":
            op = session.digest(
                p.start, p.end, p.summary or "", tags=tags, active_tags=plan.active_tags
            )
        else:
            op = session.snip(p.start, p.end, tags=tags, active_tags=plan.active_tags)
        made.append(op)
    return msgspec.structs.replace(plan, applied=list(reversed(made)))


# -- objective-conditioned operations ------------------------------------------------------------


def _words(tag: str) -> list[str]:
    return [w for w in re.split(r"[^0-9A-Za-z]+", tag.lower()) if w]


def known_tags(session: Session) -> dict[str, list[str]]:
    """Every tag the session's conditional operations and message tags use, with the texts of
    (up to three) messages tagged with it: what describes the tag besides its own words. (An
    operation's summary describes what it hides, not the tag's topic, so it is not used.)"""
    found: dict[str, list[str]] = {}
    for info in session.operations():
        for t in info.tags or ():
            found.setdefault(t, [])
    ctx = session.context()
    for item, msg in zip(ctx.view, ctx.messages, strict=True):
        for t in item.tags:
            texts = found.setdefault(t, [])
            if len(texts) < 3:
                texts.append(_text(msg)[:500])
    return found


def infer_active_tags(
    session: Session,
    *,
    turns: int = 3,
    embedder: Embedder | None = None,
    threshold: float = DEFAULT_TAG_THRESHOLD,
) -> list[str]:
    """The tags the latest ``turns`` user messages point at: a tag is active when all its
    words appear in them (``database-design``: "database" and "design"), or — with an
    embedder (given, or the catalog's when installed) — when its description is at least
    ``threshold`` similar to one of them or to all of them together. Sorted by name."""
    ctx = session.context()
    recent = [m.text for m in ctx.messages if m.is_user_input][-max(1, turns) :]
    said = " ".join(recent)
    if not said.strip():
        return []
    tags = known_tags(session)
    if not tags:
        return []
    said_words = set(_words(said))
    active = {t for t in tags if _words(t) and set(_words(t)) <= said_words}
    try:
        emb = _embedder(session, embedder)
    except UserError:
        emb = None
    rest = [t for t in sorted(tags) if t not in active]
    if emb is not None and rest:
        # each turn on its own and all of them together: a tag the user just turned to is not
        # drowned by the turns before it
        probes = [said[-_TEXT_LIMIT:], *(t[-_TEXT_LIMIT:] for t in recent if t.strip())]
        descriptions = [" ".join([" ".join(_words(t)), *tags[t]])[:_TEXT_LIMIT] for t in rest]
        vectors = emb.embed([*probes, *descriptions])
        n = len(probes)
        for k, t in enumerate(rest, start=n):
            if max(float(vectors[k] @ vectors[j]) for j in range(n)) >= threshold:
                active.add(t)
    return sorted(active)


def objective_context(
    session: Session,
    *,
    turns: int = 3,
    embedder: Embedder | None = None,
    threshold: float = DEFAULT_TAG_THRESHOLD,
) -> tuple[Context, list[str]]:
    """The context with the tags :func:`infer_active_tags` derives, and those tags."""
    tags = infer_active_tags(session, turns=turns, embedder=embedder, threshold=threshold)
    return session.context(active_tags=tags), tags
