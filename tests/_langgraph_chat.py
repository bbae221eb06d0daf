"""A real compiled LangGraph chat graph with a scripted model, for the checkpointer tests and
bench/langgraph_compare.py.

The graph is LangGraph's classic agent: ``agent`` (a chat model: langchain-core's
``GenericFakeChatModel`` fed one scripted reply per call) and ``tools`` (the prebuilt
``ToolNode``), with ``tools_condition`` between them. Every third turn the model calls the
``lookup`` tool and answers after its result, so a turn adds 2 or 4 messages.

As a script (``python _langgraph_chat.py STORE_URL THREAD FIRST LAST [TENANT SCHEMA]``) it runs
turns FIRST..LAST on a thread of a threadline store and prints the final messages as JSON: the
"resume in a new process" half of tests/test_langgraph.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

FILLER = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the "
    "quarterly figures and drafts a reply. "
)
_prose = ""  # a text whose successive slices replace FILLER * pad (use_prose)
_at = 0  # where the next slice starts


def use_prose(text: str) -> None:
    """Fill messages with successive slices of ``text`` (as long as ``FILLER * pad``) instead of
    the one sentence repeated: text that compresses like real messages (bench --prose)."""
    global _prose, _at
    _prose, _at = text, 0


def filler(pad: int) -> str:
    """``FILLER * pad``, or as many characters of the prose (:func:`use_prose`)."""
    global _at
    k = len(FILLER) * pad
    if not _prose or k <= 0:
        return FILLER * pad
    if _at + k > len(_prose):
        _at = 0
    _at += k
    return _prose[_at - k : _at]


@tool
def lookup(q: int) -> str:
    """Look a number up."""
    return f"result for {q}: {q * q}"


def _reply(messages: list[BaseMessage], pad: int) -> AIMessage:
    """The scripted model: a function of the conversation so far, so every saver sees the
    same replies."""
    last = messages[-1]
    n = sum(1 for m in messages if isinstance(m, HumanMessage))
    text = filler(pad)
    if isinstance(last, HumanMessage) and n % 3 == 0:
        return AIMessage(
            content="",
            id=f"ai-{len(messages)}-call",
            tool_calls=[{"name": "lookup", "args": {"q": n}, "id": f"call-{n}"}],
        )
    return AIMessage(
        content=f"answer {n} after {len(messages)} messages. {text}", id=f"ai-{len(messages)}"
    )


def build(checkpointer: Any, pad: int = 0) -> Any:
    """The compiled graph; ``pad`` repeats a filler sentence in every reply (bench sizes)."""

    def agent(state: MessagesState) -> dict[str, Any]:
        model = GenericFakeChatModel(messages=iter([_reply(state["messages"], pad)]))
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def user(turn: int, pad: int = 0) -> HumanMessage:
    return HumanMessage(f"question {turn} {filler(pad)}".strip(), id=f"user-{turn}")


def run(graph: Any, config: dict[str, Any], first: int, last: int, pad: int = 0) -> Any:
    """Turns ``first``..``last`` (inclusive); returns the final state."""
    state = None
    for turn in range(first, last + 1):
        state = graph.invoke({"messages": [user(turn, pad)]}, config)
    return state


def shape(messages: list[BaseMessage]) -> list[list[Any]]:
    """What a conversation says, without the random ids LangGraph gives tool messages."""
    out = []
    for m in messages:
        out.append(
            [
                m.type,
                m.content,
                [dict(c) for c in getattr(m, "tool_calls", [])],
                getattr(m, "tool_call_id", None),
            ]
        )
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import threadline as tl
    from threadline.integrations.langgraph import ThreadlineSaver

    url, thread, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    opts = {"tenant": sys.argv[5], "schema": sys.argv[6]} if len(sys.argv) > 6 else {}
    with ThreadlineSaver(tl.open_store(url, **opts)) as saver:
        final = run(build(saver), {"configurable": {"thread_id": thread}}, first, last)
        print(json.dumps(shape(final["messages"])))
