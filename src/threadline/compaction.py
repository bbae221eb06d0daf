"""Compaction: safe cut points, split turns, file tracking, summarizers (DESIGN §8).

A compaction replaces the older part of a path with a summary and keeps the newest
``keep_recent_tokens`` verbatim. The steps are pure functions over a session, so any caller
(:class:`threadline.agent.AgentSession`, the CLI, a custom loop) composes them::

    plan = prepare_compaction(session, keep_recent_tokens=20_000)   # nothing written
    result = compact(session, ExtractiveSummarizer(), plan=plan)      # one compaction entry

Rules:

* **Safe cuts.** The first kept entry is a user message, an assistant message without tool
  calls, or a non-message entry; never a tool result and never an assistant message with tool
  calls, so a call and its result are never separated. Non-message entries just before the cut
  are kept with it.
* **Split turns.** When the cut falls inside a turn (the user message that started it is
  summarized, the rest kept), the turn's prefix is summarized on its own and appended to the
  summary under ``## Turn in progress``.
* **Chained compactions.** A new compaction starts from the previous one's first kept entry, so
  every message the previous compaction kept is either summarized again or kept (never dropped).
* **Files.** Files read and modified by tool calls are collected from what is summarized and
  merged with the previous compaction's lists (``details.read_files`` / ``details.modified_files``).
* **Refusal.** Compacting right after a compaction, or when everything fits in the keep window,
  is refused with a :class:`~threadline.errors.UserError`; nothing is written.
* **Atomic.** The summarizer runs before anything is written: if it raises (HTTP error, timeout,
  abort), the session is unchanged.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import msgspec

from threadline.errors import ProviderError, UserError
from threadline.model.content import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text,
)
from threadline.tokens import (
    ContextTokens,
    context_tokens,
    estimate_entry,
    estimate_message,
    estimate_text,
)

if TYPE_CHECKING:
    from threadline.providers.base import Provider
    from threadline.session import Session

Purpose = Literal["compaction", "turn_prefix", "branch"]
SECTIONS = ("Goal", "Progress", "Key decisions", "Next steps", "Files")
DEFAULT_KEEP_RECENT_TOKENS = 20_000

# -- cut points ------------------------------------------------------------------------------


class CutPoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where a compaction cuts a list of entries.

    ``first_kept_index`` is the first entry kept verbatim (0 = keep everything). When the cut
    falls inside a turn, ``is_split_turn`` is true and ``turn_start_index`` is the index of the
    entry that started the turn; otherwise ``turn_start_index`` is -1.
    """

    first_kept_index: int
    turn_start_index: int
    is_split_turn: bool


def _message(entry: Any) -> Message | None:
    # a purged message entry has type "message" but no message: it adds nothing to a context
    return getattr(entry, "message", None) if getattr(entry, "type", None) == "message" else None


def _is_tool_result(m: Message) -> bool:
    return m.role == "tool" or any(isinstance(b, ToolResultBlock) for b in m.content)


def is_cut_point(entry: Any) -> bool:
    """May a compaction keep ``entry`` as its first kept entry?"""
    m = _message(entry)
    if m is None:
        return True
    if _is_tool_result(m):
        return False
    return not (m.role == "assistant" and m.tool_uses)


def _opens_exchange(entry: Any) -> bool:
    """An assistant message making tool calls: cutting just before it keeps each call with its
    result (the fallback cut of a split turn whose tool exchanges alone exceed the budget)."""
    m = _message(entry)
    return m is not None and m.role == "assistant" and bool(m.tool_uses)


def _starts_turn(entry: Any) -> bool:
    m = _message(entry)
    if m is None:
        return getattr(entry, "type", None) == "branch_summary"
    return m.role in ("user", "bashExecution", "custom", "branchSummary") and not _is_tool_result(m)


