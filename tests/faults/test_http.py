"""A service that accepts and never answers, answers 500, answers garbage, drops mid-body or
trickles: host.http_get names each within its timeout (a total deadline, not per read)."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import pytest

from ascend_doctor.host import LiveHost
from tests.timing import budget


@contextmanager
def tcp_server(behaviour):
    """A loopback server running ``behaviour(conn)`` for every connection."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()
    conns = []

    def loop():
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conns.append(c)
            threading.Thread(target=_serve, args=(behaviour, c, stop), daemon=True).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(1)
        srv.close()
        for c in conns:
            try:
                c.close()
            except OSError:
                pass


def _serve(behaviour, c, stop):
    try:
        c.settimeout(5)
        c.recv(65536)  # the request
        behaviour(c, stop)
    except OSError:
        pass


def silent(c, stop):
    stop.wait(10)


def status_500(c, stop):
    body = b'{"error": "EngineCore died"}'
    c.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    c.close()


def garbage(c, stop):
    c.sendall(b"\x16\x03\x01\x00\xa5garbage, not HTTP\r\n\r\n")
    c.close()


def drop_mid_body(c, stop):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
              b"# HELP vllm:num_requests_running")
    c.close()


def trickle(c, stop):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
    while not stop.is_set():
        c.sendall(b"#")
        time.sleep(0.2)


def trickle_headers(c, stop):
    for ch in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
        if stop.is_set():
            return
        c.sendall(bytes([ch]))
        time.sleep(0.2)


CASES = [
    (silent, None, "no answer within 1 s"),
    (status_500, 500, None),
    (garbage, None, "not an HTTP answer"),
    (drop_mid_body, None, "connection closed mid-body after 32 bytes"),
    (trickle, None, "no complete answer within 1 s"),
    (trickle_headers, None, "no complete answer within 1 s"),
]


@pytest.mark.parametrize("behaviour,status,error", CASES, ids=[c[0].__name__ for c in CASES])
def test_http_faults_are_named_within_the_timeout(behaviour, status, error):
    with tcp_server(behaviour) as url:
        t0 = time.monotonic()
        r = LiveHost("/").http_get(url + "/metrics", timeout=1.0)
        took = time.monotonic() - t0
    # the slowest server stays silent 10 s, the trickles never end: overhead scaled up to 4 s
    assert took < 1.0 + budget(0.8, cap=4.0), f"{behaviour.__name__}: {took:.2f} s for a 1 s timeout"
    assert r.status == status and not r.ok
    if error:
        assert r.error and r.error.startswith(error), r.error
    else:
        assert r.error is None and b"EngineCore died" in r.body


def test_refused_and_backlog_only():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = LiveHost("/").http_get(f"http://127.0.0.1:{port}/health", timeout=1.0)
    assert r.status is None and r.error == "connection refused (nothing listens there)"
    # listening, never accepting: the kernel completes the handshake, nobody reads
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        t0 = time.monotonic()
        r = LiveHost("/").http_get(f"http://127.0.0.1:{s.getsockname()[1]}/health", timeout=1.0)
        assert time.monotonic() - t0 < 1.0 + budget(0.8, cap=4.0) and r.error.startswith("no answer within 1 s")
    finally:
        s.close()
    r = LiveHost("/").http_get("http://127.0.0.1:99999/health", timeout=1.0)
    assert r.status is None and "bad port" in r.error
