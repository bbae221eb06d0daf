"""The ASGI app: a static single page plus a JSON API under ``/api``, thin over the library.

Every handler opens the session through :class:`~threadline.web.cache.SessionCache`, calls the
library and returns what it returned as JSON. Errors come back as ``{"error": message}`` with 400
(bad input), 404 (unknown session, entry or tag), 409 (another writer holds the session) or 500.

Every response about a session's state, and every write, carries the session's ``version``
(:func:`threadline.web.cache.version`): the page keeps the one its own last write returned, so
its change poll reloads only for changes made by another process.

Every request must carry a loopback ``Host`` and, when the browser sends one, the viewer's own
``Origin`` (:class:`LoopbackGuard`): a page on another site can neither read the API nor reach the
server through a rebound DNS name. Writes are POSTs that must also carry the ``X-Threadline``
header (a plain form cannot set it). Request bodies are capped at :data:`MAX_BODY`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from threadline.errors import NotFoundError, SessionLockedError, StoreError, UserError
from threadline.session import Session
from threadline.web import actions, rows
from threadline.web.cache import SessionCache, version

MAX_LIMIT = 500
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
FORMAT_LABELS = {
    "openai_chat": "OpenAI Chat",
    "openai_responses": "OpenAI Responses",
    "anthropic": "Anthropic",
    "gemini": "Gemini",
    "bedrock": "Bedrock",
}

#: How an error's next step is worded in the viewer (see threadline.errors.Hint).
WEB_HINTS = {
    "list_sessions": "the session list (Sessions) shows them",
    "list_entries": "the tree on the left shows the entry ids",
    "list_tags": "the Tags tab lists the tags",
    "rebuild_catalog": "run threadline catalog rebuild in a shell",
}

Handler = Callable[[Request], Awaitable[Response]]


def json_response(data: Any, status: int = 200) -> Response:
    return Response(
        msgspec.json.encode(data, enc_hook=repr), status_code=status, media_type="application/json"
    )


def _error_status(exc: Exception) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, UserError):
        return 400
    if isinstance(exc, SessionLockedError):
        return 409
    return 500


def _bounded(message: str, limit: int = 2000) -> str:
    """An error message as sent back: never longer than ``limit`` characters, whatever input
    it quotes."""
    return message if len(message) <= limit else message[:limit] + "… (truncated)"


def _optional(module: str) -> Any:
    """A library module that another part of threadline provides, or None if not installed."""
    try:
        return importlib.import_module(f"threadline.{module}")
    except ModuleNotFoundError as exc:
        if exc.name != f"threadline.{module}":
            raise
        return None


def _page_args(request: Request, default: int = 200) -> tuple[int, int]:
    try:
        offset = max(0, int(request.query_params.get("offset", "0")))
        limit = min(MAX_LIMIT, max(1, int(request.query_params.get("limit", str(default)))))
    except ValueError:
        raise UserError("offset and limit must be whole numbers") from None
    return offset, limit


def _id_set(value: str | None) -> set[str]:
    return {v for v in (value or "").split(",") if v}


log = logging.getLogger(__name__)


class Viewer:
    """The app's state: the store, its open sessions, and the handlers."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.cache = SessionCache(store)

    # -- plumbing ----------------------------------------------------------------------------

    def endpoint(self, fn: Callable[..., Any]) -> Handler:
        """Wrap a sync handler: runs it in a worker thread, turns errors into JSON."""

        async def handle(request: Request) -> Response:
            body: Any = None
            if request.method == "POST":
                if request.headers.get("x-threadline") != "1":
                    return json_response({"error": "Writes need the X-Threadline header"}, 403)
                host = request.headers.get("host", "").rsplit(":", 1)[0]
                if host not in LOOPBACK_HOSTS:
                    return json_response({"error": f"Refusing a write for host {host!r}"}, 403)
                try:
                    body = await request.json()
                except ValueError:
                    return json_response({"error": "The request body must be JSON"}, 400)
                if not isinstance(body, dict):
                    return json_response({"error": "The request body must be a JSON object"}, 400)
            try:
                result = await run_in_threadpool(fn, request, body)
            except (UserError, StoreError) as exc:
                return json_response(
                    {"error": _bounded(exc.message_for(WEB_HINTS))}, _error_status(exc)
                )
            return json_response(result)

        return handle

    def routes(self) -> list[Any]:
        e = self.endpoint
        static = resources.files("threadline.web") / "static"
        return [
            Route("/", self.index),
            Route("/api/info", e(self.info)),
            Route("/api/sessions", e(self.list_sessions)),
            Route("/api/examples", e(self.examples)),
            Route("/api/examples/import", e(self.import_examples), methods=["POST"]),
            Route("/api/catalog/manage_tags", e(self.manage_tags), methods=["POST"]),
            Route("/api/sessions/{sid}", e(self.session_info)),
            Route("/api/sessions/{sid}/tree", e(self.tree)),
            Route("/api/sessions/{sid}/context", e(self.context)),
            Route("/api/sessions/{sid}/entries/{eid}", e(self.entry)),
            Route("/api/sessions/{sid}/view/{vid}", e(self.view_item)),
            Route("/api/sessions/{sid}/tags", e(self.tags)),
            Route("/api/sessions/{sid}/operations", e(self.operations)),
            Route("/api/sessions/{sid}/payload", e(self.payload)),
            Route("/api/sessions/{sid}/preview", e(self.preview), methods=["POST"]),
            Route("/api/sessions/{sid}/apply", e(self.apply), methods=["POST"]),
            Route("/api/sessions/{sid}/purge", e(self.purge), methods=["POST"]),
            Route("/api/sessions/{sid}/compact", e(self.compact), methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ]

    async def index(self, request: Request) -> Response:
        page = resources.files("threadline.web") / "static" / "index.html"
        return FileResponse(str(page), headers={"Cache-Control": "no-store"})

    # -- store-wide --------------------------------------------------------------------------

    def info(self, request: Request, body: Any) -> dict[str, Any]:
        """What this installation offers: the page hides controls whose library part is absent."""
        catalog = self._catalog()
        from threadline import examples

        return {
            "store": getattr(self.store, "url", "") or str(getattr(self.store, "root", "")),
            "actions": actions.available(Session),
            "search": catalog is not None and hasattr(catalog, "search"),
            "manage_tags": catalog is not None and hasattr(catalog, "find_and_tag"),
            "purge": _optional("history") is not None,
            "compact": self._compactor() is not None,
            "formats": self._formats(),
            "tag_listing": actions._implemented(Session, "tags"),
            "operations": actions._implemented(Session, "operations"),
            "examples": [e.title for e in examples.available()],
        }

    def _catalog(self) -> Any:
        if _optional("catalog") is None:
            return None
        return getattr(self.store, "catalog", None)

    def _compactor(self) -> Any:
        mod = _optional("compaction")
        return mod if mod is not None and hasattr(mod, "compact") else None

    def _formats(self) -> list[dict[str, str]]:
        mod = _optional("formats")
        if mod is None or not hasattr(mod, "dump_context"):
            return []
        out = []
        for name, label in FORMAT_LABELS.items():
            try:
                mod.get(name)
            except UserError:
                continue  # that provider's module is not installed
            out.append({"name": name, "label": label})
        return out

    def list_sessions(self, request: Request, body: Any) -> dict[str, Any]:
        """Sessions newest first (with their catalog tags), or the sessions a search finds."""
        q = request.query_params.get("q", "").strip()
        tag = request.query_params.get("tag", "").strip() or None
        catalog = self._catalog()
        if catalog is None:
            if q or tag:
                raise UserError(
                    "Search and tag filters need the catalog, which this installation lacks"
                )
            listing = self.store.list()
            return {
                "sessions": [{**msgspec.to_builtins(r), "tags": [], "hit": None} for r in listing],
                "tags": {},
                "query": "",
                "skipped": [{"id": i, "reason": why} for i, why in listing.skipped],
            }
        rows = catalog.sessions(tag=tag)
        by_id = {r.id: r for r in rows}
        hits: dict[str, Any] = {}
        index = None
        if q:
            status = catalog.index_status()
            index = {
                "embedded": status.embedded,
                "total": status.total,
                "semantic": status.semantic,
            }
            ordered = []
            for hit in catalog.search(q, k=50, tag=tag):
                if hit.session_id in by_id and hit.session_id not in hits:
                    hits[hit.session_id] = msgspec.to_builtins(hit)
                    ordered.append(by_id[hit.session_id])
            rows = ordered
        return {
            "sessions": [{**msgspec.to_builtins(r), "hit": hits.get(r.id)} for r in rows],
            "tags": catalog.tags(),
            "query": q,
            "index": index,
            "skipped": [{"id": i, "reason": why} for i, why in self.store.list().skipped],
        }

    def examples(self, request: Request, body: Any) -> dict[str, Any]:
        from threadline import examples

        return {"examples": [msgspec.to_builtins(e) for e in examples.available()]}

    def import_examples(self, request: Request, body: Any) -> dict[str, Any]:
        from threadline import examples

        with self.cache.lock:
            created = examples.import_examples(self.store)
        return {"created": created}

    def manage_tags(self, request: Request, body: Any) -> Any:
        """find_and_tag / delete_tag / merge_tags: a preview returns the catalog's token, and
        confirming sends it back, so exactly the previewed set of sessions changes."""
        catalog = self._catalog()
        if catalog is None:
            raise UserError("manage_tags needs the catalog, which this installation lacks")
        op = body.get("op")
        confirm = body.get("confirm") is True
        token = body.get("token") if confirm else None

        def text(key: str) -> str | None:
            value = body.get(key)
            return value.strip() or None if isinstance(value, str) else None

        kwargs: dict[str, Any] = {"dry_run": not confirm, "token": token}
        if op == "find_and_tag":
            result = catalog.find_and_tag(text("query"), text("tag"), **kwargs)
        elif op == "delete_tag":
            result = catalog.delete_tag(text("tag"), **kwargs)
        elif op == "merge_tags":
            result = catalog.merge_tags(text("tag_from"), text("tag"), **kwargs)
        else:
            raise UserError(
                f"Unknown manage_tags operation {op!r}; use find_and_tag, delete_tag or merge_tags"
            )
        return {"executed": confirm, **msgspec.to_builtins(result)}

    # -- one session -------------------------------------------------------------------------

    def session_info(self, request: Request, body: Any) -> dict[str, Any]:
        sid = request.path_params["sid"]
        with self.cache.session(sid) as s:
            ctx = s.context()
            return {
                "id": s.id,
                "name": s.name,
                "header": msgspec.to_builtins(s.header),
                "leaf_id": s.leaf_id,
                "entries": len(s.state.tree),
                "messages": s.message_count(),
                "context_messages": len(ctx.messages),
                "model": msgspec.to_builtins(ctx.model),
                "thinking_level": ctx.thinking_level,
                "file_bytes": s.state.log.size(),
                "version": version(s),
                "load_report": msgspec.to_builtins(s.load_report),
                "labels": [{"id": k, "label": v} for k, v in s.state.labels.items()],
            }

    def tree(self, request: Request, body: Any) -> dict[str, Any]:
        sid = request.path_params["sid"]
        offset, limit = _page_args(request)
        qp = request.query_params
        with self.cache.session(sid) as s:
            t = rows.TreeRows(
                s,
                folded=_id_set(qp.get("fold")),
                unfolded=_id_set(qp.get("unfold")),
                outline=qp.get("outline") == "1",
                bookkeeping=qp.get("bookkeeping") == "1",
            )
            locate = qp.get("locate")
            index = t.index_of(locate) if locate else None
            if index is not None and qp.get("center") == "1":
                offset = max(0, index - limit // 2)
            return {
                "total": len(t),
                "offset": offset,
                "rows": t.page(offset, limit),
                "locate_index": index,
                "sidechains_folded": t.sidechains_folded,
                "lanes": t.width,
                "leaf_id": s.leaf_id,
            }

    def context(self, request: Request, body: Any) -> dict[str, Any]:
        sid = request.path_params["sid"]
        offset, limit = _page_args(request)
        active = sorted(_id_set(request.query_params.get("active_tags")))
        with self.cache.session(sid) as s:
            ctx = s.context(active_tags=active)
            return {
                "total": len(ctx.messages),
                "offset": offset,
                "rows": rows.context_page(s, ctx, offset, limit),
                "model": msgspec.to_builtins(ctx.model),
                "thinking_level": ctx.thinking_level,
                "leaf_id": ctx.leaf_id,
                "active_tags": active,
            }

    def entry(self, request: Request, body: Any) -> dict[str, Any]:
        with self.cache.session(request.path_params["sid"]) as s:
            return rows.entry_details(s, request.path_params["eid"])

    def view_item(self, request: Request, body: Any) -> dict[str, Any]:
        with self.cache.session(request.path_params["sid"]) as s:
            vid = request.path_params["vid"]
            if vid not in set(s.context().view.ids()) and not s.has_entry(vid):
                raise NotFoundError(f"No message '{vid}' in the context of session '{s.id}'")
            return rows.view_item_details(s, vid)

    def tags(self, request: Request, body: Any) -> dict[str, Any]:
        if not actions._implemented(Session, "tags"):
            return {"tags": [], "available": False}
        # Listing removes tags that became invalid (DESIGN §7), so it is a write.
        with self.cache.session(request.path_params["sid"], write=True) as s:
            listing = s.tags()
            return {
                "tags": actions.to_json(listing.tags),
                "removed": listing.removed,
                "available": True,
                "version": version(s),
            }

    def operations(self, request: Request, body: Any) -> dict[str, Any]:
        if not actions._implemented(Session, "operations"):
            return {"operations": [], "available": False}
        with self.cache.session(request.path_params["sid"]) as s:
            ops = s.operations()
            return {"operations": actions.to_json(ops), "available": True}

    def payload(self, request: Request, body: Any) -> dict[str, Any]:
        """What the provider receives and what the send policy adjusted to get there; without
        ``format``, in the session's own provider format (``formats.own_format``)."""
        name = request.query_params.get("format", "")
        mod = _optional("formats")
        if mod is None or not hasattr(mod, "dump_context"):
            raise UserError("Provider formats are not available in this installation")
        if name and name not in FORMAT_LABELS:
            raise UserError(
                f"Unknown provider format {name!r}; choose one of: {', '.join(FORMAT_LABELS)}"
            )
        active = sorted(_id_set(request.query_params.get("active_tags")))
        with self.cache.session(request.path_params["sid"]) as s:
            ctx = s.context(active_tags=active)
            messages = list(ctx.messages)
            meta = (s.header.metadata or {}).get("import")
            source = meta.get("format") if isinstance(meta, dict) else None
            own = mod.own_format(
                messages,
                provider=ctx.model.provider if ctx.model else None,
                model_id=ctx.model.model_id if ctx.model else None,
                source=source,
            )
            dumped = mod.dump_context(name or own, messages, report=True)
            ids = ctx.view.ids()
            return {
                "format": name or own,
                "own_format": own,
                "payload": actions.to_json(dumped.payload),
                "adjustments": [
                    {
                        **actions.to_json(a),
                        "view_id": ids[a.position] if 0 <= a.position < len(ids) else None,
                    }
                    for a in dumped.adjustments
                ],
            }

    def preview(self, request: Request, body: Any) -> dict[str, Any]:
        action, args = self._action(body)
        with self.cache.session(request.path_params["sid"]) as s:
            return actions.preview(s, action, args)

    def apply(self, request: Request, body: Any) -> dict[str, Any]:
        action, args = self._action(body)
        with self.cache.session(request.path_params["sid"], write=True) as s:
            result = actions.run(s, action, args)
            return {
                "action": action,
                "result": actions.to_json(result),
                "leaf_id": s.leaf_id,
                "context_messages": len(s.context().messages),
                "version": version(s),
            }

    @staticmethod
    def _action(body: Any) -> tuple[str, dict[str, Any]]:
        action = body.get("action")
        args = body.get("args") or {}
        if not isinstance(action, str) or not isinstance(args, dict):
            raise UserError('Send {"action": name, "args": {...}}')
        return action, args

    def purge(self, request: Request, body: Any) -> Any:
        if _optional("history") is None:
            raise UserError("Purge is not available in this installation")
        ids = body.get("entry_ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise UserError("entry_ids must be a list of entry ids")
        confirm = body.get("confirm") is True
        with self.cache.session(request.path_params["sid"], write=confirm) as s:
            plan = s.purge(ids, dry_run=True)
            if not confirm:
                return {"executed": False, "plan": actions.to_json(plan)}
            # Purge exactly what was previewed: a session that changed since is refused.
            if body.get("fingerprint") != plan.fingerprint:
                raise UserError(
                    f"Session '{s.id}' changed since the purge preview; "
                    "preview again before purging"
                )
            done = s.purge(ids, dry_run=False)
            return {"executed": True, "plan": actions.to_json(done), "version": version(s)}

    def compact(self, request: Request, body: Any) -> Any:
        """Compaction with the extractive summarizer: a preview shows the plan and the very
        summary that would be written; confirming re-plans and refuses if the leaf moved."""
        compaction = self._compactor()
        if compaction is None:
            raise UserError("Compaction is not available in this installation")
        keep = body.get("keep_recent_tokens")
        keep_recent = (
            compaction.DEFAULT_KEEP_RECENT_TOKENS
            if keep in (None, "")
            else actions._int(body, "keep_recent_tokens")
        )
        confirm = body.get("confirm") is True
        with self.cache.session(request.path_params["sid"], write=confirm) as s:
            plan = compaction.prepare_compaction(s, keep_recent_tokens=keep_recent)
            if not confirm:
                summary = compaction.build_summary(compaction.ExtractiveSummarizer(), plan)
                return {
                    "executed": False,
                    "leaf_id": plan.leaf_id,
                    "first_kept_entry_id": plan.first_kept_entry_id,
                    "summarized_messages": len(plan.summarize_ids) + len(plan.turn_prefix_ids),
                    "kept_entries": len(plan.kept_ids),
                    "tokens_before": plan.tokens_before,
                    "kept_tokens": plan.kept_tokens,
                    "split_turn": plan.is_split_turn,
                    "summary": summary,
                    "keep_recent_tokens": keep_recent,
                }
            if body.get("leaf_id") != plan.leaf_id:
                raise UserError(
                    f"Session '{s.id}' moved on since the compaction preview; preview again"
                )
            done = compaction.compact(s, keep_recent_tokens=keep_recent, plan=plan)
            return {
                "executed": True,
                "entry_id": done.entry_id,
                "context_messages": len(s.context().messages),
                "version": version(s),
            }


def create_app(store: Any) -> LoopbackGuard:
    """The viewer for ``store`` (a :func:`threadline.open_store` result) as an ASGI app."""
    viewer = Viewer(store)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # Open the catalog before the first request is served, so the first listing does not
        # race the indexing thread's open of it (and answers from a catalog that is ready). A
        # catalog that cannot open is reported by the requests that need it.
        try:
            await run_in_threadpool(viewer._catalog)
        except (UserError, StoreError) as exc:
            log.warning("the catalog could not be opened: %s", exc)
        stop = threading.Event()
        warm = threading.Thread(
            target=_embed_in_background, args=(viewer, stop), name="threadline-embed", daemon=True
        )
        warm.start()
        try:
            yield
        finally:
            stop.set()
            warm.join(timeout=5)

    app = Starlette(routes=viewer.routes(), lifespan=lifespan)
    app.state.viewer = viewer
    return LoopbackGuard(app)


MAX_BODY = 4 * 1024 * 1024  # the largest request body the viewer reads (its own are < 100 KB)
_ECHO = 64  # at most this much of a rejected header is named in an error


def _clip(text: str, n: int = _ECHO) -> str:
    return repr(text[:n] + ("…" if len(text) > n else ""))


def _loopback(authority: str) -> tuple[str, str] | None:
    """``(host, port)`` of a Host header or Origin authority naming a loopback address."""
    host, sep, port = authority.rpartition(":")
    if not sep or host.endswith(":") or (host.startswith("[") and not host.endswith("]")):
        host, port = authority, ""  # no port (or a bare IPv6 address)
    if port and not port.isdigit():
        return None
    return (host, port) if host in LOOPBACK_HOSTS else None


class LoopbackGuard:
    """ASGI middleware in front of the whole viewer (page, static files, API).

    * ``Host`` must name a loopback address, on every request: a page whose DNS name was
      rebound to 127.0.0.1 sends its own name and is refused (DNS rebinding).
    * ``Origin``, when sent, must be the viewer itself (same loopback host kind and port): no
      other page, local or remote, may read the API with the user's browser.
    * A request body larger than :data:`MAX_BODY` is refused with 413 before it is read whole.
    * Errors name at most a short prefix of what was sent, never the input itself.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        host = _loopback(headers.get("host", ""))
        if host is None:
            await _refuse(
                send,
                403,
                "Refusing a request for host "
                f"{_clip(headers.get('host', ''))}: the viewer answers only on "
                "127.0.0.1, localhost or [::1]",
            )
            return
        origin = headers.get("origin")
        if origin is not None:
            scheme, _, authority = origin.partition("://")
            seen = _loopback(authority) if scheme == "http" else None
            if seen is None or seen[1] != host[1]:
                await _refuse(
                    send,
                    403,
                    f"Refusing a request from origin {_clip(origin)}: "
                    "only the viewer's own page may call it",
                )
                return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            await _refuse(send, 413, f"The request body is larger than {MAX_BODY} bytes")
            return
        if scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        # read the body here, counting, so a chunked body cannot exceed the cap either
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                await _refuse(send, 413, f"The request body is larger than {MAX_BODY} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Any, status: int, message: str) -> None:
    data = msgspec.json.encode({"error": message})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _embed_in_background(viewer: Viewer, stop: threading.Event) -> None:
    """Work the semantic index's backlog off in short slices. A search embeds nothing itself
    (``embed_budget`` 0): it answers at once from what is indexed, and the page shows how far
    the indexing is ("indexing 1,240 / 28,000 messages")."""
    catalog = viewer._catalog()
    if catalog is None or not hasattr(catalog, "embed_pending"):
        return
    catalog.embed_budget = 0.0
    while not stop.is_set():
        try:
            done = catalog.embed_pending(max_seconds=0.5)
        except Exception as exc:  # the viewer keeps working on keyword search
            log.warning("background embedding failed: %s", exc)
            stop.wait(30)
            continue
        stop.wait(5.0 if done else 0.05)
