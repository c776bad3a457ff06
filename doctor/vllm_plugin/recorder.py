"""Turn one scheduler step into one bounded JSON line (no vLLM import here).

The audit log is what ``checks/block_tables.py`` replays. Line kinds (key ``t``):

* ``hdr``  — once per file: engine (v1/v0), vllm version, pid, num_gpu_blocks, block_size,
  prefix_caching, KV-cache group kinds, sampling period, whether frees are tracked, and
  ``split`` (1: ids are the scheduler's physical ids; r > 1: ids are vllm-ascend kernel
  "logical" blocks, r per physical block).
* ``s``    — a V1 step: ``new`` = [[req_id, block_ids per group, num_computed_tokens]],
  ``cc`` = the cached requests as vLLM 0.11 holds them, parallel lists ``ids``, ``res``
  (resumed_from_preemption), ``nb`` (new block ids per group, or null), ``nc``
  (num_computed_tokens); readers also accept rows ``cached`` = [[req_id, resumed,
  new_block_ids, num_computed]],
  ``fin`` = finished ids, ``freed`` = ids whose blocks the KV manager freed since the
  last line (preemption or finish), ``tok`` = num_scheduled_tokens. ``full`` = 1 (a
  sampled step, or the first after a rotation): a cached entry with ids carries the
  request's complete table (replace), one with null did not change since it was last
  written, so the reader needs no skipped step.
* ``s0``   — a V0 step: ``g`` = [[request_id, {seq_id: block table}, computed blocks]].
* ``off``  — the plugin disabled itself, with the reason.

Attribute names follow vLLM 0.11 ``vllm/v1/core/sched/output.py`` (facts: vllm-internals §3.2),
with the 0.9 list form of ``scheduled_cached_reqs`` and the later ``resumed_req_ids`` set.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import multiprocessing.util
import os
import stat
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable

FORMAT_VERSION = 1
BATCH_STEPS = 64  # lines per os.write (a killed engine loses at most this many steps)
BATCH_MS = 500  # and at most this long: the background flush period
BATCH_BYTES = 1 << 20  # a batch of big steps is written sooner
REPORT_S = 3600  # the cost line is logged at most hourly, when the engine goes idle
log = logging.getLogger("vllm.ascend_doctor.block_audit")
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, check_circular=False).encode


class Incompatible(Exception):
    """The objects vLLM handed us do not have the shape this recorder knows."""


class AuditFile:
    """Append-only JSON lines with a size cap and rotation (FILE → FILE.1 → … FILE.keep),
    written in batches.

    The engine thread queues each line (``collections.deque.append``: no lock, no system
    call, nothing that lets go of the GIL) and writes the queue with one ``os.write`` on an
    O_APPEND descriptor once ``batch_steps`` lines (default 64), ``batch_bytes`` or
    ``batch_ms`` (default 500 ms) have gathered. So the engine thread releases the GIL at most
    once per batch. That matters in vLLM's EngineCore: every release lets its output thread
    take the GIL, and the engine thread then waits for it back; one write per step cost the
    engine 42–66 % of its TTFT p99 (issue 35). The queue is also written before a rotation,
    on ``flush``/``close``, at interpreter exit (``atexit`` and multiprocessing's exit
    finalisers, which run where ``atexit`` does not) and when the object is collected.

    An engine that stops stepping (idle, or stuck in a model step) no longer writes itself, so
    a daemon thread looks every ``batch_ms``: it writes the queue only when no line came for
    half that time. While the engine steps it writes nothing and takes no lock the engine
    waits on; each look is a wake-up of a few microseconds, about two a second.

    Loss bound: a process killed outright (SIGKILL, OOM killer, ``os._exit``) loses what was
    not yet written: at most ``batch_steps`` lines (64 steps by default) and, while the engine
    steps, at most the last ``batch_ms`` of them (1.5 × ``batch_ms`` once it has stopped);
    never part of a line, since a batch is whole lines and goes to one file.
    ``batch_steps=1`` writes every line at once (the old behaviour, and no thread).
    After a rotation the recorder writes a header and, from the next step, a full step, so
    each file stands on its own.
    """

    def __init__(self, path: str, max_bytes: int, keep: int, batch_steps: int = BATCH_STEPS,
                 batch_ms: int = BATCH_MS, batch_bytes: int = BATCH_BYTES) -> None:
        self.path = path
        self.max_bytes = max(4096, max_bytes)
        self.keep = max(0, keep)
        self.batch_steps = max(1, batch_steps)
        self.batch_s = max(1, batch_ms) / 1000.0
        self.batch_bytes = max(1, batch_bytes)
        self.rotations = 0
        self.writes = 0  # os.write calls that carried lines (batches)
        self.idle_writes = 0  # of which the background thread made (the engine had stopped)
        self.error: OSError | None = None  # a failed write of the background thread
        self.on_idle: Callable[[], None] | None = None  # called after an idle write
        self._fd = -1
        self._dfd = -1
        self._size = 0  # bytes in the file
        # the queue: appended to by the engine thread only, emptied from the left by whoever
        # holds _lock; bytes queued = _queued - _written (each counter has one writer)
        self._q: deque[bytes] = deque()
        self._queued = 0  # bytes ever queued (engine thread)
        self._written = 0  # bytes ever written from the queue (under _lock)
        self._last_put = 0.0  # time.monotonic() of the last queued line
        self._last_write = time.monotonic()
        self._lock = threading.Lock()  # one writer at a time: lines reach the file in order
        self._stop: threading.Event | None = None
        self._dir, self._name = os.path.split(os.path.abspath(path))
        _live.add(self)
        _hook_exit()

    def _open(self) -> None:
        """Open (create) the file relative to its directory's descriptor, never following a
        link: the engine may run as root and the directory may be writable by another
        account, which could plant FILE (or FILE.1) as a link to any file. An existing
        file must be a regular file of our own uid with one link (no hard link either)."""
        if self._dfd < 0:
            os.makedirs(self._dir, exist_ok=True)
            self._dfd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fd = os.open(self._name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                     | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, 0o644, dir_fd=self._dfd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
            os.close(fd)
            raise OSError(errno.EPERM, f"{self.path}: not a regular file of uid {os.geteuid()} "
                          f"with one link (mode {st.st_mode:o}, uid {st.st_uid}, "
                          f"{st.st_nlink} links): not written")
        os.set_blocking(fd, True)
        self._fd = fd
        self._size = st.st_size

    def write(self, line: bytes) -> None:
        """Queue one whole line (engine thread); writes the queue when a batch is due. Raises
        the error a background write met, so the caller turns the audit off."""
        if self.error is not None:
            raise self.error
        if self._fd < 0:
            self._open()
        q = self._q
        q.append(line)
        self._queued += len(line)
        now = self._last_put = time.monotonic()
        if (len(q) >= self.batch_steps or now - self._last_write >= self.batch_s
                or self._queued - self._written >= self.batch_bytes):
            # never wait here: if the background thread is writing, it or the next step
            # writes these lines
            if self._lock.acquire(False):
                try:
                    self._write_queue()
                finally:
                    self._lock.release()
        if self._stop is None and self.batch_steps > 1:
            self._start_flusher()

    def flush(self) -> None:
        with self._lock:
            self._write_queue()

    def _write_queue(self) -> None:
        """Write every queued line with one os.write (the caller holds ``_lock``)."""
        n = len(self._q)
        if not n or self._fd < 0:
            return
        pop = self._q.popleft
        data = pop() if n == 1 else b"".join([pop() for _ in range(n)])
        view = memoryview(data)
        while view:  # a regular file takes it whole; loop in case a signal cut it short
            view = view[os.write(self._fd, view):]
        self._size += len(data)  # before _written: a concurrent fits() over-counts, never under
        self._written += len(data)
        self.writes += 1
        self._last_write = time.monotonic()

    def _start_flusher(self) -> None:
        """The daemon thread that writes the queue of an engine that stopped stepping: it
        holds only a weak reference, so a collected AuditFile (its finaliser writes) ends it."""
        stop = self._stop = threading.Event()
        ref = weakref.ref(self)
        period = self.batch_s
        quiet = period / 2

        def loop() -> None:
            while not stop.wait(period):
                f = ref()
                if f is None:
                    return
                try:
                    if f._q and time.monotonic() - f._last_put >= quiet:
                        with f._lock:
                            f._write_queue()
                            f.idle_writes += 1
                        if f.on_idle is not None:
                            f.on_idle()
                except OSError as exc:
                    f.error = exc  # the engine thread raises it at its next line
                    return
                finally:
                    del f

        threading.Thread(target=loop, name="ascend-doctor-audit-flush", daemon=True).start()

    def fits(self, n: int) -> bool:
        """False when ``n`` more bytes would pass the cap, counting what is queued (an empty
        file takes anything)."""
        if self._fd < 0:
            self._open()
        size = self._size + self._queued - self._written
        return not size or size + n <= self.max_bytes

    def rotate(self) -> None:
        """Write what is queued, then FILE → FILE.1 → … by renames inside the directory's
        descriptor (a rename moves a link itself, never its target); with ``keep`` 0 the
        open descriptor is truncated, never a path."""
        with self._lock:
            self._write_queue()
            if self.keep:
                os.close(self._fd)
                self._fd = -1
                for i in range(self.keep - 1, 0, -1):
                    src = f"{self._name}.{i}"
                    try:
                        os.stat(src, dir_fd=self._dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    os.replace(src, f"{self._name}.{i + 1}", src_dir_fd=self._dfd,
                               dst_dir_fd=self._dfd)
                os.replace(self._name, f"{self._name}.1", src_dir_fd=self._dfd,
                           dst_dir_fd=self._dfd)
                self._open()
            else:
                os.ftruncate(self._fd, 0)
                self._size = 0
            self.rotations += 1

    def close(self) -> None:
        """Write what is queued and close; safe to call twice (exit hooks and finaliser)."""
        if self._stop is not None:
            self._stop.set()
        with self._lock:
            try:
                self._write_queue()
            finally:
                self._written = self._queued  # what failed to be written is dropped
                self._q.clear()
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1
                if self._dfd >= 0:
                    os.close(self._dfd)
                    self._dfd = -1
        _live.discard(self)

    def __del__(self) -> None:  # the finaliser: a dropped recorder still writes its batch
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never from a finaliser
            pass


# every AuditFile not yet closed: written at exit by flush_all
_live: "weakref.WeakSet[AuditFile]" = weakref.WeakSet()
# every StepRecorder of this process: each logs what it cost at exit
_recorders: "weakref.WeakSet[StepRecorder]" = weakref.WeakSet()


def flush_all() -> None:
    """Write every open audit file's queued lines (exit hooks; tests and the simulator
    call it where an engine would go idle)."""
    for f in list(_live):
        try:
            f.flush()
        except Exception:  # noqa: BLE001 - an exit hook never raises
            pass


def _at_exit() -> None:
    flush_all()
    for rec in list(_recorders):
        try:
            rec.report(final=True)
        except Exception:  # noqa: BLE001 - an exit hook never raises
            pass


_hooked_pid = 0


def _hook_exit() -> None:
    """Once per process: ``flush_all`` (and each recorder's cost line) at exit. A
    multiprocessing child (vLLM's EngineCore) ends in ``os._exit`` after its exit finalisers,
    without running atexit, and a forked child starts with an empty finaliser registry: so
    both, registered in the process that writes."""
    global _hooked_pid
    if _hooked_pid == os.getpid():
        return
    _hooked_pid = os.getpid()
    atexit.register(_at_exit)
    multiprocessing.util.Finalize(None, _at_exit, exitpriority=100)


def _ids(groups: Any) -> Any:
    """Block ids per KV-cache group as JSON-ready lists (tuples/lists pass through)."""
    if groups is None:
        return None
    if isinstance(groups, (list, tuple)) and (not groups or isinstance(groups[0], (list, tuple))):
        return groups
    if isinstance(groups, (list, tuple)):  # a flat list: one group (vLLM ≤ 0.8 style)
        return (groups,)
    raise Incompatible(f"block ids of type {type(groups).__name__}")


class StepRecorder:
    """Builds and writes step lines; one per engine process.

    ``every`` = k records one step in k (the others cost a counter increment and the
    free-list bookkeeping). A sampled step, or the first after a rotation, is written in
    full: complete tables come from ``full_table(req_id)`` (the KV manager's
    ``get_block_ids``), so the reader never needs the skipped steps.
    """

    def __init__(self, out: AuditFile, header: dict[str, Any], every: int = 1,
                 full_table: Callable[[str], Any] | None = None,
                 clock: Callable[[], float] = time.time, report_s: float = REPORT_S) -> None:
        self.out = out
        self.clock = clock
        self.header = {"t": "hdr", "v": FORMAT_VERSION, **header, "every": max(1, every)}
        self.every = max(1, every)
        self.full_table = full_table
        self.step = 0
        self.freed: list[str] = []
        self.finished: list[str] = []
        self._need_full = False
        self._wrote_header = False
        self._dirty: set[str] = set()  # got blocks in a skipped step (sampling)
        # what the audit costs the engine, logged at exit (report): time the engine thread
        # spent in it (the wrapper adds each step's), bytes of the step lines
        self.ns = 0
        self.bytes = 0
        # each step's time by its power of two of ns: the tail of what one step was delayed
        # (the step that writes a batch), which the mean hides; the first step (it opens the
        # file, writes the header, starts the background thread: once a process) apart
        self.ns_hist = [0] * 64
        self.first_ns: int | None = None
        self.report_s = report_s
        self._reported_step = 0
        self._last_report = time.monotonic()
        out.on_idle = self._idle
        _recorders.add(self)

    def spent(self, ns: int) -> None:
        """Add one step's time in the audit (the engine thread's wall time, the wait to get the
        GIL back after a write included)."""
        self.ns += ns
        if self.first_ns is None:
            self.first_ns = ns
            return
        self.ns_hist[min(ns.bit_length(), 63)] += 1

    def step_us(self, q: float) -> int:
        """An upper bound of the ``q`` quantile of the per-step time, in microseconds (the top
        of its power-of-two bucket)."""
        total = sum(self.ns_hist)
        seen = 0
        for b, n in enumerate(self.ns_hist):
            seen += n
            if n and seen >= q * total:
                return -(-((1 << b) - 1) // 1000)
        return 0

    # -- events between steps -------------------------------------------------------------
    def on_free(self, req_id: str) -> None:
        if len(self.freed) < 100_000:
            self.freed.append(req_id)

    # -- one step ------------------------------------------------------------------------
    def _emit(self, rec: dict[str, Any]) -> None:
        line = _dumps(rec).encode() + b"\n"
        self.bytes += len(line)
        if self._wrote_header and not self.out.fits(len(line)):
            self.out.rotate()  # the new file starts with a header; the next step is full
            self._wrote_header = False
            if not rec.get("full") and self.full_table is not None:
                self._need_full = True
        if not self._wrote_header:
            hdr = {**self.header, "ts": self.clock()}
            if self.out.rotations:
                hdr["rotation"] = self.out.rotations
            self.out.write(_dumps(hdr).encode() + b"\n")
            self._wrote_header = True
            self.out.write(line)
            self.out.flush()  # a new file is written at once with its first step
            return
        self.out.write(line)

    @staticmethod
    def _cached(cr: Any) -> tuple[list, list, list, list]:
        """(req_ids, resumed, new_block_ids, num_computed) of any known CachedRequestData."""
        if isinstance(cr, list):  # vLLM ≤ 0.9: one CachedRequestData per request
            return ([c.req_id for c in cr], [c.resumed_from_preemption for c in cr],
                    [_ids(c.new_block_ids) for c in cr], [c.num_computed_tokens for c in cr])
        ids = cr.req_ids
        res = getattr(cr, "resumed_from_preemption", None)
        if res is None:  # newer vLLM: a set of resumed ids instead of a bool list
            rs = cr.resumed_req_ids
            res = [rid in rs for rid in ids]
        nb = cr.new_block_ids
        if nb and not isinstance(nb[0], (list, tuple, type(None))):
            raise Incompatible(f"new_block_ids[0] is {type(nb[0]).__name__}")
        return ids, res, nb, cr.num_computed_tokens

    def record_v1(self, so: Any) -> None:
        """Record one V1 SchedulerOutput (raises on an unknown shape; the caller disables).

        With sampling, a skipped step only notes which requests got blocks; the sampled
        step then carries the whole table of exactly those requests (``full``).
        """
        self.step += 1
        fin = so.finished_req_ids
        new_reqs = so.scheduled_new_reqs
        ids, res, nb, nc = self._cached(so.scheduled_cached_reqs)
        if self.every > 1 and self.step % self.every:
            if fin:
                self.finished.extend(sorted(fin))
            dirty = self._dirty
            for r in new_reqs:
                dirty.add(r.req_id)
            for i, b in enumerate(nb):
                if b is not None:
                    dirty.add(ids[i])
            return
        full = (self.every > 1 or self._need_full) and self.full_table is not None
        new = [[r.req_id, _ids(r.block_ids), r.num_computed_tokens] for r in new_reqs]
        if full:
            ft, dirty, every_one = self.full_table, self._dirty, self._need_full
            nb = [_ids(ft(ids[i])) if every_one or nb[i] is not None or res[i] or ids[i] in dirty
                  else None for i in range(len(ids))]
            res = [b is not None for b in nb]
            dirty.clear()
        # cached requests as parallel columns, as vLLM holds them: cheap to encode
        rec: dict[str, Any] = {"t": "s", "n": self.step, "new": new,
                               "cc": {"ids": ids, "res": res, "nb": nb, "nc": nc},
                               "tok": so.num_scheduled_tokens}
        if fin or self.finished:
            rec["fin"] = self.finished + sorted(fin)  # a set: sorted for stable logs
            self.finished = []
        if self.freed:
            rec["freed"] = self.freed
            self.freed = []
        if full:
            rec["full"] = 1
            self._need_full = False
        self._emit(rec)

    def record_v0(self, seq_group_metadata_list: Any) -> None:
        """Record one V0 step: every scheduled seq group's ``block_tables``."""
        self.step += 1
        if self.every > 1 and self.step % self.every:
            return
        groups = [[m.request_id, m.block_tables, getattr(m, "computed_block_nums", None)]
                  for m in seq_group_metadata_list]
        self._emit({"t": "s0", "n": self.step, "g": groups})

    def _idle(self) -> None:
        """The engine stopped stepping (the background thread wrote its queue): the cost
        line, at most every ``report_s`` seconds."""
        if time.monotonic() - self._last_report >= self.report_s:
            self.report()

    def report(self, final: bool = False) -> None:
        """One log line: what the audit has cost this engine thread and how fast it fills its
        files, so an operator can judge leaving it on. Logged when the engine goes idle at
        most every ``report_s`` (vLLM 0.32 kills its EngineCore at shutdown before exit
        handlers run) and at exit if steps came since."""
        if not self.step or (final and self._reported_step == self.step):
            return
        self._reported_step = self.step
        self._last_report = time.monotonic()
        out = self.out
        log.info("ascend-doctor block audit: %d steps recorded, %.1f us of the engine "
                 "thread a step (first %d us, then median <= %d us, p99 <= %d us, max <= %d "
                 "us), %d B a step, %d writes (%d after the engine stopped), %d rotations",
                 self.step, self.ns / 1000 / self.step, (self.first_ns or 0) // 1000,
                 self.step_us(0.5), self.step_us(0.99), self.step_us(1.0),
                 self.bytes // self.step, out.writes, out.idle_writes, out.rotations)

    def disabled(self, reason: str) -> None:
        try:
            self._emit({"t": "off", "n": self.step, "reason": reason[:500]})
        except Exception:  # noqa: BLE001 - disabling must never fail
            pass
        try:
            self.out.flush()  # what was recorded before the reason reaches the file now
        except Exception:  # noqa: BLE001 - disabling must never fail
            pass