def find_cut_point(
    entries: Sequence[Any],
    keep_recent_tokens: int,
    estimate_tokens: Callable[[Any], int] | None = None,
) -> CutPoint:
    """The cut that keeps at least ``keep_recent_tokens`` of the newest entries.

    Walks back from the newest entry adding up tokens (``estimate_tokens(entry)``, default
    :func:`threadline.tokens.estimate_entry`); at the entry where the sum reaches
    ``keep_recent_tokens`` it takes the nearest safe cut point at or after it, then moves the cut
    back over non-message entries just before it. When the newest entries never add up to
    ``keep_recent_tokens``, everything is kept (``first_kept_index`` 0).
    """
    estimate = estimate_tokens or estimate_entry
    n = len(entries)
    cut = 0
    total = 0
    for i in range(n - 1, -1, -1):
        total += estimate(entries[i])
        if total >= keep_recent_tokens:
            cut = next((j for j in range(i, n) if is_cut_point(entries[j])), 0)
            if cut == 0:
                # the newest tool exchange alone is over the budget: keep it whole and cut
                # before it, at the nearest safe cut point or, inside a turn, before the
                # assistant message that made the call (a split turn; no pair is separated)
                cut = next(
                    (
                        j
                        for j in range(i, 0, -1)
                        if is_cut_point(entries[j]) or _opens_exchange(entries[j])
                    ),
                    0,
                )
            break
    if cut == 0:
        return CutPoint(first_kept_index=0, turn_start_index=-1, is_split_turn=False)
    while (
        cut > 0
        and _message(entries[cut - 1]) is None
        and getattr(entries[cut - 1], "type", None) not in ("compaction", "branch_summary")
    ):
        cut -= 1
    # the turn is split when the first kept message does not start a turn
    first_msg = next(
        (
            entries[j]
            for j in range(cut, n)
            if _message(entries[j]) is not None
            or getattr(entries[j], "type", None) == "branch_summary"
        ),
        None,
    )
    if first_msg is None or _starts_turn(first_msg):
        return CutPoint(first_kept_index=cut, turn_start_index=-1, is_split_turn=False)
    start = next((j for j in range(cut - 1, -1, -1) if _starts_turn(entries[j])), -1)
    return CutPoint(first_kept_index=cut, turn_start_index=start, is_split_turn=start >= 0)


def session_tokens(session: Session, leaf_id: str | None = None) -> ContextTokens:
    """Tokens of a session's context at ``leaf_id`` (default: the leaf).

    Usage reported by assistant messages that a compaction kept was measured before that
    compaction (on the longer context), so only usage recorded after the latest compaction on
    the path is trusted; everything else is estimated.
    """
    ctx = session.context(leaf_id)
    messages = ctx.messages  # lazy: only the messages after the last usage are decoded
    path = session.path_ids(leaf_id)
    types = session.state.types
    last_comp = next(
        (i for i in range(len(path) - 1, -1, -1) if types[path[i]] == "compaction"), -1
    )
    if last_comp < 0:
        return context_tokens(messages)
    after = set(path[last_comp + 1 :])
    ids = ctx.view.ids()
    usage_from = next((i for i, vid in enumerate(ids) if vid in after), len(ids))
    return context_tokens(messages, usage_from=usage_from)


# -- files read and modified -----------------------------------------------------------------

_READ_TOOLS = frozenset(
    {
        "read",
        "read_file",
        "readfile",
        "view",
        "cat",
        "open",
        "open_file",
        "notebookread",
        "view_file",
    }
)
_WRITE_TOOLS = frozenset(
    {
        "write",
        "write_file",
        "writefile",
        "edit",
        "edit_file",
        "editfile",
        "multiedit",
        "multi_edit",
        "create",
        "create_file",
        "notebookedit",
        "str_replace",
        "insert",
        "apply_patch",
        "patch",
    }
)
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "notebook_path")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)


class FileOps(msgspec.Struct, kw_only=True):
    """Files the summarized tool calls read and modified (sorted; a modified file is not listed
    as read)."""

    read: list[str] = msgspec.field(default_factory=list)
    modified: list[str] = msgspec.field(default_factory=list)


