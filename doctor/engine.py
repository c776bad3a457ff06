"""Run the selected checks concurrently, each bounded in time, and build a Report.

A check that raises becomes an ``error`` result, one that runs past its timeout too (its
thread is abandoned: threads are daemons, the run never waits for them; its cancel token is
cancelled, which kills the commands it started, see doctor/cancel.py); a check whose
source is missing becomes ``skip`` naming the source. Results are sorted by id.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from typing import Callable, Iterable

from . import __version__
from .cancel import Cancelled, CancelToken, bound
from .errors import ParseError, SourceError, SourceMissing
from .facts import FactFailed, FactStore
from .host import Host
from .i18n import Msg, T
from .model import CheckResult, Finding, Report
from .options import RunOptions
from dataclasses import dataclass
from .registry import CheckSpec, Registry

DEFAULT_TIMEOUT = 10.0
ABANDON_GRACE_S = 0.5  # at most this long, once, for abandoned checks to unwind


@dataclass(eq=False)
class RunConfig:
    """What to run and how: the selection, the time budgets, how many checks at once."""

    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    jobs: int = 8
    context: str | None = None  # overrides host.kind in the report (e.g. "demo")
    override: bool = False  # ``timeout`` was asked for (--timeout): it wins over a check's own

    def limit_for(self, spec: CheckSpec) -> float:
        """The check's time budget: its own unless the user named one for the run."""
        if self.override or not spec.timeout:
            return self.timeout
        return spec.timeout


def _msg(text: object) -> str:
    """A source or reason a probe gave, as a message a report can translate (a plain
    constant is looked up as it is; what the catalog lacks stays English)."""
    return text if isinstance(text, Msg) else T(str(text))


def run_check(spec: CheckSpec, store: FactStore) -> tuple[Finding, ...]:
    """Run one check to findings; every exception becomes a finding, never escapes."""
    try:
        out = store.call(spec.func)
        if out is None:
            findings: tuple[Finding, ...] = ()
        elif isinstance(out, Finding):
            findings = (out,)
        else:
            findings = tuple(out)
    except SourceMissing as exc:
        return (Finding.skip(T("missing source: {source} ({reason})", source=_msg(exc.source),
                               reason=_msg(exc.reason)),
                             evidence={"source": exc.source, "reason": exc.reason}),)
    except ParseError as exc:
        # every check that needed this input fails the same way: one problem, not one per check
        return (Finding.error(T("cannot parse {source}: {reason}", source=_msg(exc.source),
                                reason=_msg(exc.reason)),
                              evidence={"source": exc.source, "reason": exc.reason},
                              cause=f"input:{exc.source}"),)
    except SourceError as exc:
        return (Finding.error(T("cannot read {source}: {reason}", source=_msg(exc.source),
                                reason=_msg(exc.reason)),
                              evidence={"source": exc.source, "reason": exc.reason},
                              cause=f"input:{exc.source}"),)
    except Cancelled as exc:  # abandoned: the engine already reported the timeout
        return (Finding.error(T("abandoned: {reason}", reason=_msg(exc.reason))),)
    except FactFailed as exc:
        return (Finding.error(T("could not gather {fact}: {reason}", fact=exc.fact,
                                reason=_msg(exc.reason)),
                              evidence={"fact": exc.fact, "reason": exc.reason,
                                        "traceback": _tb(exc.__cause__)}),)
    except Exception as exc:
        return (Finding.error(T("check crashed: {error}", error=f"{type(exc).__name__}: {exc}"),
                              evidence={"traceback": _tb(exc)}),)
    if not findings:
        findings = (Finding.passed(T("no problem found")),)
    return findings


def _tb(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    import traceback  # only for a check that failed (and textwrap with it)

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])


class _Slot:
    def __init__(self, spec: CheckSpec) -> None:
        self.spec = spec
        self.started: float | None = None
        self.token = CancelToken(spec.id)
        self.findings: tuple[Finding, ...] | None = None
        self.duration = 0.0
        self.thread: threading.Thread | None = None  # the worker that runs it


