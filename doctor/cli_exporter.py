"""`ascend-doctor exporter`: serve the doctor's findings to Prometheus.

One background thread runs the checks every ``--interval`` seconds, never overlapping; each
scrape only serializes the last snapshot (built once per run), so a scrape never runs a check.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import click


FAULT_SAMPLING_CHECKS = ("tlb.faults",)  # they sample /proc for seconds: only when asked


class State:
    """The last snapshot and its rendered exposition, swapped atomically under a lock."""

    def __init__(self) -> None:
        from .exporter import Snapshot, exposition, health  # noqa: F401  (lazy: prometheus_client)
        self._lock = threading.Lock()
        self.snap = Snapshot(None, None, time.time(), None, "the first run has not finished")
        self.body = exposition(self.snap)

    def set(self, snap: Snapshot) -> None:
        from .exporter import Snapshot, exposition, health  # noqa: F401  (lazy: prometheus_client)
        body = exposition(snap)
        with self._lock:
            self.snap, self.body = snap, body

    def get(self) -> tuple[Snapshot, bytes]:
        with self._lock:
            return self.snap, self.body


NPU_CAPTURE_CHECK = "exporter.npu-smi"  # hidden: hands the run's NpuSmi fact to the metrics


def run_once(make_host, options, skip: tuple[str, ...], timeout: float | None,
             context: str | None, last_success: float | None) -> Snapshot:
    """One run of the checks; the NPU series come from the same run's NpuSmi fact, so
    npu-smi runs once per interval (a hidden check reads it from the run's FactStore and is
    dropped from the report). Any failure becomes Snapshot.error."""
    from dataclasses import replace

    from .engine import DEFAULT_TIMEOUT, RunConfig, run
    from .exporter import Snapshot
    from .facts import FactStore
    from .model import Category, Finding
    from .probes.npusmi import NpuSmi
    from .registry import CheckSpec, Registry

    from .probes.hccn import HccnState
    from .probes.npusmi_detail import NpuDetail

    captured: dict[type, object] = {}

    def capture(store) -> Finding:
        for fact in (NpuSmi, NpuDetail, HccnState):
            try:
                captured[fact] = store.get(fact)
            except Exception as exc:  # no npu-smi / hccn_tool: no such series, checks say why
                from .cancel import Cancelled
                if isinstance(exc, Cancelled):
                    raise
        return Finding.info("npu-smi fact handed to the exporter")

    capture.__annotations__ = {"store": FactStore, "return": Finding}
    try:
        host = make_host()
        registry = Registry.discover()
        registry.load_plugins()
        registry.add_check(CheckSpec(NPU_CAPTURE_CHECK, "npu-smi for the NPU metrics", capture,
                                     Category.NPU, ("exporter",)))
        config = RunConfig((), tuple(skip), timeout or DEFAULT_TIMEOUT, context=context,
                           override=bool(timeout))
        report = run(host, options, registry, config)
        report = replace(report, results=tuple(r for r in report.results
                                               if r.check_id != NPU_CAPTURE_CHECK))
    except Exception as exc:  # the loop goes on; the scrape shows ascend_doctor_up 0
        return Snapshot(None, None, time.time(), last_success,
                        f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    now = time.time()
    return Snapshot(report, captured.get(NpuSmi), now, now,
                    npu_detail=captured.get(NpuDetail), hccn=captured.get(HccnState))


RULES_RESOURCE = "data/prometheus/ascend-doctor-rules.yml"  # = deploy/prometheus/, tested


def rules_bytes() -> bytes:
    """The alert rules file shipped in the package (package data), for `--print-rules`."""
    from importlib.resources import files

    return files("ascend_doctor").joinpath(RULES_RESOURCE).read_bytes()


def loop(state: State, once, interval: float, stop: threading.Event) -> None:
    """Run, publish, sleep the rest of the interval; sequential, so never overlapping."""
    while not stop.is_set():
        t0 = time.monotonic()
        last = state.get()[0].last_success
        state.set(once(last))
        stop.wait(max(1.0, interval - (time.monotonic() - t0)))


# A scraper sends its request at once; a client that has not finished the request line and
# headers within HEADER_TIMEOUT_S is cut off, whole responses are written within
# WRITE_TIMEOUT_S, and at most MAX_HANDLERS requests are served at a time (beyond: 503 at
# once, no thread). 1000 half-sent requests used to hold 996 threads for as long as the
# client liked, and a scrape took 9.6 s (the manifest's liveness timeout is 5 s).
HEADER_TIMEOUT_S = 3.0
WRITE_TIMEOUT_S = 10.0
MAX_HANDLERS = 32
_BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
         b"Content-Length: 5\r\nConnection: close\r\n\r\nbusy\n")


class Reaper:
    """One thread for every pending request: a connection still sending its request line
    and headers at its deadline is shut down (its blocked read returns, its handler ends).
    A per-read socket timeout alone would let a client send one byte every few seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[Any, float] = {}
        self._thread: threading.Thread | None = None

    def watch(self, conn: Any, seconds: float) -> None:
        with self._lock:
            self._due[conn] = time.monotonic() + seconds
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="exporter-reaper",
                                                daemon=True)
                self._thread.start()

    def done(self, conn: Any) -> None:
        with self._lock:
            self._due.pop(conn, None)

    def _run(self) -> None:
        import socket

        while True:
            time.sleep(0.2)
            now = time.monotonic()
            with self._lock:
                late = [c for c, t in self._due.items() if t <= now]
                for c in late:
                    del self._due[c]
            for c in late:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def make_server(address: tuple[str, int], handler: Any, max_handlers: int = MAX_HANDLERS):
    """A ThreadingHTTPServer with a cap on concurrent handlers (503 beyond, answered from the
    accepting thread without blocking) and quiet about clients that went away."""
    from http.server import ThreadingHTTPServer

    class BoundedServer(ThreadingHTTPServer):
        daemon_threads = True
        reaper = Reaper()
        slots = threading.BoundedSemaphore(max_handlers)

        def process_request(self, request: Any, client_address: Any) -> None:
            if not self.slots.acquire(blocking=False):
                try:
                    request.setblocking(False)
                    request.send(_BUSY)
                except OSError:
                    pass
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.reaper.done(request)
                self.slots.release()

        def handle_error(self, request: Any, client_address: Any) -> None:
            exc = sys.exc_info()[1]
            if isinstance(exc, OSError):  # broken pipe, reset, timed out: the client left
                return
            print(f"ascend-doctor exporter: request from {client_address[0]} failed: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)

    return BoundedServer(address, handler)


def make_handler(state: State):
    from http.server import BaseHTTPRequestHandler  # lazy: only the exporter serves
    from prometheus_client import CONTENT_TYPE_LATEST  # noqa: F401  (lazy: heavy)
    from .exporter import health
    class Handler(BaseHTTPRequestHandler):
        timeout = WRITE_TIMEOUT_S  # socket timeout of each read and write

        def setup(self) -> None:
            super().setup()
            reaper = getattr(self.server, "reaper", None)
            if reaper is not None:
                reaper.watch(self.connection, HEADER_TIMEOUT_S)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            reaper = getattr(self.server, "reaper", None)
            if reaper is not None:  # the request line and headers are in
                reaper.done(self.connection)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, state.get()[1], CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok, reasons = health(state.get()[0])
                text = "healthy\n" if ok else "degraded: " + "; ".join(reasons[:8]) + "\n"
                self._send(200 if ok else 503, text.encode(), "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics or /healthz\n", "text/plain")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: Any) -> None:  # scrapes every few seconds: keep stderr quiet
            pass

    return Handler