def file_ops(messages: Iterable[Message], previous: FileOps | None = None) -> FileOps:
    """Files read and modified by the tool calls in ``messages``, merged with ``previous``."""
    read = set(previous.read if previous else ())
    modified = set(previous.modified if previous else ())
    for m in messages:
        for call in m.tool_uses:
            name = call.name.lower()
            args = call.input if isinstance(call.input, dict) else {}
            path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
            command = args.get("command")
            if name in ("str_replace_editor", "str_replace_based_edit_tool") and path:
                (read if command == "view" else modified).add(path)
            elif name in _READ_TOOLS and path:
                read.add(path)
            elif name in _WRITE_TOOLS:
                if path:
                    modified.add(path)
                for key in ("patch", "input", "diff"):
                    if isinstance(args.get(key), str):
                        modified.update(p.strip() for p in _PATCH_FILE.findall(args[key]))
    return FileOps(read=sorted(read - modified), modified=sorted(modified))


def _previous_files(details: Any) -> FileOps | None:
    if not isinstance(details, dict):
        return None
    read = details.get("read_files")
    modified = details.get("modified_files")
    return FileOps(
        read=[str(x) for x in read] if isinstance(read, list) else [],
        modified=[str(x) for x in modified] if isinstance(modified, list) else [],
    )


# -- planning --------------------------------------------------------------------------------


class CompactionPlan(msgspec.Struct, kw_only=True):
    """What :func:`compact` would do; computed by :func:`prepare_compaction`, nothing written.

    ``summarize_ids``/``messages_to_summarize`` are the history before the turn (or before the
    cut when the turn is not split); ``turn_prefix_ids``/``turn_prefix`` the start of a split
    turn; ``kept_ids`` the entries kept verbatim from ``first_kept_entry_id`` to the leaf.
    """

    session_id: str
    leaf_id: str | None
    cut: CutPoint
    first_kept_entry_id: str
    summarize_ids: list[str]
    messages_to_summarize: list[Message]
    turn_prefix_ids: list[str]
    turn_prefix: list[Message]
    kept_ids: list[str]
    tokens_before: int
    kept_tokens: int
    previous_summary: str | None
    previous_compaction_id: str | None
    files: FileOps

    @property
    def is_split_turn(self) -> bool:
        return self.cut.is_split_turn


def prepare_compaction(
    session: Session,
    *,
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS,
    estimate_tokens: Callable[[Any], int] | None = None,
) -> CompactionPlan:
    """Plan a compaction of the current path; raises :class:`UserError` when there is nothing to
    compact (just compacted, or everything fits in ``keep_recent_tokens``)."""
    if keep_recent_tokens < 0:
        raise UserError(f"keep_recent_tokens must be >= 0, got {keep_recent_tokens}")
    path = session.path_ids()
    sid = session.id
    if not path:
        raise UserError(f"Session '{sid}' is empty; there is nothing to compact")
    types = session.state.types
    if types[path[-1]] == "compaction":
        raise UserError(f"Session '{sid}' was just compacted; add messages before compacting again")
    last = _message(session.entry(path[-1]))
    if last is not None and last.tool_uses:
        # a compaction entry appended now would sit between the call and its result in the file
        calls = ", ".join(u.id for u in last.tool_uses)
        raise UserError(
            f"Session '{sid}' ends with a tool call waiting for its result "
            f"({calls}); compact after the result is appended"
        )
    last_comp = max((i for i, e in enumerate(path) if types[e] == "compaction"), default=-1)
    start = 0
    previous_summary: str | None = None
    previous_files: FileOps | None = None
    previous_id: str | None = None
    if last_comp >= 0:
        previous_id = path[last_comp]
        comp: Any = session.state.record(previous_id).payload
        previous_summary = getattr(comp, "summary", None) or None
        previous_files = _previous_files(getattr(comp, "details", None))
        start = last_comp + 1
        first_kept = getattr(comp, "first_kept_entry_id", None)
        if first_kept is not None:
            try:
                start = path.index(first_kept)
            except ValueError:
                start = last_comp + 1
    region_ids = [e for e in path[start:] if types[e] != "compaction"]
    region = [session.state.record(e) for e in region_ids]
    cut = find_cut_point(region, keep_recent_tokens, estimate_tokens)
    if cut.first_kept_index == 0:
        kept = sum((estimate_tokens or estimate_entry)(e) for e in region)
        if kept < keep_recent_tokens:
            raise UserError(
                f"Session '{sid}' has nothing to compact: its {kept} tokens since the last "
                f"compaction fit in keep_recent_tokens={keep_recent_tokens}; lower --keep-recent"
            )
        raise UserError(
            f"Session '{sid}' has nothing to compact: its {kept} tokens since the last "
            f"compaction are one tool exchange that cannot be cut without separating a call "
            f"from its result"
        )
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index
    summarize_ids = _message_ids(region, 0, history_end)
    prefix_ids = (
        _message_ids(region, cut.turn_start_index, cut.first_kept_index)
        if cut.is_split_turn
        else []
    )
    if not summarize_ids and not prefix_ids:
        raise UserError(
            f"Session '{sid}' has nothing to compact: no message precedes the cut; "
            "lower --keep-recent"
        )
    summarize = [_as_message(session, e) for e in summarize_ids]
    prefix = [_as_message(session, e) for e in prefix_ids]
    kept_ids = region_ids[cut.first_kept_index :]
    estimate = estimate_tokens or estimate_entry
    return CompactionPlan(
        session_id=sid,
        leaf_id=session.leaf_id,
        cut=cut,
        first_kept_entry_id=region_ids[cut.first_kept_index],
        summarize_ids=summarize_ids,
        messages_to_summarize=summarize,
        turn_prefix_ids=prefix_ids,
        turn_prefix=prefix,
        kept_ids=kept_ids,
        tokens_before=session_tokens(session).tokens,
        kept_tokens=sum(estimate(e) for e in region[cut.first_kept_index :]),
        previous_summary=previous_summary,
        previous_compaction_id=previous_id,
        files=file_ops([*summarize, *prefix], previous_files),
    )


