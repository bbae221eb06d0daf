"""Purge never bricks a session (issue 13): any entry type, alone or with others, on every
backend; the session opens again, builds a context, and no file the store wrote keeps the text."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threadline as tl
from conftest import BACKENDS, PG_URL, make_store
from threadline.history import SUMMARY_PURGED

# one secret per entry type: each appears in exactly one entry's payload
SECRETS = {
    "user": "Zq7user-secret-pass",
    "assistant": "Zq7assistant-secret-pass",
    "tool_result": "Zq7toolresult-secret-pass",
    "model_change": "Zq7model-secret-pass",
    "thinking_level": "Zq7thinking-secret-pass",
    "label": "Zq7label-secret-pass",
    "session_info": "Zq7name-secret-pass",
    "custom": "Zq7custom-secret-pass",
    "compaction": "Zq7compaction-secret-pass",
    "branch_summary": "Zq7branch-secret-pass",
    "context_op": "Zq7digest-secret-pass",
}
KINDS = sorted(SECRETS)


def build(store: tl.Store) -> tuple[tl.Session, dict[str, str]]:
    """A session holding one entry of every type, each carrying its own secret."""
    s = store.create()
    ids: dict[str, str] = {}
    first = s.append_message("user", "hello there")
    ids["model_change"] = s.append_model_change("openai", SECRETS["model_change"])
    ids["thinking_level"] = s.append_thinking_level(SECRETS["thinking_level"])
    ids["user"] = s.append_message("user", f"my password is {SECRETS['user']}")
    s.append_message("assistant", [tl.text("checking"), tl.tool_use("c1", "grep", {"q": "x"})])
    ids["tool_result"] = s.append_message("tool", [tl.tool_result("c1", SECRETS["tool_result"])])
    ids["assistant"] = s.append_message("assistant", f"noted {SECRETS['assistant']}")
    ids["label"] = s.set_label(first, SECRETS["label"])
    ids["session_info"] = s.append_session_info(SECRETS["session_info"])
    ids["custom"] = s.append_custom("note", {"k": SECRETS["custom"]})
    kept = s.append_message("user", "keep going")
    s.append_message("assistant", "going")
    ids["compaction"] = s.append_compaction(SECRETS["compaction"], kept, 100)
    s.append_message("user", "after the compaction")
    s.append_message("assistant", "fine")
    ids["context_op"] = s.digest(0, 1, SECRETS["context_op"])  # type: ignore[attr-defined]
    ids["branch_summary"] = s.branch_with_summary(kept, SECRETS["branch_summary"])
    s.append_message("user", "on the new branch")
    return s, ids


def store_files(kind: str, root: Path, store: tl.Store) -> Callable[[str], list[str]]:
    """Where a secret still sits in what the store wrote: files, or PostgreSQL's table files."""
    if kind in ("jsonl", "sqlite"):

        def on_disk(needle: str) -> list[str]:
            return sorted(
                p.name for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()
            )

        return on_disk
    if kind == "postgres":
        import psycopg

        schema = store.backend.schema  # type: ignore[attr-defined]

        def in_heap(needle: str) -> list[str]:
            found = []
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute("CHECKPOINT")
                rels = conn.execute(
                    "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c JOIN "
                    "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND "
                    "c.relkind IN ('r', 'i', 't') AND pg_relation_filepath(c.oid) IS NOT NULL "
                    "UNION ALL SELECT t.relname, pg_relation_filepath(t.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class t ON "
                    "t.oid = c.reltoastrelid WHERE n.nspname = %s",
                    (schema, schema),
                ).fetchall()
                for name, path in rels:
                    data = conn.execute(
                        "SELECT pg_read_binary_file(%s, 0, (pg_stat_file(%s)).size)", (path, path)
                    ).fetchone()[0]
                    if needle.encode() in bytes(data):
                        found.append(name)
            return sorted(found)

        return in_heap
    return lambda needle: []