@click.command("exporter", epilog="""\b
Examples:
  sudo ascend-doctor exporter --port 9464
  ascend-doctor exporter --demo --port 0
  curl -s http://127.0.0.1:9464/metrics | grep ascend_doctor""")
@click.option("--root", type=click.Path(exists=True, file_okay=False), default=None,
              help="Diagnose a sysroot instead of this machine.")
@click.option("--bundle", type=click.Path(dir_okay=False), default=None,
              help="Diagnose a collected bundle.")
@click.option("--demo", is_flag=True, help="Serve the bundled demo scenario.")
@click.option("--service", "service_url", default=None, metavar="URL",
              help="The vLLM server (default http://127.0.0.1:8000).")
@click.option("--pcap", type=click.Path(dir_okay=False), default=None,
              help="A capture to analyse on every run (expensive: only when given).")
@click.option("--profile", "profile_dir", type=click.Path(file_okay=False), default=None,
              help="An msprof directory to analyse on every run (only when given).")
@click.option("--sample-seconds", type=float, default=None, metavar="SECONDS",
              help="Enable the page-fault sampling checks with this window (off by default).")
@click.option("--interval", type=float, default=60.0, show_default=True,
              help="Seconds between the starts of two runs.")
@click.option("--timeout", type=float, default=None,
              help="Time budget per check (default: each check's own; never above --interval).")