def _message_ids(region: Sequence[Any], lo: int, hi: int) -> list[str]:
    """Ids of the entries in ``region[lo:hi]`` that put a message in the context."""
    out = []
    for e in region[lo:hi]:
        kind = getattr(e, "type", None)
        if _message(e) is not None or (
            kind == "branch_summary" and getattr(e.payload, "summary", "")
        ):
            out.append(e.id)
    return out


def _as_message(session: Session, entry_id: str) -> Message:
    return session.state.message_for_view_id(entry_id)


class CompactionResult(msgspec.Struct, kw_only=True):
    """What :func:`compact` wrote: the compaction entry id, its summary, and the plan."""

    entry_id: str
    summary: str
    plan: CompactionPlan


def compact(
    session: Session,
    summarizer: Summarizer | None = None,
    *,
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS,
    plan: CompactionPlan | None = None,
    max_summary_tokens: int | None = None,
    estimate_tokens: Callable[[Any], int] | None = None,
) -> CompactionResult:
    """Summarize and append one compaction entry (default summarizer: extractive).

    The summary is produced before anything is written, so a failing summarizer leaves the
    session unchanged. A ``plan`` computed for another leaf is refused.
    """
    if plan is None:
        plan = prepare_compaction(
            session, keep_recent_tokens=keep_recent_tokens, estimate_tokens=estimate_tokens
        )
    elif plan.session_id != session.id or plan.leaf_id != session.leaf_id:
        raise UserError(
            f"The compaction plan was made for another leaf of session "
            f"'{plan.session_id}'; prepare it again"
        )
    summarizer = summarizer or ExtractiveSummarizer()
    summary = build_summary(summarizer, plan, max_tokens=max_summary_tokens)
    details = {
        "read_files": plan.files.read,
        "modified_files": plan.files.modified,
        "summarizer": summarizer.name,
        "summarized_entries": len(plan.summarize_ids) + len(plan.turn_prefix_ids),
        "split_turn": plan.is_split_turn,
    }
    entry_id = session.append_compaction(
        summary, plan.first_kept_entry_id, plan.tokens_before, details=details
    )
    return CompactionResult(entry_id=entry_id, summary=summary, plan=plan)


