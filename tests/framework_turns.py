"""Run one scripted agent turn of a framework in this process (the tests start it as a new
process to show that a session reopens and continues):
``python tests/framework_turns.py FRAMEWORK '{"url": …, "options": {…}}' SESSION_ID PROMPT``.
Prints the run's final output."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import threadline as tl


def openai_agents(store: Any, session_id: str, prompt: str) -> str:
    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message

    from threadline.integrations.openai_agents import ThreadlineSession

    set_tracing_disabled(True)

    async def run() -> str:
        async with ThreadlineSession(session_id, store) as session:
            history = await session.get_items()
            said = [i["content"] for i in history if i.get("role") == "user"]
            model = ScriptedModel([[assistant_message(f"You said before: {said}")]])
            result = await Runner.run(Agent(name="helper", model=model), prompt, session=session)
            return str(result.final_output)

    return asyncio.run(run())


def adk(store: Any, session_id: str, prompt: str) -> str:
    from google.adk.events import Event
    from google.genai import types

    from threadline.integrations.adk import ThreadlineSessionService

    async def run() -> str:
        service = ThreadlineSessionService(store)
        session = await service.get_session(app_name="app", user_id="u", session_id=session_id)
        said = [
            e.content.parts[0].text
            for e in session.events
            if e.author == "user" and e.content and e.content.parts[0].text
        ]
        for author, role, words in [
            ("user", "user", prompt),
            ("helper", "model", f"You said before: {said}"),
        ]:
            await service.append_event(
                session,
                Event(
                    author=author,
                    invocation_id="again",
                    content=types.Content(role=role, parts=[types.Part(text=words)]),
                ),
            )
        await service.close()
        return f"You said before: {said}"

    return asyncio.run(run())


def strands(store: Any, session_id: str, prompt: str) -> str:
    from strands.session.repository_session_manager import RepositorySessionManager
    from strands.types.session import SessionMessage

    from threadline.integrations.strands import ThreadlineSessionRepository

    repo = ThreadlineSessionRepository(store)
    said = [
        m.message["content"][0].get("text")
        for m in repo.list_messages(session_id, "helper")
        if m.message["role"] == "user" and "text" in m.message["content"][0]
    ]
    RepositorySessionManager(session_id=session_id, session_repository=repo)
    n = len(repo.list_messages(session_id, "helper"))
    reply = f"You said before: {said}"
    for k, (role, words) in enumerate([("user", prompt), ("assistant", reply)]):
        repo.create_message(
            session_id,
            "helper",
            SessionMessage.from_message({"role": role, "content": [{"text": words}]}, n + k),
        )
    repo.close()
    return reply


def main() -> None:
    framework, where, session_id, prompt = sys.argv[1:5]
    spec = json.loads(where)
    store = tl.open_store(spec["url"], **spec.get("options", {}))
    try:
        print(globals()[framework.replace("-", "_")](store, session_id, prompt))
    finally:
        store.close()


if __name__ == "__main__":
    main()