@click.option("--listen", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=9464, show_default=True, help="0 picks a free port.")
@click.option("--print-rules", is_flag=True,
              help="Print the Prometheus alert rules for these metrics (a rules file) and exit.")
def exporter_cmd(root, bundle, demo, service_url, pcap, profile_dir, sample_seconds, interval,
                 timeout, listen, port, print_rules=False) -> None:
    """Serve /metrics and /healthz from checks re-run in the background."""
    if print_rules:
        sys.stdout.buffer.write(rules_bytes())
        sys.stdout.flush()
        return
    from .cli_common import build_options, default_lang
    from .engine import DEFAULT_TIMEOUT
    from .errors import UsageError
    from .i18n import tt
    from .opening import demo_host, open_host

    lang = default_lang()
    if interval <= 0:
        raise UsageError(tt(lang, "--interval {interval}: must be > 0 seconds",
                            interval=f"{interval:g}"))
    if demo and (root or bundle):
        raise UsageError(tt(lang, "--demo excludes --root and --bundle"))
    kw: dict[str, Any] = {"service_url": service_url, "pcap": pcap, "profile_dir": profile_dir,
                          "sample_seconds": sample_seconds or 3.0}
    context = None
    if demo:
        from .demo import demo_bundle_data
        inputs = demo_bundle_data().manifest.get("options", {}).get("demo_inputs", {})
        kw.update({k: v for k, v in inputs.items()
                   if k in ("pcap", "profile_dir", "block_audit")})
        make_host, context = demo_host, "demo"
    else:
        open_host(root, bundle)  # a bad --bundle fails now, with one line, not in the loop
        def make_host():
            return open_host(root, bundle)
    options = build_options(kw)
    skip = () if sample_seconds else FAULT_SAMPLING_CHECKS
    # a run must end before the next is due: no check's budget exceeds the interval
    budget = min(timeout, interval) if timeout else (
        interval if interval < DEFAULT_TIMEOUT else None)

    state = State()
    stop = threading.Event()

    def once(last):
        return run_once(make_host, options, skip, budget, context, last)

    try:
        server = make_server((listen, port), make_handler(state))
    except OSError as exc:
        raise UsageError(tt(lang, "--listen {listen} --port {port}: cannot listen: {reason}",
                            listen=listen, port=port, reason=exc.strerror or exc)) from None
    worker = threading.Thread(target=loop, args=(state, once, interval, stop),
                              name="exporter-runs", daemon=True)
    worker.start()
    host, bound = server.server_address[:2]
    click.echo(tt(lang, "ascend-doctor exporter: listening on {url} (runs every {interval} s)",
                  url=f"http://{host}:{bound}/metrics", interval=f"{interval:g}"), err=True)
    sys.stderr.flush()
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()


COMMANDS = (exporter_cmd,)