def build_summary(
    summarizer: Summarizer, plan: CompactionPlan, *, max_tokens: int | None = None
) -> str:
    """The compaction summary text for ``plan`` (history, then the split turn's prefix)."""
    summary = summarizer.summarize(
        plan.messages_to_summarize,
        previous_summary=plan.previous_summary,
        files=plan.files,
        purpose="compaction",
        max_tokens=max_tokens,
    )
    if plan.turn_prefix:
        prefix = summarizer.summarize(
            plan.turn_prefix, files=None, purpose="turn_prefix", max_tokens=max_tokens
        )
        summary = f"{summary.rstrip()}\n\n## Turn in progress\n{_demote(prefix)}"
    return summary


def _demote(summary: str) -> str:
    """Section headings of a nested summary one level down (``## X`` -> ``### X``)."""
    return re.sub(r"^## ", "### ", summary.strip(), flags=re.MULTILINE)


# -- summarizers -----------------------------------------------------------------------------


@runtime_checkable
class Summarizer(Protocol):
    """Turns messages into a summary with the sections of :data:`SECTIONS`.

    ``purpose`` is ``"compaction"`` (history being replaced), ``"turn_prefix"`` (the start of a
    turn split by the cut) or ``"branch"`` (a path being abandoned). A summarizer may raise
    (for example :class:`~threadline.errors.ProviderError`); callers write nothing then.
    """

    name: str

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str | None = None,
        files: FileOps | None = None,
        purpose: Purpose = "compaction",
        max_tokens: int | None = None,
    ) -> str: ...


