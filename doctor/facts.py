"""Facts computed once per run and shared by every check that asks for them.

A check or a provider names what it needs by the type hints of its parameters. ``Host``
and ``RunOptions`` are injected as they are; any other type is produced by its provider,
at most once per run (concurrent askers wait for the first). ``X | None`` means optional:
a missing source gives ``None`` instead of skipping the asker.

When the check whose thread computes a fact is abandoned (its cancel token is cancelled),
the fact fails for everyone with ``ABANDONED``: askers waiting for it stop waiting at once,
later askers get the same error, nobody computes it a second time.
"""

from __future__ import annotations

import threading
import types
import typing
from typing import Any, Callable

from . import cancel
from .errors import DoctorError, SourceError, SourceMissing
from .host import Host
from .options import RunOptions
from .registry import Registry, hint_globals


class FactFailed(DoctorError):
    """A provider crashed; every check that needs its fact reports ``error``."""

    def __init__(self, fact: str, reason: str) -> None:
        super().__init__(f"{fact}: {reason}")
        self.fact = fact
        self.reason = reason


ABANDONED = "abandoned: the check computing it timed out"
_WAIT_SLICE_S = 0.05  # how often a waiting asker looks whether the computing check was abandoned


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


_REQUIREMENTS: dict[Any, dict[str, tuple[Any, bool]]] = {}


def _simple_hints(func: Callable[..., Any]) -> dict[str, tuple[Any, bool]] | None:
    """What ``get_type_hints`` + ``_unwrap_optional`` give when every parameter is
    annotated ``"Name"`` or ``"Name | None"`` (all of ours): the names looked up in the
    function's globals, without compiling each string (and the return annotation) as
    get_type_hints does, ~2.5 ms for the ~90 checks and providers. None for anything else."""
    ns = hint_globals(func)
    anns = getattr(func, "__annotations__", None)
    if not isinstance(ns, dict) or not isinstance(anns, dict):
        return None
    out: dict[str, tuple[Any, bool]] = {}
    for name, ann in anns.items():
        if name == "return":
            continue
        if not isinstance(ann, str):
            return None
        base, bar, rest = ann.partition(" | ")
        optional = bool(bar)
        if (optional and rest != "None") or not base.isidentifier() or base not in ns:
            return None
        tp = ns[base]
        if not isinstance(tp, type):
            return None
        out[name] = (tp, optional)
    return out


def requirements(func: Callable[..., Any]) -> dict[str, tuple[Any, bool]]:
    """Parameter name -> (type, optional) for a check or provider. Computed once per
    function: ``get_type_hints`` evaluates every string annotation again on each call."""
    try:
        return _REQUIREMENTS[func]
    except (KeyError, TypeError):
        pass
    out = _simple_hints(func)
    if out is None:
        hints = typing.get_type_hints(func)
        hints.pop("return", None)
        out = {name: _unwrap_optional(tp) for name, tp in hints.items()}
    try:
        _REQUIREMENTS[func] = out  # idempotent: two threads computing it agree
    except TypeError:  # an unhashable callable: not cached
        pass
    return out


class FactStore:
    def __init__(self, host: Host, options: RunOptions, registry: Registry) -> None:
        self.host = host
        self.options = options
        self.registry = registry
        self._values: dict[type, Any] = {}
        self._errors: dict[type, BaseException] = {}
        self._locks: dict[type, threading.Lock] = {}
        self._owners: dict[type, cancel.CancelToken | None] = {}  # who computes it now
        self._guard = threading.Lock()
        self._local = threading.local()

    def _lock_for(self, fact: type) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(fact, threading.Lock())

    def get(self, fact: type) -> Any:
        if fact is Host or (isinstance(fact, type) and issubclass(fact, Host)):
            return self.host
        if fact is RunOptions:
            return self.options
        if fact is FactStore:
            return self
        stack: list[type] = getattr(self._local, "stack", [])
        if fact in stack:
            raise FactFailed(_name(fact), "cyclic fact dependency: "
                             + " -> ".join(_name(f) for f in stack + [fact]))
        lock = self._lock_for(fact)
        self._acquire(fact, lock)
        try:
            if fact in self._values:
                return self._values[fact]
            if fact in self._errors:
                raise self._errors[fact]
            spec = self.registry.providers.get(fact)
            if spec is None:
                err: BaseException = FactFailed(_name(fact), "no provider is registered")
                self._errors[fact] = err
                raise err
            me = cancel.current()
            self._owners[fact] = me
            self._local.stack = stack + [fact]
            try:
                value = self.call(spec.func)
            except cancel.Cancelled:
                self._errors[fact] = FactFailed(_name(fact), ABANDONED)
                raise
            except (SourceMissing, SourceError, FactFailed) as exc:
                self._errors[fact] = exc
                raise
            except Exception as exc:
                wrapped = FactFailed(_name(fact), f"{type(exc).__name__}: {exc}")
                wrapped.__cause__ = exc
                self._errors[fact] = wrapped
                raise wrapped from exc
            finally:
                self._local.stack = stack
                self._owners.pop(fact, None)
            if me is not None and me.cancelled:  # waiters were told it failed: stay consistent
                self._errors[fact] = FactFailed(_name(fact), ABANDONED)
                raise cancel.Cancelled(me.reason)
            self._values[fact] = value
            return value
        finally:
            lock.release()

    def _acquire(self, fact: type, lock: threading.Lock) -> None:
        """Wait for ``fact``'s lock, giving up when its computer or this asker is abandoned."""
        if lock.acquire(blocking=False):
            return
        me = cancel.current()
        while not lock.acquire(timeout=_WAIT_SLICE_S):
            if me is not None:
                me.check()
            owner = self._owners.get(fact)
            if owner is not None and owner.cancelled:
                raise FactFailed(_name(fact), ABANDONED)

    def call(self, func: Callable[..., Any]) -> Any:
        """Call ``func`` with every parameter filled from the store."""
        kwargs = {}
        for name, (tp, optional) in requirements(func).items():
            try:
                kwargs[name] = self.get(tp)
            except SourceMissing:
                if not optional:
                    raise
                kwargs[name] = None
        return func(**kwargs)

    def peek(self, fact: type) -> Any:
        """The fact if it was already computed, else None (never computes)."""
        return self._values.get(fact)


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))
