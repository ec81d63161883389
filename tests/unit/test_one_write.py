"""The daemon's HTTP protocol sends an answer of known length in one write (issue 17 part 5):
uvicorn writes the status line and headers apart from the body, a second system call on the
daemon and a second wake-up of the client per answer. xced.server.auth.OneWriteTransport
holds the headers until the body's first bytes.

Real parts: xced's PeerCredProtocol (uvicorn's httptools protocol) on one end of a Unix
socket pair in a running event loop, a plain ASGI app, and the raw bytes a client reads on
the other end; the transport's writes are counted where asyncio's transport takes them."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn
from uvicorn.server import ServerState

from xced.server.auth import PeerCredProtocol

pytestmark = pytest.mark.timeout(30)


def _exchange(app, request: bytes) -> tuple[list[bytes], bytes]:
    """Serve `request` with `app` over a socket pair: (the transport's writes, every byte the
    client read until the server closed or 0.3 s passed without more)."""

    async def main():
        config = uvicorn.Config(app, http=PeerCredProtocol, lifespan="off", access_log=False, log_level="critical")
        config.load()
        proto = PeerCredProtocol(config=config, server_state=ServerState(), app_state={})
        server_end, client_end = socket.socketpair()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(lambda: proto, server_end)
        writes: list[bytes] = []
        real_write = transport.write

        def counting_write(data):
            writes.append(bytes(data))
            real_write(data)

        transport.write = counting_write  # asyncio's own transport: the protocol writes through it
        client_end.setblocking(False)
        await loop.sock_sendall(client_end, request)
        got = b""
        while True:
            try:
                chunk = await asyncio.wait_for(loop.sock_recv(client_end, 65536), 0.3)
            except asyncio.TimeoutError:
                break
            if not chunk:
                break
            got += chunk
        transport.close()
        client_end.close()
        await asyncio.sleep(0)
        return writes, got

    return asyncio.run(main())


def _answer(body: bytes, *, length: bool = True, fail_after_start: bool = False):
    async def app(scope, receive, send):
        await receive()
        headers = [(b"content-type", b"application/json")]
        if length:
            headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if fail_after_start:
            raise RuntimeError("the app failed after its headers")
        if length:
            await send({"type": "http.response.body", "body": body})
        else:
            for i in range(len(body)):
                await send({"type": "http.response.body", "body": body[i:i + 1], "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    return app


POST = b"POST /x HTTP/1.1\r\nHost: xced\r\nContent-Length: 2\r\n\r\n{}"


def test_an_answer_of_known_length_is_one_write_of_headers_and_body():
    writes, got = _exchange(_answer(b'{"job_id":1}'), POST)
    assert len(writes) == 1, writes
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and writes[0].endswith(b'\r\n\r\n{"job_id":1}')
    assert got == writes[0]


def test_two_requests_on_one_connection_are_two_writes_each_whole():
    writes, got = _exchange(_answer(b"[]"), POST + POST)
    assert len(writes) == 2 and all(w.endswith(b"\r\n\r\n[]") for w in writes), writes
    assert got == b"".join(writes)


def test_a_head_answer_sends_its_headers_and_no_body():
    """HEAD: uvicorn drops the body, so the headers are not held for it."""
    writes, got = _exchange(_answer(b"{}"), b"HEAD /x HTTP/1.1\r\nHost: xced\r\n\r\n")
    assert len(writes) == 1 and writes[0].endswith(b"content-length: 2\r\n\r\n"), writes
    assert got == writes[0]


def test_a_chunked_answer_passes_through_write_by_write():
    writes, got = _exchange(_answer(b"ab", length=False), POST)
    assert writes[0].endswith(b"transfer-encoding: chunked\r\n\r\n"), writes
    assert b"".join(writes[1:]) == b"1\r\na\r\n1\r\nb\r\n0\r\n\r\n"
    assert got == b"".join(writes)


def test_headers_held_for_a_body_that_never_comes_are_sent_as_the_connection_closes():
    """An app that fails after its headers: uvicorn closes the connection; what was held
    goes out first, so the client sees the headers and then the close (as without holding)."""
    writes, got = _exchange(_answer(b"{}", fail_after_start=True), POST)
    assert len(writes) == 1 and writes[0].startswith(b"HTTP/1.1 200 OK\r\n"), writes
    assert writes[0].endswith(b"content-length: 2\r\n\r\n")
    assert got == writes[0]