def run(host: Host, options: RunOptions | None = None, registry: Registry | None = None,
        config: RunConfig | None = None,
        on_result: Callable[[CheckResult], None] | None = None) -> Report:
    """The whole run. ``on_result`` is called from worker threads as each check ends."""
    options = options or RunOptions()
    config = config or RunConfig()
    if registry is None:
        registry = Registry.discover()
        registry.load_plugins()
    specs = registry.select(config.only, config.skip)
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    store = FactStore(host, options, registry)
    slots = [_Slot(s) for s in specs]
    done = threading.Condition()
    pending = list(reversed(slots))  # popped from the end: in spec order
    results: dict[str, CheckResult] = {}

    def finish(slot: _Slot, findings: tuple[Finding, ...], duration: float) -> None:
        with done:
            if slot.spec.id in results:
                return  # already timed out; late findings are dropped
            result = CheckResult(slot.spec.id, slot.spec.title, slot.spec.category,
                                 slot.spec.tags, findings, round(duration, 4),
                                 slot.spec.severity)
            results[slot.spec.id] = result
            done.notify_all()
        if on_result is not None:
            try:
                on_result(result)
            except Exception:
                pass

    def worker() -> None:
        """Run checks until none is left. A check abandoned past its timeout keeps its
        thread (blocked on a hung mount, say); a new worker takes that one's place, so
        ``jobs`` checks still run at a time and the rest of the run goes on, and the old
        thread ends if its check ever returns."""
        me = threading.current_thread()
        while True:
            with done:
                if not pending:
                    return
                slot = pending.pop()
                slot.started, slot.thread = time.monotonic(), me
                done.notify_all()
            me.name = f"check:{slot.spec.id}"
            with bound(slot.token):
                findings = run_check(slot.spec, store)
            finish(slot, findings, time.monotonic() - slot.started)
            if slot.token.cancelled:
                return  # abandoned: its replacement runs the remaining checks

    def start_worker() -> None:
        threading.Thread(target=worker, name="check", daemon=True).start()

    # a few workers, not a thread per check: 58 thread starts cost ~5 % of `demo --json`
    for _ in range(min(max(1, config.jobs), len(slots))):
        start_worker()

    try:
        _wait_all(slots, results, pending, done, config, start_worker, on_result)
    except KeyboardInterrupt:  # Ctrl-C: kill what the checks started, then let it through
        for slot in slots:
            slot.token.cancel(T("interrupted"))
        raise

    # cancelled checks unwind within moments (their commands are dead); wait that long so a
    # RecordingHost has recorded how they ended, but never for one stuck in pure Python
    grace = time.monotonic() + ABANDON_GRACE_S
    for slot in slots:
        if slot.token.cancelled and slot.thread is not None:
            slot.thread.join(timeout=max(0.0, grace - time.monotonic()))
    ordered = tuple(results[s.id] for s in sorted(specs, key=lambda s: s.id))
    return Report(__version__, host.info(), config.context or host.kind, started_at,
                  round(time.monotonic() - t0, 4), ordered, options.public())


def _wait_all(slots, results, pending, done, config, start_worker, on_result) -> None:
    """Wait for every check, abandoning those past their time limit (see ``run``)."""
    with done:
        while len(results) < len(slots):
            now = time.monotonic()
            wait = 0.5
            for slot in slots:
                if slot.spec.id in results or slot.started is None:
                    continue
                limit = config.limit_for(slot.spec)
                left = slot.started + limit - now
                if left <= 0:
                    # kills what the check started (process groups) before the run goes on
                    slot.token.cancel(T("the check timed out after {limit:g} s", limit=limit))
                    if pending:
                        start_worker()  # in place of the worker this check holds
                    results[slot.spec.id] = CheckResult(
                        slot.spec.id, slot.spec.title, slot.spec.category, slot.spec.tags,
                        (Finding.error(T("timed out after {limit:g} s (the check was abandoned)",
                                       limit=limit),
                                       evidence={"timeout_s": limit}),), round(limit, 4))
                    if on_result is not None:
                        try:
                            on_result(results[slot.spec.id])
                        except Exception:
                            pass
                else:
                    wait = min(wait, left)
            if len(results) < len(slots):
                done.wait(timeout=max(wait, 0.005))


def select_ids(registry: Registry, only: Iterable[str], skip: Iterable[str]) -> list[str]:
    return [s.id for s in registry.select(only, skip)]
