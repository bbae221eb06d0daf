"""The chat REPL behind ``threadline chat``: prompt_toolkit input, streamed replies, slash commands.

Every turn is recorded in the session as it happens: the user message and the assistant reply
(once the provider has answered), each tool call's result as a user message holding
``tool_result`` blocks, then the model's next reply. When the provider fails (missing key,
unreachable endpoint, HTTP error) the REPL prints one ``Error:`` line and records nothing for
that turn, so the session stays as it was.

Slash commands (``/help`` lists them): ``/tag [name|+] [position]`` (alone: list),
``/tags``, ``/undo [N|tag]``, ``/clear``, ``/tree``, ``/branch ENTRY``, ``/label ENTRY TEXT``,
``/fork``, ``/sessions``, ``/resume ID``, ``/context``, ``/compact [KEEP_TOKENS]``, ``/help``,
``/quit``; ``/branch ENTRY --summarize`` records a summary of the branch left behind. Summaries
come from the extractive summarizer unless an LLM one is given
(``threadline chat --llm-summaries``).

Tab completes command names, tag names after ``/tag`` and ``/undo``, session ids after
``/resume`` and entry ids and labels after ``/branch`` and ``/label``.

Output goes through a rich :class:`~rich.console.Console` with markup off, so text such as
``[x]`` in a message prints as it is.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from rich.console import Console

from threadline.agent import AgentSession
from threadline.compaction import (
    DEFAULT_KEEP_RECENT_TOKENS,
    ExtractiveSummarizer,
    Summarizer,
    compact,
    prepare_branch_summary,
    summarize_branch,
)
from threadline.errors import ProviderError, ThreadlineError, UserError
from threadline.model.content import Message, ToolUse, text, tool_result
from threadline.providers import provider_kind
from threadline.providers.base import Provider, ToolSpec

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from threadline.session import Session
    from threadline.stores import Store

MAX_TOOL_ROUNDS = 8
"""How many tool-call round trips one user message may trigger before the REPL stops asking."""

COMMANDS: dict[str, str] = {
    "/tag": "[name|+] [position]  tag a position (default: the end; '+': tag_1, tag_2, …); "
    "alone: list the tags",
    "/tags": "list tags with their status (invalid ones are removed)",
    "/undo": "[N|tag]  undo the last N user messages (default 1), or go back to a tag",
    "/clear": "start the conversation over (nothing is deleted)",
    "/tree": "show the session tree ('*' the leaf, '•' the current path)",
    "/branch": "ENTRY [--summarize]  move the leaf to an entry (id, unique id prefix or label);"
    " --summarize records a summary of the branch left behind",
    "/compact": "[KEEP_TOKENS]  summarize older messages, keeping about KEEP_TOKENS (default"
    " 20000) of the newest verbatim",
    "/label": "ENTRY TEXT  label an entry (no TEXT clears the label)",
    "/fork": "copy this session into a new one and continue there",
    "/sessions": "list the sessions of the store",
    "/resume": "ID  switch to another session (id or unique prefix)",
    "/context": "show what the model sees",
    "/help": "show this help",
    "/quit": "leave (Ctrl-D works too)",
}


# -- built-in tools ------------------------------------------------------------------------------


def _get_time(_input: dict[str, Any]) -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _echo(tool_input: dict[str, Any]) -> str:
    return str(tool_input.get("text", ""))


ToolFn = Callable[[dict[str, Any]], str]

BUILTIN_TOOLS: dict[str, tuple[ToolSpec, ToolFn]] = {
    "get_time": (
        ToolSpec(name="get_time", description="The current UTC time (RFC 3339)."),
        _get_time,
    ),
    "echo": (
        ToolSpec(
            name="echo",
            description="Return the given text unchanged.",
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        ),
        _echo,
    ),
}
"""The demonstration tools the REPL offers the model: ``get_time`` and ``echo``."""


def run_tool(tools: dict[str, tuple[ToolSpec, ToolFn]], call: ToolUse) -> tuple[str, bool]:
    """The result text of one tool call and whether it is an error."""
    found = tools.get(call.name)
    if found is None:
        return f"Unknown tool '{call.name}'; available: {', '.join(sorted(tools))}", True
    tool_input = call.input if isinstance(call.input, dict) else {}
    try:
        return found[1](tool_input), False
    except Exception as exc:  # a tool's failure goes back to the model as an error result
        return f"{type(exc).__name__}: {exc}", True


# -- completion ----------------------------------------------------------------------------------


class SlashCompleter(Completer):
    """Completes slash commands and their first argument.

    prompt_toolkit's ``WordCompleter`` treats ``/`` as a word boundary, so it cannot complete
    ``/ta`` to ``/tags``; this completer looks at the whole line instead.
    """

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        line = document.text_before_cursor
        if not line.startswith("/"):
            return
        if " " not in line:
            for cmd in COMMANDS:
                if cmd.startswith(line):
                    yield Completion(cmd, start_position=-len(line), display_meta=COMMANDS[cmd])
            return
        cmd, _, rest = line.partition(" ")
        if " " in rest:
            return  # only the first argument is completed
        for option in self.chat.argument_choices(cmd):
            if option.startswith(rest):
                yield Completion(option, start_position=-len(rest))


# -- the REPL ------------------------------------------------------------------------------------


class Chat:
    """A chat over one session of ``store``, answered by ``provider``.

    :meth:`handle` runs one input line (a message or a slash command) and is what the tests and
    :meth:`run` (the prompt loop) call. ``console`` receives every line of output.
    """

    def __init__(
        self,
        store: Store,
        session: Session,
        provider: Provider,
        *,
        provider_name: str | None = None,
        console: Console | None = None,
        tools: dict[str, tuple[ToolSpec, ToolFn]] | None = None,
        system: str | None = None,
        summarizer: Summarizer | None = None,
        context_window: int | None = None,
        reserve_tokens: int = 16384,
    ) -> None:
        self.store = store
        self.session = session
        #: with a window, every turn goes through an AgentSession, which compacts the session
        #: once its context passes ``context_window - reserve_tokens`` (None: never on its own)
        self.context_window = context_window
        self.reserve_tokens = reserve_tokens
        self.provider = provider
        self.provider_name = provider_name or provider_kind(provider.model, None)
        self.out = console or Console(highlight=False, soft_wrap=True)
        self.tools = BUILTIN_TOOLS if tools is None else tools
        self.system = system
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()

    # output
    def say(self, line: str = "", style: str | None = None, end: str = "\n") -> None:
        self.out.print(line, markup=False, highlight=False, style=style, end=end, soft_wrap=True)

    def error(self, exc: BaseException | str) -> None:
        text = exc.message_for(REPL_HINTS) if isinstance(exc, ThreadlineError) else str(exc)
        msg = text.strip().splitlines()
        self.say(f"Error: {msg[0] if msg else type(exc).__name__}", style="red")

    # loop
    def banner(self) -> None:
        s = self.session
        n = len(s.context().messages)
        self.say(
            f"threadline chat: session {s.id} ({n} messages), model "
            f"{self.provider_name}/{self.provider.model}. /help for commands, "
            "Ctrl-D to quit."
        )

    def run(self, input: Input | None = None, output: Output | None = None) -> None:
        """Prompt until ``/quit`` or end of input; the session is closed afterwards.

        When standard input is not a terminal (a pipe, a file), lines are read from it as they
        are, one message or command per line.
        """
        if input is None and not sys.stdin.isatty():
            self.banner()
            try:
                for raw in sys.stdin:
                    if not self.handle(raw):
                        break
            finally:
                self.session.close()
            return
        prompt: PromptSession[str] = PromptSession(
            completer=SlashCompleter(self),
            history=InMemoryHistory(),
            input=input,
            output=output,
            complete_while_typing=False,
        )
        self.banner()
        try:
            while True:
                try:
                    line = prompt.prompt("> ")
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    break
                if not self.handle(line):
                    break
        finally:
            self.session.close()

    def handle(self, line: str) -> bool:
        """Run one input line; ``False`` means quit."""
        line = line.strip()
        if not line:
            return True
        try:
            if line.startswith("/"):
                return self.command(line)
            self.chat(line)
        except ThreadlineError as exc:  # UserError, StoreError (a lock), ProviderError
            self.error(exc)
        return True

    # chatting
    def chat(self, line: str) -> None:
        """Send ``line`` (and any tool results that follow) and record the turn."""
        s = self.session
        # a session locked by another writer fails here, before the model call
        s.state.ensure_writer()
        fixed = s.repair(apply=True)  # calls a killed or interrupted turn left unanswered
        if fixed.applied:
            self.say(
                f"Answered {len(fixed.calls)} interrupted tool call(s) in the log; "
                f"`threadline repair {s.id} --undo` reverts it.",
                style="yellow",
            )
        pending: list[Message] = [Message(role="user", content=[text(line)])]
        for _ in range(MAX_TOOL_ROUNDS):
            reply = self._ask(list(s.context().messages) + pending)
            if reply is None:
                return  # the error is printed; nothing of this round is recorded
            if pending:
                self._record_model()
                for m in pending:
                    s.append_message(m)
                pending = []
            s.append_message(reply)
            calls = reply.tool_uses
            if not calls:
                self._auto_compact()
                return
            results = []
            for call in calls:
                result, is_error = run_tool(self.tools, call)
                self.say(f"← {call.name}: {result}", style="dim")
                results.append(tool_result(call.id, result, is_error=is_error))
            s.append_message("user", results)
        self.say(
            f"Stopped after {MAX_TOOL_ROUNDS} tool rounds; send a message to continue.",
            style="yellow",
        )

    def agent(self) -> AgentSession | None:
        """The agent loop over the current session (None without a context window)."""
        if self.context_window is None:
            return None
        keep = min(DEFAULT_KEEP_RECENT_TOKENS, (self.context_window - self.reserve_tokens) // 2)
        return AgentSession(
            self.session,
            context_window=self.context_window,
            reserve_tokens=self.reserve_tokens,
            keep_recent_tokens=keep,
            summarizer=self.summarizer,
        )

    def _auto_compact(self) -> None:
        agent = self.agent()
        result = agent.maybe_compact() if agent is not None else None
        if result is not None:
            n = len(result.plan.summarize_ids) + len(result.plan.turn_prefix_ids)
            self.say(
                f"Context compacted automatically: {n} messages summarized "
                f"({result.plan.tokens_before} tokens before, window "
                f"{self.context_window})",
                style="yellow",
            )

    def _record_model(self) -> None:
        model = self.session.context().model
        if model is None or (model.provider, model.model_id) != (
            self.provider_name,
            self.provider.model,
        ):
            self.session.append_model_change(self.provider_name, self.provider.model)

    def _ask(self, messages: Sequence[Message]) -> Message | None:
        specs = [spec for spec, _fn in self.tools.values()]
        midline = False
        thinking = False  # the reasoning gets its own line(s) before the reply text
        try:
            for ev in self.provider.stream(messages, system=self.system, tools=specs):
                if ev.kind == "text":
                    if thinking and midline:
                        self.say()
                    thinking = False
                    self.say(ev.text, end="")
                    midline = not ev.text.endswith("\n") if ev.text else midline
                elif ev.kind == "thinking":
                    if not thinking and midline:
                        self.say()
                    thinking = True
                    self.say(ev.text, style="dim italic", end="")
                    midline = True
                elif ev.kind == "tool_use" and ev.tool_use is not None:
                    if midline:
                        self.say()
                    args = json.dumps(ev.tool_use.input, ensure_ascii=False)
                    self.say(f"→ {ev.tool_use.name}({args})", style="dim")
                    midline = False
                elif ev.kind == "done" and ev.message is not None:
                    if midline:
                        self.say()
                    return ev.message
        except ProviderError as exc:
            if midline:
                self.say()
            self.error(exc)
            return None
        except KeyboardInterrupt:
            if midline:
                self.say()
            self.say("Interrupted; this reply was not recorded.", style="yellow")
            return None
        if midline:
            self.say()
        self.error("The provider's stream ended without a final message; nothing was recorded")
        return None

    # slash commands
    def command(self, line: str) -> bool:
        cmd, _, rest = line.partition(" ")
        args = rest.split()
        if cmd in ("/quit", "/exit"):
            return False
        handler = {
            "/tag": self.cmd_tag,
            "/tags": self.cmd_tags,
            "/undo": self.cmd_undo,
            "/clear": self.cmd_clear,
            "/tree": self.cmd_tree,
            "/branch": self.cmd_branch,
            "/fork": self.cmd_fork,
            "/sessions": self.cmd_sessions,
            "/resume": self.cmd_resume,
            "/context": self.cmd_context,
            "/help": self.cmd_help,
            "/compact": self.cmd_compact,
        }.get(cmd)
        if cmd == "/label":
            self.cmd_label(rest)
        elif handler is None:
            raise UserError(f"Unknown command {cmd}; type /help for the list")
        else:
            handler(args)
        return True

    def _lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.say(line)

    def cmd_tag(self, args: list[str]) -> None:
        from threadline.cli.bookmarks import format_tag_created, parse_position

        if len(args) > 2:
            raise UserError("Usage: /tag [name|+] [position]")
        if not args:  # as the tag seed shows: /tag alone lists the tags, like /tags
            self.cmd_tags(args)
            return
        name = None if args[0] == "+" else args[0]  # "+": an anonymous tag (tag_1, tag_2, …)
        position = parse_position(args[1]) if len(args) > 1 else None
        moved = name is not None and name in self.session.state.bookmarks
        self.say(format_tag_created(self.session.tag(name, position), moved))

    def cmd_tags(self, args: list[str]) -> None:
        from threadline.cli.bookmarks import format_listing

        self._lines(format_listing(self.session.tags()))

    def cmd_undo(self, args: list[str]) -> None:
        from threadline.cli.bookmarks import format_undo, format_undo_to

        if len(args) > 1:
            raise UserError("Usage: /undo [N|tag]")
        arg = args[0] if args else "1"
        try:
            n = int(arg)
        except ValueError:
            self._lines(format_undo_to(self.session.undo_to(arg)))
            return
        self._lines(format_undo(self.session.undo(n), n))

    def cmd_clear(self, args: list[str]) -> None:
        from threadline.cli.bookmarks import format_clear

        self._lines(format_clear(self.session.clear()))

    def cmd_tree(self, args: list[str]) -> None:
        for line in tree_lines(self.session):
            self.say(line)

    def resolve_entry(self, ref: str) -> str:
        """An entry id from an id, a unique id prefix or a label."""
        s = self.session
        if s.has_entry(ref):
            return ref
        by_label = [eid for eid, lab in s.labels().items() if lab == ref]
        if len(by_label) == 1:
            return by_label[0]
        matches = [eid for eid in s.entry_ids() if eid.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UserError(f"No entry '{ref}' in session '{s.id}'; /tree shows the entry ids")
        raise UserError(f"Entry prefix '{ref}' matches {len(matches)} entries; type more of it")

    def cmd_branch(self, args: list[str]) -> None:
        summarize = "--summarize" in args
        args = [a for a in args if a != "--summarize"]
        if not args:
            raise UserError(
                "Usage: /branch ENTRY [--summarize] (an id, a unique id prefix or a label)"
            )
        s = self.session
        eid = self.resolve_entry(" ".join(args))
        summary_id = None
        if summarize:
            plan = prepare_branch_summary(s, eid)
            summary, details = summarize_branch(self.summarizer, plan)
            if summary:
                summary_id = s.branch_with_summary(eid, summary, details)
        if summary_id is None:
            s.branch(eid)
        n = len(s.context().messages)
        if summary_id is not None:
            self.say(
                f"Leaf moved to {eid} with a summary of the branch left behind "
                f"({summary_id}); {n} messages in context"
            )
        else:
            self.say(f"Leaf moved to {eid} ({n} messages in context)")

    def cmd_compact(self, args: list[str]) -> None:
        if len(args) > 1:
            raise UserError("Usage: /compact [KEEP_TOKENS]")
        keep = DEFAULT_KEEP_RECENT_TOKENS
        if args:
            try:
                keep = int(args[0])
            except ValueError:
                raise UserError(f"KEEP_TOKENS must be a whole number, got {args[0]!r}") from None
        before = len(self.session.context().messages)
        result = compact(self.session, self.summarizer, keep_recent_tokens=keep)
        after = len(self.session.context().messages)
        self.say(
            f"Compacted {len(result.plan.summarize_ids) + len(result.plan.turn_prefix_ids)}"
            f" messages into a summary ({result.plan.tokens_before} tokens before); "
            f"context: {before} -> {after} messages"
        )

    def cmd_label(self, rest: str) -> None:
        ref, _, label = rest.strip().partition(" ")
        if not ref:
            raise UserError("Usage: /label ENTRY TEXT (no TEXT clears the label)")
        eid = self.resolve_entry(ref)
        label = label.strip()
        self.session.set_label(eid, label or None)
        self.say(f"Label on {eid}: {label}" if label else f"Label on {eid} cleared")

    def _switch(self, session: Session) -> None:
        self.session.close()
        self.session = session

    def cmd_fork(self, args: list[str]) -> None:
        old = self.session.id
        self._switch(self.store.fork(old))
        self.say(f"Forked session {old} into {self.session.id} (now active)")

    def cmd_sessions(self, args: list[str]) -> None:
        one_line = _cli_sessions().one_line
        rows = self.store.list()
        for r in rows:
            mark = "*" if r.id == self.session.id else " "
            name = f" {r.name}" if r.name else ""
            first = one_line(r.first_message or "", 50)
            self.say(f"{mark} {r.id}{name}  {r.modified}  {r.message_count} messages  {first}")

    def cmd_resume(self, args: list[str]) -> None:
        if len(args) != 1:
            raise UserError("Usage: /resume ID (a session id or a unique prefix)")
        ref = args[0]
        ids = [r.id for r in self.store.list()]
        matches = [ref] if ref in ids else [i for i in ids if i.startswith(ref)]
        if not matches:
            raise UserError(f"No session '{ref}' in this store; /sessions lists them")
        if len(matches) > 1:
            raise UserError(
                f"Session prefix '{ref}' matches {len(matches)} sessions; type more of it"
            )
        self._switch(self.store.open(matches[0]))
        n = len(self.session.context().messages)
        self.say(f"Resumed session {self.session.id} ({n} messages)")

    def cmd_context(self, args: list[str]) -> None:
        helpers = _cli_sessions()
        ctx = self.session.context()
        if not len(ctx.messages):
            self.say("(the context is empty)")
        for i, msg in enumerate(ctx.messages):
            self.say(f"[{i}] {msg.role}: {helpers.one_line(helpers.message_text(msg), 100)}")

    def cmd_help(self, args: list[str]) -> None:
        self.say("Type a message to chat, or a command:")
        for cmd, usage in COMMANDS.items():
            self.say(f"  {cmd} {usage}")

    # completion support
    def argument_choices(self, cmd: str) -> list[str]:
        """What the first argument of ``cmd`` may be, for tab completion."""
        s = self.session
        if cmd in ("/tag", "/undo"):
            names = sorted(n for n in s.state.bookmarks if not n.startswith("__"))
            return names + (["__session_start__"] if cmd == "/undo" else [])
        if cmd == "/resume":
            return [r.id for r in self.store.list()]
        if cmd in ("/branch", "/label"):
            return sorted(set(s.labels().values())) + s.path_ids()[::-1]
        return []


def _cli_sessions() -> Any:
    """The CLI's text helpers (``cli.sessions`` must be imported through ``cli.main``, which
    registers the command modules in order)."""
    import threadline.cli.main  # noqa: F401
    from threadline.cli import sessions

    return sessions


#: How an error's next step is worded in the REPL (see threadline.errors.Hint).
REPL_HINTS = {
    "list_sessions": "type /sessions to list them",
    "list_entries": "type /tree to see the entry ids",
    "list_tags": "type /tags to list the tags",
    "rebuild_catalog": "run threadline catalog rebuild in a shell",
}


def tree_lines(session: Session) -> list[str]:
    """The session tree as text lines, drawn as the CLI's ``tree`` draws it (lanes, '*' the
    leaf, '•' the current path, runs of bookkeeping entries folded into one line)."""
    lines: list[str] = _cli_sessions().tree_lines(session)
    return lines or ["(the session is empty)"]