def check_purge(kind: str, targets: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = make_store(kind, root)
        try:
            s, ids = build(store)
            before = len(s.context().messages)
            plan: Any = s.purge(
                [ids[k] for k in targets],  # type: ignore[attr-defined]
                dry_run=False,
            )
            for k in targets:
                assert isinstance(s.entry(ids[k]), tl.model.entries.PurgedEntry)
            s.close()
            again = store.open(s.id)
            messages = list(again.context().messages)
            assert 0 < len(messages) <= before + 1  # a purged summary may uncover history
            assert again.leaf_id == s.leaf_id
            texts = " ".join(m.text for m in messages)
            rest = [again.entry(e) for e in again.entry_ids()]
            assert len(rest) == len(s.entry_ids())
            again.append_message("user", "still writable")
            assert again.context().messages[-1].text == "still writable"
            again.close()
            located = store_files(kind, root, store)
            for k in targets:
                assert SECRETS[k] not in texts
                assert located(SECRETS[k]) == [], (k, plan.residue)
            # a summary whose source range covers a purged entry loses its summary
            summarized = {k for k in KINDS if ids[k] in plan.summarized}
            for k in summarized:
                payload = again_payload = store.open(s.id, read_only=True).entry(ids[k]).payload
                assert again_payload.summary == SUMMARY_PURGED, (k, payload)
                assert located(SECRETS[k]) == [], k
            for k in (
                set(KINDS)
                - set(targets)
                - summarized
                - {"label", "session_info", "custom", "thinking_level"}
            ):
                # what was not purged is still there (in the view or the log)
                assert any(
                    SECRETS[k] in tl.model.entries.encode_record(r).decode() for r in rest
                ), k
            assert store.list()[0].id == s.id
        finally:
            store.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_purging_one_entry_of_any_type_leaves_a_working_session(backend: str, kind: str) -> None:
    check_purge(backend, [kind])


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(targets=st.sets(st.sampled_from(KINDS), min_size=2))
def test_purging_any_combination_of_entry_types_leaves_a_working_session(
    backend: str, targets: set[str]
) -> None:
    check_purge(backend, sorted(targets))


@pytest.mark.parametrize("backend", BACKENDS)
def test_purge_all_of_a_labelled_session_leaves_a_session_that_opens(backend: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(backend, Path(tmp))
        try:
            s = store.create(session_id="d")
            q = s.append_message("user", "hi")
            s.set_label(q, "x")
            done: Any = s.purge(all=True, dry_run=False)  # type: ignore[attr-defined]
            assert done.executed and len(done.entry_ids) == 2
            s.close()
            again = store.open("d")
            assert list(again.context().messages) == []
            assert again.labels() == {}
            assert again.name is None
        finally:
            store.close()


def test_a_lost_purge_record_does_not_break_context_building(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s = store.create(session_id="lost")
    a = s.append_message("user", "secret question")
    s.append_message("assistant", "answer")
    s.purge([a], dry_run=False)  # type: ignore[attr-defined]
    s.close()
    path = tmp_path / "lost.jsonl"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(x for x in lines if b'"type":"purge"' not in x))
    again = store.open("lost")
    assert [m.text for m in again.context().messages] == ["answer"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_summaries_that_copied_a_purged_secret_are_listed_and_redacted(backend: str) -> None:
    # copies outside any summary's source range: found by the substring search, redacted
    secret = "sk-live-Zq7c0pied-4242"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = make_store(backend, root)
        try:
            s = store.create()
            first = s.append_message("user", "start")
            s.append_message("assistant", "ok")
            ask = s.append_message("user", f"deploy with key {secret} please")
            s.branch(first)  # another branch: its summaries never saw `ask`
            s.append_message("assistant", "a different answer")
            kept = s.append_message("user", "next step")
            s.append_message("assistant", "ok")
            comp = s.append_compaction(f"User deployed with key {secret}; all went fine.", kept)
            s.append_message("user", "more")
            op = s.digest(1, 1, f"the deploy used {secret}")  # type: ignore[attr-defined]
            unrelated = s.append_compaction("Nothing secret here at all.", None)
            plan: Any = s.purge([ask])  # type: ignore[attr-defined]
            assert plan.derived == sorted([comp, op])
            assert plan.summarized == []
            done: Any = s.purge([ask], dry_run=False)  # type: ignore[attr-defined]
            assert done.derived == plan.derived
            s.close()
            again = store.open(s.id)
            summaries = {e: again.entry(e).payload for e in (comp, op)}
            assert summaries[comp].summary == "User deployed with key [purged]; all went fine."
            assert summaries[op].summary == "the deploy used [purged]"
            assert again.entry(unrelated).payload.summary == "Nothing secret here at all."
            for leaf in (again.leaf_id, comp):
                assert all(secret not in m.text for m in again.context(leaf).messages)
            assert store_files(backend, root, store)(secret) == []
        finally:
            store.close()


REWORDED = "The user shared a deployment credential"  # no string of the purged entry in it


def summarizing_session(store: tl.Store, kind: str) -> tuple[tl.Session, str, str, str]:
    """(session, purged entry, summary covering it, summary not covering it) for one kind of
    summary; every summary rewords, so no substring of the purged entry is in it."""
    s = store.create()
    first = s.append_message("user", "start")
    s.append_message("assistant", "ok")
    ask = s.append_message("user", "deploy with key sk-live-Zq7reword-77 please")
    s.append_message("assistant", "deployed")
    if kind == "compaction":
        kept = s.append_message("user", "next step")
        s.append_message("assistant", "fine")
        covering = s.append_compaction(f"{REWORDED}; it went fine.", kept, 100)
        s.branch(first)
        other = s.append_compaction("Only the greeting so far.", None, 10)  # before `ask`
    elif kind == "branch_summary":
        s.append_message("user", "next step")
        covering = s.branch_with_summary(first, f"{REWORDED} on the abandoned path.")
        s.append_message("user", "a new direction")
        s.append_message("assistant", "sure")
        other = s.branch_with_summary(covering, "Only a new direction was tried.")
    elif kind == "digest":
        s.append_message("user", "unrelated question")
        s.append_message("assistant", "unrelated answer")
        covering = s.digest(1, 3, f"{REWORDED}.")  # type: ignore[attr-defined]
        other = s.digest(2, 3, "An unrelated exchange.")  # type: ignore[attr-defined]
    else:  # revise
        s.append_message("user", "unrelated question")
        s.append_message("assistant", "unrelated answer")
        covering = s.revise(  # type: ignore[attr-defined]
            1, 3, [{"role": "user", "content": f"{REWORDED}."}]
        )
        other = s.revise(  # type: ignore[attr-defined]
            3, 4, [{"role": "user", "content": "An unrelated exchange."}]
        )
    return s, ask, covering, other


def summary_text(session: tl.Session, entry_id: str) -> str:
    payload: Any = session.entry(entry_id).payload
    if getattr(payload, "kind", None) == "revise":
        return " ".join(m.text for m in payload.messages)
    return str(payload.summary)


@pytest.mark.parametrize("kind", ["compaction", "branch_summary", "digest", "revise"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_summary_whose_range_covers_a_purged_entry_is_listed_and_replaced(
    backend: str, kind: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = make_store(backend, root)
        try:
            s, ask, covering, other = summarizing_session(store, kind)
            untouched = summary_text(s, other)
            plan: Any = s.purge([ask])  # type: ignore[attr-defined]
            assert plan.summarized == [covering]
            assert plan.derived == [covering]
            done: Any = s.purge([ask], dry_run=False)  # type: ignore[attr-defined]
            assert done.summarized == [covering]
            s.close()
            again = store.open(s.id)
            assert summary_text(again, covering) == SUMMARY_PURGED
            assert summary_text(again, other) == untouched
            assert again.entry(covering).type == kind.replace("digest", "context_op").replace(
                "revise", "context_op"
            )
            for leaf in (again.leaf_id, covering):
                texts = [m.text for m in again.context(leaf).messages]
                assert texts and all(REWORDED not in t for t in texts)
            # the covering summary's own view shows the marker where the summary was
            assert any(SUMMARY_PURGED in m.text for m in again.context(covering).messages)
            again.append_message("user", "still writable")
            again.close()
            assert store_files(backend, root, store)(REWORDED) == []
        finally:
            store.close()


def test_a_summary_of_a_summary_is_found_through_it() -> None:
    # a digest whose range holds a compaction that covered the purged entry
    store = tl.open_store("memory://")
    s = store.create()
    ask = s.append_message("user", "the secret is hunter2-Zq7")
    s.append_message("assistant", "noted")
    kept = s.append_message("user", "go on")
    comp = s.append_compaction("A credential was mentioned.", kept, 10)
    s.append_message("assistant", "going")
    op = s.digest(0, 1, "Earlier: a credential, then going on.")  # type: ignore[attr-defined]
    plan: Any = s.purge([ask])  # type: ignore[attr-defined]
    assert plan.summarized == sorted([comp, op])
