"""Per-turn cost of threadline's framework adapters against each framework's own store, side by
side in one run, at several history lengths.

    .venv/bin/python bench/frameworks.py --sizes 1000 10000 --turns 40

For each framework a session is prefilled with N items through the adapter and through the
framework's store, then each turn's store work is timed, alternating the two stores turn by
turn (median of ``--turns``):

- OpenAI Agents (``ThreadlineSession`` vs ``SQLiteSession`` on a file): a turn's writes are
  ``add_items`` of the user input and of the reply; ``Runner.run`` also reads the history
  (``get_items()``, every item: linear in N for every store), reported on its own line;
- Google ADK (``ThreadlineSessionService`` vs ``SqliteSessionService``): ``append_event`` of
  the user event and of the model event; ``get_session`` (all events) on its own line;
- Strands (``ThreadlineSessionRepository`` vs ``FileSessionManager``): ``create_message`` of
  the user and assistant messages and one ``update_agent`` (what ``RepositorySessionManager``
  does per turn). FileSessionManager never fsyncs its files, so threadline is timed twice: at
  that same durability (``flush``: written to the OS, no fsync) and at its default (``fsync``).

threadline uses its default store (JSONL files) with ``durability="fsync"`` (every append is on
disk when acknowledged; the SQLite stores of OpenAI Agents and ADK sync too); ``--store sqlite``
uses the SQLite store instead, ``--durability flush`` skips the fsync for OpenAI Agents and ADK.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import threadline as tl


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e6


def alternate(
    ours: Callable[[], Any], theirs: Callable[[], Any], turns: int
) -> tuple[float, float]:
    a, b = [], []
    for _ in range(turns):
        a.append(timed(ours))
        b.append(timed(theirs))
    return statistics.median(a), statistics.median(b)


DURABILITY = {"value": "fsync"}


def store_url(root: Path, kind: str, name: str) -> str:
    return str(root / name) if kind == "jsonl" else f"sqlite:///{root}/{name}.db"


def open_store(url: str) -> tl.Store:
    return tl.open_store(url, durability=DURABILITY["value"])  # type: ignore[arg-type]


# -- OpenAI Agents ---------------------------------------------------------------------------


def openai_agents(root: Path, kind: str, n: int, turns: int) -> list[tuple[str, float, float]]:
    from agents import SQLiteSession

    from threadline.integrations.openai_agents import ThreadlineSession

    def item(k: int) -> dict[str, Any]:
        if k % 2 == 0:
            return {"role": "user", "content": f"question {k}"}
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"answer {k}", "annotations": []}],
        }

    history = [item(k) for k in range(n)]
    url = store_url(root, kind, f"oa{n}")
    ours = ThreadlineSession("bench", open_store(url))
    theirs = SQLiteSession("bench", root / f"oa{n}-sdk.db")
    loop = asyncio.new_event_loop()
    loop.run_until_complete(ours.add_items(history))
    loop.run_until_complete(theirs.add_items(history))

    def turn(s: Any) -> Callable[[], Any]:
        return lambda: loop.run_until_complete(_two_adds(s, item))

    write = alternate(turn(ours), turn(theirs), turns)
    read = alternate(
        lambda: loop.run_until_complete(ours.get_items()),
        lambda: loop.run_until_complete(theirs.get_items()),
        max(5, turns // 4),
    )
    ours.close()
    theirs.close()
    loop.close()
    return [
        ("OpenAI Agents: turn writes (2 add_items)", *write),
        ("OpenAI Agents: get_items() of the whole history", *read),
    ]


async def _two_adds(s: Any, item: Callable[[int], dict[str, Any]]) -> None:
    await s.add_items([item(0)])
    await s.add_items([item(1)])


# -- Google ADK ------------------------------------------------------------------------------


def adk(root: Path, kind: str, n: int, turns: int) -> list[tuple[str, float, float]]:
    from google.adk.events import Event
    from google.adk.sessions.sqlite_session_service import SqliteSessionService
    from google.genai import types

    from threadline.integrations.adk import ThreadlineSessionService

    def event(k: int) -> Event:
        return Event(
            author="user" if k % 2 == 0 else "helper",
            invocation_id=f"i{k // 2}",
            content=types.Content(
                role="user" if k % 2 == 0 else "model", parts=[types.Part(text=f"message {k}")]
            ),
        )

    loop = asyncio.new_event_loop()
    url = store_url(root, kind, f"adk{n}")
    filler = ThreadlineSessionService(tl.open_store(url, durability="flush"))
    theirs = SqliteSessionService(str(root / f"adk{n}-adk.db"))

    async def prefill(service: Any) -> Any:
        s = await service.create_session(app_name="app", user_id="u", session_id="bench")
        for k in range(n):
            await service.append_event(s, event(k))
        return s

    loop.run_until_complete(prefill(filler))
    loop.run_until_complete(filler.close())
    ours = ThreadlineSessionService(open_store(url))
    mine = loop.run_until_complete(
        ours.get_session(app_name="app", user_id="u", session_id="bench")
    )
    theirs_session = loop.run_until_complete(prefill(theirs))

    async def two(service: Any, s: Any) -> None:
        await service.append_event(s, event(0))
        await service.append_event(s, event(1))

    write = alternate(
        lambda: loop.run_until_complete(two(ours, mine)),
        lambda: loop.run_until_complete(two(theirs, theirs_session)),
        turns,
    )

    def get(service: Any) -> Callable[[], Any]:
        return lambda: loop.run_until_complete(
            service.get_session(app_name="app", user_id="u", session_id="bench")
        )

    read = alternate(get(ours), get(theirs), max(5, turns // 4))
    loop.run_until_complete(ours.close())
    loop.close()
    return [
        ("Google ADK: turn writes (2 append_event)", *write),
        ("Google ADK: get_session() with every event", *read),
    ]


# -- Strands ---------------------------------------------------------------------------------


def strands(root: Path, kind: str, n: int, turns: int) -> list[tuple[str, float, float]]:
    from strands.session.file_session_manager import FileSessionManager
    from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

    from threadline.integrations.strands import ThreadlineSessionRepository

    def message(k: int) -> SessionMessage:
        role = "user" if k % 2 == 0 else "assistant"
        return SessionMessage.from_message({"role": role, "content": [{"text": f"m {k}"}]}, k)

    agent = SessionAgent(agent_id="helper", state={"k": 1}, conversation_manager_state={})
    url = store_url(root, kind, f"st{n}")
    filler = ThreadlineSessionRepository(tl.open_store(url, durability="flush"))
    theirs = FileSessionManager("bench", storage_dir=str(root / f"st{n}-files"))
    for repo in (filler, theirs):
        if repo.read_session("bench") is None:
            repo.create_session(Session(session_id="bench", session_type=SessionType.AGENT))
        repo.create_agent("bench", agent)
        for k in range(n):
            repo.create_message("bench", "helper", message(k))
    filler.close()
    # FileSessionManager writes each file (tmp + rename) with no fsync: threadline is timed at
    # that durability ("flush") and at its default ("fsync"), each against the same files
    copy = root / f"st{n}-fsync"
    if kind == "jsonl":
        shutil.copytree(url, copy)
    else:
        shutil.copy(f"{root}/st{n}.db", f"{copy}.db")
    ours = ThreadlineSessionRepository(tl.open_store(url, durability="flush"))
    durable = ThreadlineSessionRepository(
        tl.open_store(store_url(root, kind, f"st{n}-fsync"), durability="fsync")
    )
    count = {id(ours): n, id(durable): n, id(theirs): n}

    def turn(repo: Any) -> Callable[[], Any]:
        def go() -> None:
            k = count[id(repo)]
            repo.create_message("bench", "helper", message(k))
            repo.create_message("bench", "helper", message(k + 1))
            repo.update_agent("bench", agent)
            count[id(repo)] = k + 2

        return go

    same = alternate(turn(ours), turn(theirs), turns)
    fsync = alternate(turn(durable), turn(theirs), turns)
    ours.close()
    durable.close()
    return [
        ("Strands: turn writes, both without fsync", *same),
        ("Strands: turn writes, threadline fsync vs no fsync", *fsync),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--store", choices=["jsonl", "sqlite"], default="jsonl")
    parser.add_argument("--durability", choices=["fsync", "flush"], default="fsync")
    parser.add_argument("--only", nargs="*", default=["openai_agents", "adk", "strands"])
    args = parser.parse_args()
    DURABILITY["value"] = args.durability
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            for name in args.only:
                for label, ours, theirs in globals()[name](Path(tmp), args.store, n, args.turns):
                    rows.append((label, n, ours, theirs))
                    print(
                        f"{label:58} N={n:>6}  threadline {ours / 1000:8.2f} ms  "
                        f"framework {theirs / 1000:8.2f} ms  ratio {ours / theirs:5.2f}",
                        flush=True,
                    )
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