def first_line(s: str, limit: int = 200) -> str:
    """The first non-blank line of ``s``, cut to ``limit`` characters (with an ellipsis)."""
    line = next((ln.strip() for ln in s.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _request_text(m: Message) -> str:
    line = first_line(m.text)
    if line:
        return line
    return "[image]" if any(isinstance(b, ImageBlock) for b in m.content) else "[empty message]"


def _section(summary: str, name: str) -> list[str]:
    """The bullet lines of every section titled ``name`` in a summary (without the ``- ``):
    ``## name`` and the ``### name`` of a nested turn-in-progress summary, in order."""
    out: list[str] = []
    inside = False
    for line in summary.splitlines():
        if line.startswith("#"):
            inside = line.lstrip("#").strip() == name and line.startswith(("## ", "### "))
            continue
        if inside and line.startswith("- "):
            out.append(line[2:])
    return out


_EARLIER = "## Earlier summary\n"


def _is_extractive(summary: str) -> bool:
    """Was ``summary`` written by :class:`ExtractiveSummarizer` (its Progress counters)?"""
    return bool(re.search(r"^## Progress\n- Assistant replies: \d+$", summary, re.MULTILINE))


def _earlier_summary(prev: str) -> str | None:
    """The text to keep under ``## Earlier summary``: a foreign previous summary (headings
    moved three levels down so they never read as sections), or the section carried by an
    extractive one."""
    if not prev.strip():
        return None
    if not _is_extractive(prev):
        return re.sub(
            r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 3) + " ", prev.strip(), flags=re.MULTILINE
        )
    start = prev.find("\n" + _EARLIER)
    if start < 0:
        return None
    body = prev[start + 1 + len(_EARLIER) :]
    end = re.search(r"^## ", body, re.MULTILINE)  # nested headings are all #### or deeper
    return (body[: end.start()] if end else body).strip() or None


_COUNT = re.compile(r"^(?P<key>[A-Za-z ]+): (?P<n>\d+)(?: \((?P<detail>.*)\))?$")


def _progress_counts(lines: Iterable[str]) -> tuple[int, Counter[str], int]:
    replies, errors = 0, 0
    tools: Counter[str] = Counter()
    for line in lines:
        m = _COUNT.match(line)
        if not m:
            continue
        key, n = m["key"], int(m["n"])
        if key == "Assistant replies":
            replies += n
        elif key == "Tool errors":
            errors += n
        elif key == "Tool calls" and m["detail"]:
            for part in m["detail"].split(", "):
                tool, _, count = part.rpartition(" ")
                if tool and count.isdigit():
                    tools[tool] += int(count)
    return replies, tools, errors


class ExtractiveSummarizer:
    """A deterministic summarizer that needs no model.

    Sections: **Goal** lists every user request (first line of each, at most 200 characters),
    the previous summary's requests first; **Progress** counts assistant replies, tool calls by
    tool and tool errors (added to the previous summary's counts); **Key decisions** quotes the
    first line of the last three assistant replies; **Next steps** points at the latest request;
    **Files** lists files read and modified. With ``max_tokens``, the oldest requests are folded
    into one ``… N earlier requests`` line until the summary fits.

    A previous summary written by something else (an LLM, another tool's import) cannot be
    merged section by section, so it is kept verbatim under ``## Earlier summary`` (its
    headings moved down below the sections) and carried forward by later summaries.
    """

    name = "extractive"

    def __init__(self, *, decisions: int = 3) -> None:
        self.decisions = decisions

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str | None = None,
        files: FileOps | None = None,
        purpose: Purpose = "compaction",
        max_tokens: int | None = None,
    ) -> str:
        prev = previous_summary or ""
        earlier = _earlier_summary(prev)
        if earlier is not None and not _is_extractive(prev):
            prev = ""  # nothing to merge section by section
        requests = [r for r in _section(prev, "Goal") if not r.startswith("… ")]
        folded = sum(
            int(hit.group(1))
            for r in _section(prev, "Goal")
            if (hit := re.match(r"… (\d+) earlier requests?", r))
        )
        replies, tools, errors = _progress_counts(_section(prev, "Progress"))
        decisions: list[str] = []
        for m in messages:
            if m.is_user_input or m.role in ("bashExecution", "custom"):
                requests.append(_request_text(m))
            elif m.role == "assistant":
                replies += 1
                tools.update(u.name for u in m.tool_uses)
                if m.text.strip():
                    decisions.append(first_line(m.text))
            errors += sum(1 for r in m.tool_results if r.is_error)
        if not decisions:
            decisions = _section(prev, "Key decisions")
            decisions = [] if decisions == ["(none recorded)"] else decisions
        decisions = decisions[-self.decisions :] if self.decisions else []

        def render(skip: int) -> str:
            shown = requests[skip:]
            goal = [f"- … {folded + skip} earlier requests"] if folded + skip else []
            goal += [f"- {r}" for r in shown] or ([] if goal else ["- (none recorded)"])
            tool_detail = ", ".join(f"{t} {c}" for t, c in sorted(tools.items()))
            progress = [
                f"- Assistant replies: {replies}",
                f"- Tool calls: {sum(tools.values())}"
                + (f" ({tool_detail})" if tool_detail else ""),
                f"- Tool errors: {errors}",
            ]
            decided = [f"- {d}" for d in decisions] or ["- (none recorded)"]
            nxt = (
                [f"- Continue from the latest request: {requests[-1]}"]
                if requests
                else ["- (none recorded)"]
            )
            fl = []
            if files and files.read:
                fl.append(f"- Read: {', '.join(files.read)}")
            if files and files.modified:
                fl.append(f"- Modified: {', '.join(files.modified)}")
            parts = [
                ("Goal", goal),
                ("Progress", progress),
                ("Key decisions", decided),
                ("Next steps", nxt),
                ("Files", fl or ["- (none)"]),
            ]
            if earlier:
                parts.append(("Earlier summary", [earlier]))
            return "\n\n".join(f"## {name}\n" + "\n".join(lines) for name, lines in parts)

        out = render(0)
        if max_tokens is not None and estimate_text(out) > max_tokens:
            lo, hi = 0, len(requests)  # fold the fewest oldest requests that make it fit
            while lo < hi:
                mid = (lo + hi) // 2
                if estimate_text(render(mid)) > max_tokens:
                    lo = mid + 1
                else:
                    hi = mid
            out = render(lo)
        return out


_PURPOSE = {
    "compaction": "The conversation below is the older part of a session that is being "
    "compacted: your summary replaces it, and the assistant continues from the "
    "summary plus the newest messages.",
    "turn_prefix": "The conversation below is the beginning of the current turn (the user's "
    "request and the work done so far); the rest of the turn is kept verbatim.",
    "branch": "The conversation below is a branch the user is leaving to explore another "
    "path; your summary tells the assistant what was tried there.",
}

