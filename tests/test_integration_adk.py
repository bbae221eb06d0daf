"""threadline as a Google ADK session service: ADK's session contract (state scopes, temp state,
GetSessionConfig, stale writers, lossless events) over JSONL, SQLite and PostgreSQL, and an ADK
Runner conversation with a tool call kept as a threadline session."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import warnings
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event, EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

import threadline as tl
from conftest import PG_URL, make_store, pg_schema
from threadline.integrations.adk import ThreadlineSessionService
from threadline.render import message_text


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tl.Store]:
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


@pytest.fixture
def service(backend: tl.Store) -> ThreadlineSessionService:
    return ThreadlineSessionService(backend)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


TURNS = Path(__file__).with_name("framework_turns.py")


def location(kind: str, tmp_path: Path) -> dict[str, Any]:
    """A store location a new process can open too."""
    if kind == "jsonl":
        return {"url": str(tmp_path / "sessions")}
    if kind == "sqlite":
        return {"url": f"sqlite:///{tmp_path}/store.db"}
    return {"url": PG_URL, "options": {"tenant": "test", "schema": pg_schema()}}


def test_a_created_session_reads_back_equal_and_is_gone_after_delete(
    service: ThreadlineSessionService,
) -> None:
    s = run(service.create_session(app_name="app", user_id="u", state={"k": "v"}))
    assert (s.app_name, s.user_id, s.state) == ("app", "u", {"k": "v"})
    assert run(service.get_session(app_name="app", user_id="u", session_id=s.id)) == s
    run(service.delete_session(app_name="app", user_id="u", session_id=s.id))
    assert run(service.get_session(app_name="app", user_id="u", session_id=s.id)) is None
    assert run(service.list_sessions(app_name="app", user_id="u")).sessions == []


def test_creating_an_existing_id_raises_already_exists(service: ThreadlineSessionService) -> None:
    run(service.create_session(app_name="app", user_id="u", session_id="s1"))
    with pytest.raises(AlreadyExistsError):
        run(service.create_session(app_name="app", user_id="u", session_id="s1"))


def test_state_scopes_app_user_session_and_temp(service: ThreadlineSessionService) -> None:
    async def scenario() -> list[Any]:
        s1 = await service.create_session(
            app_name="app", user_id="u1", session_id="s1", state={"app:a": 1, "user:b": 2, "own": 3}
        )
        delta = {"app:a2": 4, "user:b2": 5, "own2": 6, "temp:t": 7}
        await service.append_event(
            s1, Event(author="user", invocation_id="i1", actions=EventActions(state_delta=delta))
        )
        same_user = await service.create_session(app_name="app", user_id="u1", session_id="s2")
        other_user = await service.create_session(app_name="app", user_id="u2", session_id="s3")
        again = await service.get_session(app_name="app", user_id="u1", session_id="s1")
        return [
            s1.state,
            same_user.state,
            other_user.state,
            again.state,
            s1.events[0].actions.state_delta,
            await service.get_user_state(app_name="app", user_id="u1"),
        ]

    s1, same_user, other_user, again, delta, user_state = run(scenario())
    assert s1 == {
        "app:a": 1,
        "user:b": 2,
        "own": 3,
        "app:a2": 4,
        "user:b2": 5,
        "own2": 6,
        "temp:t": 7,
    }
    assert same_user == {"app:a": 1, "app:a2": 4, "user:b": 2, "user:b2": 5}
    assert other_user == {"app:a": 1, "app:a2": 4}
    assert again == {"own": 3, "own2": 6, "app:a": 1, "app:a2": 4, "user:b": 2, "user:b2": 5}
    assert delta == {"app:a2": 4, "user:b2": 5, "own2": 6}
    assert user_state == {"b": 2, "b2": 5}


def test_the_same_session_id_under_two_users_is_two_sessions(
    service: ThreadlineSessionService,
) -> None:
    s = run(service.create_session(app_name="app", user_id="u1", session_id="s1"))
    run(service.append_event(s, Event(author="user", invocation_id="i")))
    run(service.create_session(app_name="app", user_id="u2", session_id="s1"))
    got = run(service.get_session(app_name="app", user_id="u2", session_id="s1"))
    assert (got.user_id, got.events) == ("u2", [])


def test_list_sessions_per_user_and_for_the_whole_app(service: ThreadlineSessionService) -> None:
    for user, sid in [("u1", "a"), ("u1", "b"), ("u2", "c")]:
        run(
            service.create_session(app_name="app", user_id=user, session_id=sid, state={"key": sid})
        )
    one = run(service.list_sessions(app_name="app", user_id="u1")).sessions
    every = run(service.list_sessions(app_name="app")).sessions
    assert [(s.id, s.state) for s in one] == [("a", {"key": "a"}), ("b", {"key": "b"})]
    assert sorted(s.id for s in every) == ["a", "b", "c"]


def test_events_come_back_equal_with_bytes_and_every_field(
    service: ThreadlineSessionService,
) -> None:
    s = run(service.create_session(app_name="app", user_id="u"))
    event = Event(
        invocation_id="inv",
        author="user",
        turn_complete=True,
        partial=False,
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="look"),
                types.Part.from_bytes(data=b"\x89PNG-bytes", mime_type="image/png"),
            ],
        ),
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="code",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["q"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        custom_metadata={"k": "v"},
        timestamp=1700000000.123,
    )
    run(service.append_event(s, event))
    got = run(service.get_session(app_name="app", user_id="u", session_id=s.id))
    assert got == s
    assert got.last_update_time == 1700000000.123


def test_get_session_config_limits_and_filters_events(service: ThreadlineSessionService) -> None:
    s = run(service.create_session(app_name="app", user_id="u"))
    for t in range(1, 6):
        run(service.append_event(s, Event(author="user", timestamp=t)))

    def stamps(**config: Any) -> list[float]:
        got = run(
            service.get_session(
                app_name="app", user_id="u", session_id=s.id, config=GetSessionConfig(**config)
            )
        )
        return [e.timestamp for e in got.events]

    assert stamps() == [1, 2, 3, 4, 5]
    assert stamps(num_recent_events=0) == []
    assert stamps(num_recent_events=3) == [3, 4, 5]
    assert stamps(after_timestamp=4.0) == [4, 5]
    assert stamps(after_timestamp=50) == []
    assert stamps(after_timestamp=4.0, num_recent_events=3) == [4, 5]


def test_partial_events_are_not_stored(service: ThreadlineSessionService) -> None:
    s = run(service.create_session(app_name="app", user_id="u"))
    run(service.append_event(s, Event(author="user", partial=True)))
    got = run(service.get_session(app_name="app", user_id="u", session_id=s.id))
    assert (s.events, got.events) == ([], [])


def test_a_stale_session_copy_cannot_append(service: ThreadlineSessionService) -> None:
    async def scenario() -> Any:
        s = await service.create_session(app_name="app", user_id="u")
        t = s.last_update_time
        await service.append_event(s, Event(author="user", invocation_id="1", timestamp=t + 1))
        fresh = await service.get_session(app_name="app", user_id="u", session_id=s.id)
        await service.append_event(fresh, Event(author="user", invocation_id="2", timestamp=t + 2))
        with pytest.raises(ValueError, match="modified in storage"):
            await service.append_event(s, Event(author="user", invocation_id="3", timestamp=t + 3))
        return await service.get_session(app_name="app", user_id="u", session_id=s.id)

    final = run(scenario())
    assert [e.invocation_id for e in final.events] == ["1", "2"]


def test_undo_in_threadline_rolls_back_the_events_and_their_state(
    service: ThreadlineSessionService, backend: tl.Store
) -> None:
    s = run(service.create_session(app_name="app", user_id="u", session_id="s"))
    for n, word in enumerate(["one", "two"]):
        run(
            service.append_event(
                s,
                Event(
                    author="user",
                    invocation_id=f"i{n}",
                    content=types.Content(role="user", parts=[types.Part(text=word)]),
                    actions=EventActions(state_delta={"last": word}),
                ),
            )
        )
    run(service.close())
    tid = ThreadlineSessionService.threadline_id("app", "u", "s")
    with backend.open(tid) as ts:
        assert [message_text(m) for m in ts.context().messages] == ["one", "two"]
        ts.undo(1)
    got = run(
        ThreadlineSessionService(backend).get_session(app_name="app", user_id="u", session_id="s")
    )
    assert ([e.content.parts[0].text for e in got.events], got.state) == (["one"], {"last": "one"})


def test_appending_to_an_unknown_or_deleted_session_raises_session_not_found(
    service: ThreadlineSessionService,
) -> None:
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.sessions import Session

    never = Session(app_name="app", user_id="u", id="never_created")
    with pytest.raises(SessionNotFoundError, match="does not exist; create_session"):
        run(service.append_event(never, Event(author="user", invocation_id="1")))
    s = run(service.create_session(app_name="app", user_id="u", session_id="gone"))
    run(service.delete_session(app_name="app", user_id="u", session_id="gone"))
    with pytest.raises(SessionNotFoundError):
        run(service.append_event(s, Event(author="user", invocation_id="2")))
    assert run(service.get_session(app_name="app", user_id="u", session_id="gone")) is None


def test_a_padded_session_id_reads_and_deletes_the_session_created_under_it(
    service: ThreadlineSessionService,
) -> None:
    """create_session strips the id (ADK's rule); get and delete with the padded id find it."""
    s = run(service.create_session(app_name="app", user_id="u", session_id="  s1  "))
    assert s.id == "s1"
    got = run(service.get_session(app_name="app", user_id="u", session_id=" s1 "))
    assert got is not None and got.id == "s1"
    run(service.delete_session(app_name="app", user_id="u", session_id="s1  "))
    assert run(service.get_session(app_name="app", user_id="u", session_id="s1")) is None


def test_events_read_back_are_copies_the_caller_may_change(
    service: ThreadlineSessionService,
) -> None:
    """get_session decodes each stored event once per open session; what it returns are copies
    (as ADK's own services return), so changing them changes neither the store nor later reads."""
    s = run(service.create_session(app_name="app", user_id="u", session_id="s"))
    first = Event(
        author="user",
        invocation_id="i1",
        content=types.Content(role="user", parts=[types.Part(text="hello")]),
        actions=EventActions(state_delta={"seen": ["a"]}),
    )
    run(service.append_event(s, first))
    got = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    got.events[0].content.parts[0].text = "changed"
    got.events[0].actions.state_delta["seen"].append("b")
    got.state["seen"].append("c")
    got.events.clear()
    again = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    assert [e.content.parts[0].text for e in again.events] == ["hello"]
    assert again.events[0].actions.state_delta == {"seen": ["a"]}
    assert again.state == {"seen": ["a"]}
    assert again.events[0] == first


def test_events_read_back_are_shared_under_adks_light_copy_feature(
    service: ThreadlineSessionService,
) -> None:
    """ADK's IN_MEMORY_SESSION_SERVICE_LIGHT_COPY feature lets a service hand out its events
    uncopied; with it on, two reads give the same event objects, with it off, equal copies."""
    from google.adk.features import FeatureName, override_feature_enabled

    s = run(service.create_session(app_name="app", user_id="u", session_id="s"))
    run(service.append_event(s, Event(author="user", invocation_id="i1")))

    def read() -> Any:
        return run(service.get_session(app_name="app", user_id="u", session_id="s")).events[0]

    assert read() is not read() and read() == read()
    override_feature_enabled(FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY, True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # ADK warns that a WIP feature is on
            assert read() is read()
    finally:
        override_feature_enabled(FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY, False)


def test_a_tool_result_written_after_a_read_gets_its_tool_name_from_the_earlier_call(
    service: ThreadlineSessionService, backend: tl.Store
) -> None:
    """An event made from another framework's tool result names the function of the call it
    answers; the call was decoded (and kept) by an earlier read, the result is new."""
    s = run(service.create_session(app_name="app", user_id="u", session_id="s"))
    call = types.Part(
        function_call=types.FunctionCall(id="c1", name="weather", args={"city": "Paris"})
    )
    run(
        service.append_event(
            s,
            Event(
                author="helper",
                invocation_id="i1",
                content=types.Content(role="model", parts=[call]),
            ),
        )
    )
    assert len(run(service.get_session(app_name="app", user_id="u", session_id="s")).events) == 1
    ts = service._open[ThreadlineSessionService.threadline_id("app", "u", "s")]
    ts.append_message(tl.Message(role="tool", content=[tl.tool_result("c1", "Sunny")]))
    got = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    response = got.events[1].content.parts[0].function_response
    assert (response.id, response.name) == ("c1", "weather")


def test_undo_after_a_read_drops_the_undone_events_from_the_next_read(
    service: ThreadlineSessionService,
) -> None:
    """Decoded events are kept per entry, not per session: the next read walks the current
    path again, so threadline's undo through the open session shows at once."""
    s = run(service.create_session(app_name="app", user_id="u", session_id="s"))
    for n in range(3):
        run(
            service.append_event(
                s,
                Event(
                    author="user",
                    invocation_id=f"i{n}",
                    content=types.Content(role="user", parts=[types.Part(text=f"m{n}")]),
                    actions=EventActions(state_delta={"n": n}),
                ),
            )
        )
    assert len(run(service.get_session(app_name="app", user_id="u", session_id="s")).events) == 3
    service._open[ThreadlineSessionService.threadline_id("app", "u", "s")].undo(2)
    got = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    assert ([e.invocation_id for e in got.events], got.state) == (["i0"], {"n": 0})


# -- a real ADK Runner conversation with a tool call -------------------------------------------


def scripted_llm(replies: list[types.Content]) -> Any:
    """A BaseLlm answering with the given contents in turn (ADK ships no offline model)."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse

    class Scripted(BaseLlm):  # type: ignore[misc]
        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: Any, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            yield LlmResponse(content=replies.pop(0))

    return Scripted()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_an_adk_runner_conversation_with_a_tool_call_persists_and_continues_in_a_new_process(
    kind: str, tmp_path: Path
) -> None:
    where = location(kind, tmp_path)
    backend = tl.open_store(where["url"], **where.get("options", {}))
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner

    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}"

    llm = scripted_llm(
        [
            types.Content(
                role="model",
                parts=[
                    types.Part(
                        function_call=types.FunctionCall(
                            id="call_1", name="weather", args={"city": "Paris"}
                        )
                    )
                ],
            ),
            types.Content(role="model", parts=[types.Part(text="Sunny in Paris.")]),
        ]
    )
    service = ThreadlineSessionService(backend)
    runner = Runner(
        agent=LlmAgent(name="helper", model=llm, tools=[weather]),
        app_name="app",
        session_service=service,
    )

    async def scenario() -> None:
        await service.create_session(app_name="app", user_id="u", session_id="s")
        async for _ in runner.run_async(
            user_id="u",
            session_id="s",
            new_message=types.Content(role="user", parts=[types.Part(text="Weather in Paris?")]),
        ):
            pass
        await service.close()

    run(scenario())
    out = subprocess.run(
        [sys.executable, str(TURNS), "adk", json.dumps(where), "s", "Thanks"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "You said before: ['Weather in Paris?']\n"
    with backend.open(ThreadlineSessionService.threadline_id("app", "u", "s")) as ts:
        ctx = ts.context()
        assert [(m.role, message_text(m, with_ids=False)) for m in ctx.messages] == [
            ("user", "Weather in Paris?"),
            ("assistant", '→ weather({"city": "Paris"})'),
            ("user", "← result: Sunny in Paris"),
            ("assistant", "Sunny in Paris."),
            ("user", "Thanks"),
            ("assistant", "You said before: ['Weather in Paris?']"),
        ]
    backend.close()


def test_decoded_events_are_kept_for_the_most_recently_read_sessions_only(
    service: ThreadlineSessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoded events of at most DECODED_SESSIONS sessions stay in memory (the least
    recently read go first); a session read again after that is decoded again, unchanged."""
    from threadline.integrations import adk

    monkeypatch.setattr(adk, "DECODED_SESSIONS", 2)
    for sid in ("a", "b", "c"):
        s = run(service.create_session(app_name="app", user_id="u", session_id=sid))
        text = types.Content(role="user", parts=[types.Part(text=f"in {sid}")])
        run(service.append_event(s, Event(author="user", invocation_id=sid, content=text)))

    def read(sid: str) -> list[str]:
        got = run(service.get_session(app_name="app", user_id="u", session_id=sid))
        return [e.content.parts[0].text for e in got.events]

    assert (read("a"), read("b"), read("c")) == (["in a"], ["in b"], ["in c"])
    kept = {ThreadlineSessionService.threadline_id("app", "u", x): x for x in "abc"}
    assert [kept[t] for t in service._items] == ["b", "c"]
    assert read("a") == ["in a"]
    assert [kept[t] for t in service._items] == ["c", "a"]


def test_a_purge_after_a_read_removes_the_purged_event_from_the_next_read(
    service: ThreadlineSessionService,
) -> None:
    """A purge is the one change to a stored entry: an event decoded by an earlier read is not
    served from memory once its content was purged."""
    s = run(service.create_session(app_name="app", user_id="u", session_id="s"))
    for n, word in enumerate(["keep", "secret"]):
        content = types.Content(role="user", parts=[types.Part(text=word)])
        run(service.append_event(s, Event(author="user", invocation_id=f"i{n}", content=content)))
    got = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    assert [e.content.parts[0].text for e in got.events] == ["keep", "secret"]
    ts = service._open[ThreadlineSessionService.threadline_id("app", "u", "s")]
    ts.purge([got.events[1].id], dry_run=False)
    again = run(service.get_session(app_name="app", user_id="u", session_id="s"))
    assert [e.content.parts[0].text for e in again.events] == ["keep"]
