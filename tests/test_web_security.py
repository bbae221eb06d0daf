"""The viewer against a rebound DNS name, another page's Origin and oversized bodies, checked on
the real server (uvicorn on 127.0.0.1), issue 13 item 9."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import threadline as tl
from threadline.web.app import MAX_BODY
from web_support import serve

CLIENT = httpx.Client(timeout=60)  # a loaded machine answers slowly; slowness is not tested


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tl.open_store(tmp_path_factory.mktemp("store"))
    with store.create(session_id="s") as s:
        s.append_message("user", "private conversation")
    with serve(store) as url:
        assert CLIENT.get(url + "api/sessions").status_code == 200  # no start-up race
        yield url.rstrip("/")
    CLIENT.close()


def port_of(base: str) -> str:
    return base.rsplit(":", 1)[1]


@pytest.mark.parametrize(
    "path", ["/api/sessions", "/api/sessions/s/context", "/", "/static/app.js"]
)
def test_a_rebound_dns_name_is_refused_on_every_request(base: str, path: str) -> None:
    r = CLIENT.get(base + path, headers={"Host": f"attacker.example:{port_of(base)}"})
    assert r.status_code == 403
    assert r.json() == {
        "error": f"Refusing a request for host 'attacker.example:"
        f"{port_of(base)}': the viewer answers only on 127.0.0.1, "
        "localhost or [::1]"
    }
    assert "private conversation" not in r.text


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_loopback_names_are_served(base: str, host: str) -> None:
    r = CLIENT.get(base + "/api/sessions", headers={"Host": f"{host}:{port_of(base)}"})
    assert r.status_code == 200
    assert [x["id"] for x in r.json()["sessions"]] == ["s"]


@pytest.mark.parametrize(
    "origin",
    [
        "http://attacker.example",
        "null",
        "https://127.0.0.1",
        "http://127.0.0.1:1",
        "http://127.0.0.1.attacker.example",
    ],
)
def test_another_pages_origin_is_refused_on_reads_and_writes(base: str, origin: str) -> None:
    r = CLIENT.get(base + "/api/sessions/s/context", headers={"Origin": origin})
    assert r.status_code == 403
    assert r.json()["error"].startswith(f"Refusing a request from origin '{origin}'")
    w = CLIENT.post(
        base + "/api/sessions/s/apply",
        headers={"Origin": origin, "X-Threadline": "1"},
        json={"action": "clear", "args": {}},
    )
    assert w.status_code == 403


def test_the_viewers_own_origin_is_served(base: str) -> None:
    r = CLIENT.get(base + "/api/sessions", headers={"Origin": base})
    assert r.status_code == 200


def test_a_body_announced_too_large_is_refused_before_it_is_read(base: str) -> None:
    port = int(port_of(base))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            b"POST /api/sessions/s/preview HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"X-Threadline: 1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400000000\r\n\r\n{"
        )
        answer = b""
        while chunk := sock.recv(65536):  # the server answers and closes
            answer += chunk
        text = answer.decode()
    assert text.startswith("HTTP/1.1 413 ")
    assert text.endswith(f'{{"error":"The request body is larger than {MAX_BODY} bytes"}}')


def test_a_chunked_body_over_the_cap_is_cut_off(base: str) -> None:
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        block = b" " * 65536
        for _ in range(4 * MAX_BODY // len(block)):
            sent += len(block)
            yield block

    try:
        r = CLIENT.post(
            base + "/api/sessions/s/preview",
            content=chunks(),
            headers={"X-Threadline": "1", "Content-Type": "application/json"},
        )
    except httpx.TransportError:  # the server may close before the client finished sending
        status: Any = "closed"
    else:
        status = r.status_code
    assert status in (413, "closed")
    assert sent < 4 * MAX_BODY


def test_errors_do_not_echo_unbounded_input(base: str) -> None:
    huge = "x" * 100_000
    r = CLIENT.get(base + "/api/sessions", headers={"Host": huge})
    assert r.status_code in (400, 403, 431)  # uvicorn may refuse such a header itself
    assert len(r.content) < 1000
    w = CLIENT.post(
        base + "/api/sessions/s/apply",
        headers={"X-Threadline": "1"},
        json={"action": huge, "args": {}},
    )
    assert w.status_code == 400
    assert len(w.json()["error"]) <= 2000 + len("… (truncated)")


def test_the_session_is_untouched_by_refused_requests(base: str) -> None:
    r = CLIENT.get(base + "/api/sessions/s/context")
    assert r.status_code == 200
    assert [row["preview"] for row in r.json()["rows"]] == ["private conversation"]