SYSTEM_PROMPT = (
    "You write summaries of conversations between a user and an AI assistant so that an "
    "assistant can continue the work without the original messages. Do not continue the "
    "conversation and do not answer requests in it; only summarize. Be concrete: keep exact "
    "file paths, function names, commands, error messages and numbers."
)


def render_transcript(messages: Sequence[Message], *, result_chars: int = 2000) -> str:
    """Messages as plain text for a summarization prompt (tool results cut to
    ``result_chars``), so the model reads a transcript rather than continuing a chat."""
    lines: list[str] = []
    for m in messages:
        for b in m.content:
            if isinstance(b, TextBlock) and b.text.content.strip():
                lines.append(f"[{m.role}]: {b.text.content.strip()}")
            elif isinstance(b, ThinkingBlock) and b.thinking.content.strip():
                lines.append(f"[{m.role} thinking]: {b.thinking.content.strip()}")
            elif isinstance(b, ToolUseBlock):
                args = msgspec.json.encode(b.tool_use.input).decode()
                lines.append(f"[{m.role} tool call] {b.tool_use.name}({args})")
            elif isinstance(b, ToolResultBlock):
                c = b.tool_result.content
                body = (
                    c
                    if isinstance(c, str)
                    else "\n".join(
                        p.text.content if isinstance(p, TextBlock) else "[image]" for p in c
                    )
                )
                if len(body) > result_chars:
                    body = body[:result_chars] + f"… [{len(body) - result_chars} chars cut]"
                tag = "tool error" if b.tool_result.is_error else "tool result"
                lines.append(f"[{tag}]: {body}")
            elif isinstance(b, ImageBlock):
                lines.append(f"[{m.role}]: [image]")
    return "\n".join(lines)


class LLMSummarizer:
    """Summaries written by a model through :mod:`threadline.providers`.

    The prompt asks for the sections of :data:`SECTIONS` (goal, progress, key decisions, next
    steps, files) and passes the previous summary and the tracked files along. Provider
    failures propagate as :class:`~threadline.errors.ProviderError`, so nothing is written.
    """

    name = "llm"

    def __init__(
        self, provider: Provider, *, timeout: float = 120.0, max_tokens: int = 4096
    ) -> None:
        self.provider = provider
        self.timeout = timeout
        self.max_tokens = max_tokens

    def prompt(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str | None = None,
        files: FileOps | None = None,
        purpose: Purpose = "compaction",
        max_tokens: int | None = None,
    ) -> str:
        """The user prompt sent to the model (exposed for inspection and tests)."""
        parts = [
            _PURPOSE[purpose],
            "",
            "<conversation>",
            render_transcript(messages),
            "</conversation>",
        ]
        if previous_summary:
            parts += [
                "",
                "The summary of what came before (merge it into yours; keep every "
                "user request it lists):",
                "<previous-summary>",
                previous_summary,
                "</previous-summary>",
            ]
        if files and (files.read or files.modified):
            parts += [
                "",
                "Files read: " + (", ".join(files.read) or "none"),
                "Files modified: " + (", ".join(files.modified) or "none"),
            ]
        budget = f" Stay under {max_tokens} tokens." if max_tokens else ""
        parts += [
            "",
            "Write the summary in Markdown with exactly these sections: "
            + ", ".join(f"'## {s}'" for s in SECTIONS)
            + ". Goal: what the user wants, listing each request. Progress: what is done "
            "and what is in progress. Key decisions: choices made and why. Next steps: "
            "what to do next. Files: files read and modified." + budget,
        ]
        return "\n".join(parts)

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str | None = None,
        files: FileOps | None = None,
        purpose: Purpose = "compaction",
        max_tokens: int | None = None,
    ) -> str:
        prompt = self.prompt(
            messages,
            previous_summary=previous_summary,
            files=files,
            purpose=purpose,
            max_tokens=max_tokens,
        )
        reply = self.provider.complete(
            [Message(role="user", content=[text(prompt)])],
            system=SYSTEM_PROMPT,
            max_tokens=min(self.max_tokens, max_tokens or self.max_tokens),
            timeout=self.timeout,
        )
        summary = reply.text.strip()
        if not summary:
            raise ProviderError(
                f"Model '{self.provider.model}' returned an empty summary; "
                "retry or use the extractive summarizer"
            )
        return summary


