"""The web viewer and editor: ``threadline web`` (DESIGN §10), an ASGI app on 127.0.0.1.

    from threadline.web import create_app, serve
    serve(tl.open_store(), port=8765)        # blocks; Ctrl-C stops it

The page is static HTML, CSS and vanilla JavaScript shipped in ``static/`` (no build step); it
talks to a JSON API under ``/api`` (:mod:`threadline.web.app`) that is a thin layer over the
library. Needs the ``web`` extra: ``pip install -e '.[web]'`` in the clone.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from threadline.errors import UserError

try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"The web viewer needs starlette and uvicorn ({_exc}); "
        "run: pip install -e '.[web]' in the threadline clone"
    ) from None

from threadline.web.app import create_app

HOST = "127.0.0.1"


def bind(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: a free port); raises UserError if taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"Cannot listen on {HOST}:{port} ({exc.strerror}); "
            "pick another port with --port, or --port 0 for a free one"
        ) from None
    sock.listen(128)
    return sock


def serve(
    store: Any,
    *,
    port: int = 8765,
    open_browser: bool = False,
    announce: Callable[[str], None] | None = None,
    log_level: str = "warning",
) -> None:
    """Serve the viewer for ``store`` on 127.0.0.1:``port`` until interrupted.

    ``announce`` receives the page's URL once the socket listens (port 0 picks a free port).
    """
    import threading
    import webbrowser

    import uvicorn

    sock = bind(port)
    url = f"http://{HOST}:{sock.getsockname()[1]}/"
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level=log_level))
    if announce is not None:
        announce(url)
    if open_browser:

        def _open() -> None:
            # Opened once the server runs, so the first load does not race the startup.
            while not server.started and not server.should_exit:
                threading.Event().wait(0.05)
            if server.started:
                webbrowser.open(url)

        threading.Thread(target=_open, daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


__all__ = ["HOST", "bind", "create_app", "serve"]
