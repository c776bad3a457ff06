"""Subprocess and HTTP helpers of the live host: one bounded child (no shell, capped output,
the process group killed on timeout or cancel) and one bounded GET (no redirects, proxies or
retries; a whole-exchange deadline). Only ``LiveHost.run``/``http_get`` call them; the rules
for what may run are doctor/spawn.py's."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from typing import Mapping

from .. import cancel
from ..errors import SourceError, SourceMissing
from ..i18n import T
from .api import CommandResult, HttpResponse


def run_capped(real_argv, shown_argv, timeout: float, cap: int, env: dict[str, str],
               token: "cancel.CancelToken | None" = None, popen_extra: dict | None = None
               ) -> CommandResult:
    """Run without a shell; keep at most ``cap`` bytes per stream; kill the group on timeout.

    With a ``token`` (the calling check's), cancelling it kills the group at once, from the
    cancelling thread, and this raises ``Cancelled``: an abandoned check's command does not
    outlive the check's timeout, whatever its own ``timeout`` says.
    """
    import signal

    import shutil

    from ..spawn import no_new_privs_prefix

    if token is not None:
        token.check()
    # the program is found here, not by the no_new_privs wrapper, so "not found" / "not
    # executable" stay errors of this call rather than a wrapper's exit code
    prog = str(real_argv[0])
    found = prog if "/" in prog else shutil.which(prog, path=env.get("PATH", os.defpath))
    if found is None or not os.path.exists(found):
        raise SourceMissing(shown_argv[0], "command not found")
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise SourceError(shown_argv[0], "permission denied (not executable)")
    start = time.monotonic()
    try:  # cwd "/": nothing is imported or loaded from where the operator stands
        proc = subprocess.Popen([*no_new_privs_prefix(), found, *real_argv[1:]],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True, cwd="/",
                                close_fds=True, **(popen_extra or {}))
    except FileNotFoundError:
        raise SourceMissing(shown_argv[0], "command not found") from None
    except PermissionError:
        raise SourceError(shown_argv[0], "permission denied (not executable)") from None
    except OSError as exc:
        raise SourceError(shown_argv[0], f"cannot execute: {exc.strerror or exc}") from None
    except ValueError as exc:  # an argument with a NUL byte
        raise SourceError(shown_argv[0], f"cannot execute: {exc}") from None
    bufs: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
    over = {"out": False, "err": False}

    def drain(stream, key: str) -> None:
        while True:
            chunk = stream.read(65536)
            if not chunk:
                break
            room = cap - len(bufs[key])
            if room > 0:
                bufs[key] += chunk[:room]
            if len(chunk) > max(room, 0):
                over[key] = True
        stream.close()

    threads = [threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    def kill_group() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        try:
            proc.wait(timeout=2.0)  # reaped before cancel() returns: no zombie outlives the run
        except subprocess.TimeoutExpired:
            pass

    unregister = token.on_cancel(kill_group) if token is not None else (lambda: None)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group()
        proc.wait()
    finally:
        unregister()
    for t in threads:
        t.join(timeout=1.0)
    if token is not None:
        token.check()  # killed by the cancel: nobody will read this result
    return CommandResult(tuple(shown_argv), None if timed_out else proc.returncode,
                         bytes(bufs["out"]), bytes(bufs["err"]), time.monotonic() - start,
                         timed_out, over["out"] or over["err"], timeout)


def http_get(url: str, timeout: float, headers: Mapping[str, str], cap: int) -> HttpResponse:
    """One bounded GET with http.client: no redirects followed, no retries, no proxies.

    ``timeout`` bounds the whole exchange, not each socket read: a server that trickles a
    byte a second is cut off at the deadline (a watchdog shuts the socket down) and named.
    """
    import http.client
    from urllib.parse import urlsplit

    start = time.monotonic()
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return HttpResponse(url, None, error=f"unsupported URL {url!r} (bad port)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return HttpResponse(url, None, error=f"unsupported URL {url!r}")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, port, timeout=timeout)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    expired = threading.Event()
    held: list[socket.socket] = []  # http.client drops conn.sock once a response will close

    def cut_off() -> None:
        expired.set()
        for sock in held:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # a little after the per-read timeout, so a silent server is named by that one first
    watchdog = threading.Timer(timeout + min(0.25, timeout / 4), cut_off)
    watchdog.daemon = True
    watchdog.start()

    def late(got: int) -> HttpResponse:
        return HttpResponse(url, None, error=f"no complete answer within {timeout:g} s "
                            f"({got} bytes received)", duration_s=time.monotonic() - start)

    try:
        conn.connect()
        held.append(conn.sock)
        if expired.is_set():
            cut_off()
        conn.request("GET", path, headers={"User-Agent": "ascend-doctor", **headers})
        resp = conn.getresponse()
        body = resp.read(cap + 1)
        if expired.is_set():
            return late(len(body))
        truncated = len(body) > cap
        declared = resp.getheader("content-length") or ""
        if not truncated and declared.isascii() and declared.isdigit() and \
                int(declared) > len(body):  # read(amt) returns a short body without raising
            return HttpResponse(url, None, body=body,
                                error=f"connection closed mid-body after {len(body)} bytes "
                                      f"(of {int(declared)})",
                                duration_s=time.monotonic() - start)
        return HttpResponse(url, resp.status, {k.lower(): v for k, v in resp.getheaders()},
                            body[:cap], None, time.monotonic() - start, truncated)
    except socket.timeout:
        return HttpResponse(url, None, error=T("no answer within {s} s", s=f"{timeout:g}"),
                            duration_s=time.monotonic() - start)
    except ConnectionRefusedError:
        return HttpResponse(url, None, error=T("connection refused (nothing listens there)"),
                            duration_s=time.monotonic() - start)
    except http.client.IncompleteRead as exc:
        if expired.is_set():
            return late(len(exc.partial))
        return HttpResponse(url, None, body=bytes(exc.partial[:cap]),
                            error=f"connection closed mid-body after {len(exc.partial)} bytes",
                            duration_s=time.monotonic() - start)
    except (http.client.HTTPException, ValueError) as exc:
        if expired.is_set():
            return late(0)
        return HttpResponse(url, None, error=f"not an HTTP answer ({type(exc).__name__}: {exc})",
                            duration_s=time.monotonic() - start)
    except OSError as exc:
        if expired.is_set():
            return late(0)
        return HttpResponse(url, None, error=f"{exc.strerror or exc}",
                            duration_s=time.monotonic() - start)
    finally:
        watchdog.cancel()
        conn.close()
