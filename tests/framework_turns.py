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
            result = await Runner.run(Agent(name="helper", model=model), prompt,
                                      session=session)
            return str(result.final_output)

    return asyncio.run(run())


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