# -- branch summaries ------------------------------------------------------------------------


class BranchSummaryPlan(msgspec.Struct, kw_only=True):
    """The abandoned part of a path: ``entry_ids`` from the common ancestor (exclusive) to the
    old leaf, the ``messages`` chosen for the summary (chronological, tool results left out),
    and the files touched on it."""

    from_id: str | None
    target_id: str | None
    common_ancestor_id: str | None
    entry_ids: list[str]
    messages: list[Message]
    files: FileOps


def prepare_branch_summary(
    session: Session,
    target_id: str | None,
    *,
    from_leaf: str | None = None,
    token_budget: int = 20_000,
) -> BranchSummaryPlan:
    """What a summary of the path being left (``from_leaf``, default the current leaf) covers
    when moving to ``target_id``: entries back to the common ancestor, tool results left out,
    newest first until ``token_budget`` is spent."""
    old = session.leaf_id if from_leaf is None else from_leaf
    old_path = session.path_ids(old) if old is not None else []
    new_path = session.path_ids(target_id) if target_id is not None else []
    common = 0
    for a, b in zip(old_path, new_path, strict=False):
        if a != b:
            break
        common += 1
    abandoned = old_path[common:]
    chosen: list[Message] = []
    all_msgs: list[Message] = []
    spent = 0
    budget_open = True
    for eid in reversed(abandoned):
        kind = session.state.types[eid]
        if kind not in ("message", "branch_summary", "compaction") or eid in session.state.purged:
            continue
        rec: Any = session.state.record(eid)
        if kind == "message":
            m = rec.message
        else:
            if not rec.payload.summary:
                continue
            role = "branchSummary" if kind == "branch_summary" else "compactionSummary"
            m = Message(role=role, content=[text(rec.payload.summary)])
        all_msgs.append(m)
        kept = [b for b in m.content if not isinstance(b, ToolResultBlock)]
        if not kept or m.role == "tool" or not budget_open:
            continue
        m = msgspec.structs.replace(m, content=kept)
        cost = estimate_message(m)
        if spent + cost > token_budget:
            budget_open = False
            continue
        spent += cost
        chosen.append(m)
    chosen.reverse()
    all_msgs.reverse()
    return BranchSummaryPlan(
        from_id=old,
        target_id=target_id,
        common_ancestor_id=old_path[common - 1] if common else None,
        entry_ids=abandoned,
        messages=chosen,
        files=file_ops(all_msgs),
    )


def summarize_branch(
    summarizer: Summarizer, plan: BranchSummaryPlan, *, max_tokens: int | None = None
) -> tuple[str, dict[str, Any]]:
    """``(summary, details)`` for a ``branch_summary`` entry (empty summary when nothing was
    abandoned)."""
    details: dict[str, Any] = {
        "read_files": plan.files.read,
        "modified_files": plan.files.modified,
        "summarizer": summarizer.name,
        "summarized_entries": len(plan.entry_ids),
    }
    if not plan.messages:
        return "", details
    return (
        summarizer.summarize(
            plan.messages, files=plan.files, purpose="branch", max_tokens=max_tokens
        ),
        details,
    )


__all__ = [
    "SECTIONS",
    "BranchSummaryPlan",
    "CompactionPlan",
    "CompactionResult",
    "CutPoint",
    "ExtractiveSummarizer",
    "FileOps",
    "LLMSummarizer",
    "Summarizer",
    "build_summary",
    "compact",
    "file_ops",
    "find_cut_point",
    "first_line",
    "is_cut_point",
    "prepare_branch_summary",
    "prepare_compaction",
    "render_transcript",
    "session_tokens",
    "should_compact",
    "summarize_branch",
]


def should_compact(tokens: int, context_window: int, reserve_tokens: int) -> bool:
    """True when ``tokens`` exceed ``context_window - reserve_tokens``."""
    return tokens > context_window - reserve_tokens
