"""The chat REPL (issue 4): turns recorded as entries, slash commands, completion, errors, and the
whole program driven in a real terminal (tmux) against a local OpenAI-compatible server."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

import threadline as tl
import threadline.cli.main  # cli.sessions must be imported through cli.main
from threadline.cli.bookmarks import clock
from threadline.providers import get_provider
from threadline.repl import COMMANDS, Chat, SlashCompleter
from threadline.testing import FakeOpenAIServer, HTTPFailure, TestProvider, tool_call


class Screen:
    """A Chat whose console writes to a buffer; ``take()`` returns the new output lines."""

    def __init__(
        self, store: tl.Store, provider: object, session: tl.Session | None = None
    ) -> None:
        self.buf = io.StringIO()
        self.chat = Chat(
            store,
            session or store.create(),
            provider,  # type: ignore[arg-type]
            console=Console(file=self.buf, width=200, color_system=None),
        )

    def run(self, line: str) -> list[str]:
        assert self.chat.handle(line) is True
        return self.take()

    def take(self) -> list[str]:
        out = self.buf.getvalue().splitlines()
        self.buf.seek(0)
        self.buf.truncate()
        return out


def roles_and_text(s: tl.Session) -> list[tuple[str, str]]:
    from threadline.cli.sessions import message_text

    return [(m.role, message_text(m)) for m in s.context().messages]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(
        [
            tool_call("echo", {"text": "pong"}, id="call_1", text_before="Calling echo."),
            "Echo said pong.",
        ]
    ) as srv:
        yield srv


# -- chatting ------------------------------------------------------------------------------------


def test_a_chat_with_a_tool_call_records_every_step_as_entries(server):
    store = tl.open_store("memory://")
    screen = Screen(store, get_provider("m", base_url=server.base_url))
    assert screen.run("ping the echo tool") == [
        "Calling echo.",
        '→ echo({"text": "pong"})',
        "← echo: pong",
        "Echo said pong.",
    ]
    s = screen.chat.session
    assert roles_and_text(s) == [
        ("user", "ping the echo tool"),
        ("assistant", 'Calling echo.\n→ echo({"text": "pong"}) [call_1]'),
        ("user", "← result [call_1]: pong"),
        ("assistant", "Echo said pong."),
    ]
    model = s.context().model
    assert (model.provider, model.model_id) == ("openai", "m")
    sent = server.requests[1].body
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "pong"}
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_time", "echo"]


def test_a_tool_result_turn_does_not_count_as_user_input_for_undo(server):
    store = tl.open_store("memory://")
    screen = Screen(store, get_provider("m", base_url=server.base_url))
    screen.run("ping the echo tool")
    screen.run("and now?")
    assert screen.run("/undo 2") == ["Removed last 2 user messages (6 total messages)"]


def test_markup_in_messages_is_printed_as_it_is():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    assert screen.run("[bold]not bold[/bold] [x]") == ["echo: [bold]not bold[/bold] [x]"]


def test_an_http_failure_is_one_line_and_records_nothing():
    store = tl.open_store("memory://")
    with FakeOpenAIServer([HTTPFailure(500)]) as srv:
        screen = Screen(store, get_provider("m", base_url=srv.base_url))
        assert screen.run("hello") == [
            f"Error: POST {srv.base_url}/chat/completions failed with HTTP 500: injected "
            "failure; the server failed; retry later"
        ]
        assert screen.chat.session.entry_ids() == []
        assert screen.run("hello again") == ["echo: hello again"]
        assert roles_and_text(screen.chat.session) == [
            ("user", "hello again"),
            ("assistant", "echo: hello again"),
        ]


def test_an_unreachable_endpoint_is_one_line_and_the_session_stays_intact():
    store = tl.open_store("memory://")
    s = store.create()
    s.append_message("user", "earlier")
    s.append_message("assistant", "reply")
    screen = Screen(store, get_provider("m", base_url="http://127.0.0.1:9/v1"), session=s)
    out = screen.run("hello")
    assert len(out) == 1
    assert out[0].startswith("Error: Cannot connect to http://127.0.0.1:9/v1/chat/completions (")
    assert out[0].endswith("); check that the server is running and the base URL is right")
    assert roles_and_text(s) == [("user", "earlier"), ("assistant", "reply")]


def test_a_missing_api_key_is_one_line(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = tl.open_store("memory://")
    screen = Screen(store, get_provider("gpt-4o-mini"))
    assert screen.run("hello") == [
        "Error: No API key for https://api.openai.com/v1/chat/completions; set $OPENAI_API_KEY "
        "or pass api_key=, or point --base-url at a local server"
    ]
    assert screen.chat.session.entry_ids() == []


def test_a_chat_through_the_anthropic_api_records_the_tool_round_trip():
    from threadline.testing import FakeAnthropicServer

    store = tl.open_store("memory://")
    with FakeAnthropicServer([tool_call("echo", {"text": "pong"}, id="toolu_1"), "Done."]) as srv:
        screen = Screen(store, get_provider("claude-test", base_url=srv.base_url, api_key="k"))
        assert screen.run("ping") == ['→ echo({"text": "pong"})', "← echo: pong", "Done."]
        assert srv.requests[1].body["messages"][-1] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "pong"}],
        }
    assert roles_and_text(screen.chat.session) == [
        ("user", "ping"),
        ("assistant", '→ echo({"text": "pong"}) [toolu_1]'),
        ("user", "← result [toolu_1]: pong"),
        ("assistant", "Done."),
    ]
    model = screen.chat.session.context().model
    assert (model.provider, model.model_id) == ("anthropic", "claude-test")


def test_a_session_locked_by_another_writer_is_one_line_and_asks_no_model(jsonl_store):
    holder = jsonl_store.create()
    holder.append_message("user", "mine")
    provider = TestProvider()
    screen = Screen(jsonl_store, provider, session=jsonl_store.open(holder.id))
    assert screen.run("hello") == [
        f"Error: Session '{holder.id}' is locked by pid {os.getpid()}; close the other writer "
        "or open read-only"
    ]
    assert provider.calls == []
    holder.close()
    assert screen.run("hello") == ["echo: hello"]


def test_the_chat_command_reads_piped_lines(tmp_path):
    from click.testing import CliRunner

    from threadline.cli.main import cli

    res = CliRunner().invoke(
        cli,
        ["--store", str(tmp_path), "chat", "--model", "test"],
        input="hello\n/tag first\n/undo\n",
    )
    lines = res.output.splitlines()
    assert res.exit_code == 0
    assert lines[1:] == [
        "echo: hello",
        "Tag 'first' created at position 2",
        "Removed last 1 user message (2 total messages)",
        "Tags left behind: first",
    ]
    sid = re.search(r"session ([0-9a-f-]{36})", lines[0]).group(1)
    res = CliRunner().invoke(
        cli, ["--store", str(tmp_path), "chat", "--continue"], input="/undo first\n"
    )
    assert res.output.splitlines()[1:] == [
        "Restored to tag 'first' on another branch (removed 0 messages, added 2)"
    ]
    assert res.output.startswith(f"threadline chat: session {sid} (0 messages)")


# -- slash commands ------------------------------------------------------------------------------


def test_tag_undo_and_tags_print_the_documented_lines():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    for q in ("one", "two"):
        screen.run(q)
    assert screen.run("/tag baseline 0") == ["Tag 'baseline' created at position 0"]
    assert screen.run("/tag experiment") == ["Tag 'experiment' created at position 4"]
    assert screen.run("/tag +") == ["Tag 'tag_1' created at position 4"]
    s = screen.chat.session
    # "/tag - List all tags (same as /tags)", as the tag seed shows
    assert (
        screen.run("/tag")
        == screen.run("/tags")
        == [
            "Current tags:",
            f"  [SPECIAL] __session_start__ → position    0 ({clock(s.header.timestamp)})",
            f"  baseline                    → position    0 "
            f"({clock(s.state.bookmark_times['baseline'])})",
            f"  experiment                  → position    4 "
            f"({clock(s.state.bookmark_times['experiment'])})",
            f"  tag_1                       → position    4 "
            f"({clock(s.state.bookmark_times['tag_1'])})",
        ]
    )
    for q in ("three", "four", "five"):
        screen.run(q)
    assert screen.run("/undo 2") == ["Removed last 2 user messages (4 total messages)"]
    s = screen.chat.session
    times = {n: clock(t) for n, t in s.state.bookmark_times.items()}
    assert screen.run("/tags") == [
        "Current tags:",
        f"  [SPECIAL] __session_start__ → position    0 ({clock(s.header.timestamp)})",
        f"  baseline                    → position    0 ({times['baseline']})",
        f"  experiment                  → position    4 ({times['experiment']})",
        f"  tag_1                       → position    4 ({times['tag_1']})",
    ]
    assert screen.run("/undo experiment") == ["Restored to tag 'experiment' (removed 2 messages)"]
    assert screen.run("/undo baseline") == [
        "Restored to tag 'baseline' (removed 4 messages)",
        "Tags left behind: experiment, tag_1",
    ]
    assert screen.run("/undo nope") == [
        f"Error: Tag 'nope' not found in session '{s.id}'; type /tags to list the tags"
    ]
    assert screen.run("/undo 0") == [
        "Error: Undo count must be a whole number of at least 1 (got 0)"
    ]


def test_undo_to_an_invalid_tag_prints_the_error_and_removes_it():
    store = tl.open_store("memory://")
    s = store.create()
    ids = [
        s.append_message("user", "q0"),
        s.append_message("assistant", "a0"),
        s.append_message("user", "q1"),
        s.append_message("assistant", "a1"),
    ]
    s.tag("experiment", 1)
    s.append_compaction("summary", ids[2])
    screen = Screen(store, TestProvider(), session=s)
    assert screen.run("/undo experiment") == [
        "Error: Tag 'experiment' is no longer valid (hash mismatch). Tag removed."
    ]
    assert "experiment" not in s.state.bookmarks


def test_clear_tree_branch_and_label():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    screen.run("one")
    s = screen.chat.session
    model_id, q1, a1 = s.entry_ids()
    assert screen.run("/tree") == [
        f"• ● {model_id} [model] test/test",
        f"• ● {q1} user: one",
        f"* ● {a1} assistant: echo: one",
    ]
    assert screen.run(f"/label {q1[:8]} first question") == [f"Label on {q1}: first question"]
    assert screen.run("/clear") == [
        "Conversation cleared (removed 2 messages); the old messages stay in the tree"
    ]
    assert screen.run("/context") == ["(the context is empty)"]
    assert screen.run("/branch first question") == [f"Leaf moved to {q1} (1 messages in context)"]
    assert screen.run("/branch zzz") == [
        f"Error: No entry 'zzz' in session '{s.id}'; /tree shows the entry ids"
    ]
    assert screen.run("/context") == ["[0] user: one"]


def test_compact_summarizes_and_a_tag_in_the_compacted_part_becomes_invalid():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    for q in ("one", "two", "three", "four"):
        screen.run(q)
    screen.run("/tag early 2")
    assert screen.run("/compact 20") == [
        "Compacted 4 messages into a summary (207 tokens before); context: 8 -> 5 messages"
    ]
    s = screen.chat.session
    assert [m.text for m in s.context().messages][1:] == [
        "three",
        "echo: three",
        "four",
        "echo: four",
    ]
    assert screen.run("/tags")[-1] == "Removed 1 invalid tag(s): early"
    assert screen.run("/undo 2") == [
        "Removed last 2 user messages (5 total messages)",
        "4 earlier messages are back in view (the history before a compaction)",
    ]
    assert [m.text for m in s.context().messages] == ["one", "echo: one", "two", "echo: two"]


def test_undo_when_the_view_holds_no_user_message_clears_it():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    for q in ("one", "two"):
        screen.run(q)
    screen.run("/compact 0")  # keeps only the last reply after the summary
    assert screen.run("/undo") == [
        "Cleared the view (2 total messages); it held no user messages to undo"
    ]


def test_branch_with_summarize_records_a_summary_of_the_branch_left_behind():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    for q in ("one", "two"):
        screen.run(q)
    s = screen.chat.session
    a1 = s.entry_ids()[2]
    out = screen.run(f"/branch {a1[:8]} --summarize")
    summary_id = s.leaf_id
    assert out == [
        f"Leaf moved to {a1} with a summary of the branch left behind "
        f"({summary_id}); 3 messages in context"
    ]
    assert s.entry(summary_id).type == "branch_summary"
    assert [m.role for m in s.context().messages] == ["user", "assistant", "branchSummary"]


def test_fork_sessions_and_resume_switch_the_session():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    screen.run("one")
    first = screen.chat.session.id
    out = screen.run("/fork")
    second = screen.chat.session.id
    assert out == [f"Forked session {first} into {second} (now active)"]
    assert roles_and_text(screen.chat.session) == [("user", "one"), ("assistant", "echo: one")]
    listing = screen.run("/sessions")
    assert sorted(line[:2] + line[2:38] for line in listing) == sorted(
        [f"* {second}", f"  {first}"]
    )
    assert screen.run(f"/resume {first}") == [f"Resumed session {first} (2 messages)"]
    assert screen.run("/resume nope") == [
        "Error: No session 'nope' in this store; /sessions lists them"
    ]


def test_help_and_unknown_commands():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    assert screen.run("/help") == ["Type a message to chat, or a command:"] + [
        f"  {cmd} {usage}" for cmd, usage in COMMANDS.items()
    ]
    assert screen.run("/nope") == ["Error: Unknown command /nope; type /help for the list"]
    assert screen.chat.handle("/quit") is False


# -- completion ----------------------------------------------------------------------------------


def complete(chat: Chat, line: str) -> list[str]:
    doc = Document(line, len(line))
    return [c.text for c in SlashCompleter(chat).get_completions(doc, CompleteEvent())]


def test_completion_of_commands_after_the_slash():
    store = tl.open_store("memory://")
    chat = Screen(store, TestProvider()).chat
    assert complete(chat, "/ta") == ["/tag", "/tags"]
    assert complete(chat, "/") == list(COMMANDS)
    assert complete(chat, "hello /ta") == []


def test_completion_of_tag_names_and_session_ids():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    screen.run("one")
    screen.run("/tag step1")
    screen.run("/tag step2")
    screen.run("/tag other")
    chat = screen.chat
    assert complete(chat, "/undo st") == ["step1", "step2"]
    assert complete(chat, "/undo __") == ["__session_start__"]
    assert complete(chat, "/tag o") == ["other"]
    assert complete(chat, "/undo step1 x") == []
    assert complete(chat, f"/resume {chat.session.id[:6]}") == [chat.session.id]


def test_the_prompt_loop_reads_lines_until_quit():
    store = tl.open_store("memory://")
    screen = Screen(store, TestProvider())
    with create_pipe_input() as pipe:
        pipe.send_text("hello\r/tag baseline 0\r/undo baseline\r/tree\r/quit\r")
        screen.chat.run(input=pipe, output=DummyOutput())
    s = screen.chat.session
    out = screen.take()
    assert out[1:4] == [
        "echo: hello",
        "Tag 'baseline' created at position 0",
        "Restored to tag 'baseline' (removed 2 messages)",
    ]
    assert out[4:] == [line for line in out[4:] if line[:2] in ("  ", "• ")]
    assert len(out[4:]) == 3
    assert s.leaf_id is None


# -- a real terminal -----------------------------------------------------------------------------


class Tmux:
    """One program in a detached tmux session on a private server socket; its exit status is
    written to a file when it ends."""

    def __init__(self, command: list[str], env: dict[str, str], status_file: Path) -> None:
        self.socket = f"threadline-test-{uuid.uuid4().hex[:8]}"
        self.name = "chat"
        self.status_file = status_file
        status_file.unlink(missing_ok=True)
        program = " ".join(
            ["env", *(f"{k}={shlex.quote(v)}" for k, v in env.items()), *map(shlex.quote, command)]
        )
        line = f"{program}; echo $? > {shlex.quote(str(status_file))}; sleep 60"
        self._tmux("new-session", "-d", "-s", self.name, "-x", "200", "-y", "50", line)

    def _tmux(self, *args: str) -> str:
        res = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return res.stdout

    def send(self, text: str, enter: bool = True) -> None:
        self._tmux("send-keys", "-t", self.name, "-l", text)
        if enter:
            self._tmux("send-keys", "-t", self.name, "Enter")

    def tab(self) -> None:
        self._tmux("send-keys", "-t", self.name, "Tab")

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-t", self.name, "-S", "-500")

    def wait_for(self, text: str, wait: float = 30.0) -> str:
        """Poll the screen until ``text`` shows (a wait, not a timing assertion)."""
        deadline = time.monotonic() + wait
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")
            time.sleep(0.05)

    def wait_exit(self, wait: float = 30.0) -> int:
        """Poll until the program has exited; its exit status."""
        deadline = time.monotonic() + wait
        while True:
            written = self.status_file.read_text() if self.status_file.exists() else ""
            if written.endswith("\n"):
                return int(written)
            if time.monotonic() > deadline:
                raise AssertionError(f"the program did not exit; the screen was:\n{self.screen()}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def chat_in_terminal(store_dir: Path, base_url: str, *args: str) -> Tmux:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TERM": "xterm-256color",
        "NO_COLOR": "1",
    }
    program = str(Path(sys.executable).parent / "threadline")
    return Tmux(
        [program, "--store", str(store_dir), "chat", "--model", "m", "--base-url", base_url, *args],
        env,
        store_dir.parent / "exit-status",
    )


def test_the_repl_in_a_real_terminal_chats_tags_undoes_and_resumes(tmp_path, server):
    assert shutil.which("tmux"), "this test drives a real terminal: apt-get install tmux"
    store_dir = tmp_path / "sessions"
    term = chat_in_terminal(store_dir, server.base_url)
    try:
        banner = term.wait_for("Ctrl-D to quit.")
        match = re.search(r"threadline chat: session ([0-9a-f-]{36}) \(0 messages\)", banner)
        assert match, banner
        sid = match.group(1)
        term.send("ping the echo tool")
        term.wait_for("Echo said pong.")
        term.send("/tag first")
        term.wait_for("Tag 'first' created at position 4")
        term.send("second question")
        term.wait_for("echo: second question")
        term.send("/tags")
        screen = term.wait_for("first                       → position    4 (")
        assert "[SPECIAL] __session_start__ → position    0 (" in screen
        term.send("/undo")
        term.wait_for("Removed last 1 user message (2 total messages)")
        term.send("/tr", enter=False)
        term.tab()
        term.wait_for("> /tree")  # completion is asynchronous: Enter must come after it
        term.send("")
        screen = term.wait_for("user: second question")
        assert re.search(r"^\* ● [0-9a-f-]{36} assistant: Echo said pong\.$", screen, re.M), screen
        term.send("/undo fi", enter=False)
        term.tab()
        term.wait_for("> /undo first")
        term.send("")
        term.wait_for("Already at tag 'first' (position 4)")
        term.send("/quit")
        assert term.wait_exit() == 0
    finally:
        term.close()

    term = chat_in_terminal(store_dir, server.base_url)
    try:
        term.wait_for("Ctrl-D to quit.")
        term.send(f"/resume {sid[:8]}")
        term.wait_for(f"Resumed session {sid} (4 messages)")
        term.send("/context")
        screen = term.wait_for("[3] assistant: Echo said pong.")
        assert "[0] user: ping the echo tool" in screen
        assert "[2] user: ← result [call_1]: pong" in screen
        term.send("/quit")
        assert term.wait_exit() == 0
    finally:
        term.close()

    s = tl.open_store(store_dir).open(sid, read_only=True)
    assert roles_and_text(s) == [
        ("user", "ping the echo tool"),
        ("assistant", 'Calling echo.\n→ echo({"text": "pong"}) [call_1]'),
        ("user", "← result [call_1]: pong"),
        ("assistant", "Echo said pong."),
    ]
    assert [(t.name, t.position, t.status) for t in s.tags()] == [
        ("__session_start__", 0, "valid"),
        ("first", 4, "valid"),
    ]
    abandoned = [
        e for e in s.entries() if e.type == "message" and e.payload.text == "second question"
    ]
    assert len(abandoned) == 1
    assert msgspec.to_builtins(s.tags()[1])["status"] == "valid"


def test_quitting_a_new_chat_at_once_leaves_no_empty_session(tmp_path):
    from click.testing import CliRunner

    from threadline.cli.main import cli

    res = CliRunner().invoke(cli, ["--store", str(tmp_path), "chat"], input="/help\n/quit\n")
    assert res.exit_code == 0
    assert tl.open_store(tmp_path).list() == []


def test_streamed_reasoning_gets_its_own_line_and_is_kept_in_the_reply():
    from threadline.model.content import thinking

    store = tl.open_store("memory://")

    class Thinker(TestProvider):
        def stream(self, messages, **kw):  # type: ignore[no-untyped-def]
            from threadline.providers.base import StreamEvent

            yield StreamEvent(kind="thinking", text="Let me ")
            yield StreamEvent(kind="thinking", text="think.")
            yield StreamEvent(kind="text", text="Answer.")
            yield StreamEvent(
                kind="done",
                message=tl.Message(
                    role="assistant", content=[thinking("Let me think."), tl.text("Answer.")]
                ),
            )

    screen = Screen(store, Thinker())
    assert screen.run("q") == ["Let me think.", "Answer."]
    reply = screen.chat.session.context().messages[1]
    assert [type(b).__name__ for b in reply.content] == ["ThinkingBlock", "TextBlock"]


def test_the_repl_compacts_by_itself_once_the_context_passes_the_window() -> None:
    store = tl.open_store("memory://")
    buf = io.StringIO()
    chat = Chat(
        store,
        store.create(),
        TestProvider(),
        console=Console(file=buf, width=200, color_system=None),
        context_window=1_000,
        reserve_tokens=200,
    )
    for i in range(12):
        assert chat.handle(f"question {i} " + "words " * 40) is True
    s = chat.session
    compactions = [e for e in s.path() if e.type == "compaction"]
    assert compactions, buf.getvalue()
    assert "Context compacted automatically:" in buf.getvalue()
    agent = chat.agent()
    assert agent is not None and agent.tokens().tokens <= 1_000 - 200  # under the threshold
    assert s.context().messages[0].role == "compactionSummary"


def test_the_chat_command_refuses_a_reserve_that_leaves_no_room(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    res = CliRunner().invoke(
        cli,
        ["--store", str(tmp_path), "chat", "--context-window", "100", "--reserve-tokens", "100"],
        input="",
    )
    assert res.exit_code == 2
    assert res.output == (
        "Error: --reserve-tokens 100 leaves no room in a context window of "
        "100 tokens; lower it or raise --context-window\n"
    )
