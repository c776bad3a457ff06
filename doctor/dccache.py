"""Compiled dataclass methods, kept between runs.

Profiled on ``demo --json`` (issue 16): importing the checks and probes creates ~100
dataclasses, and ``dataclasses`` writes each one's ``__init__``/``__repr__``/``__eq__``/
``__setattr__``… as source text and ``exec``s it: ~80 ms of compiling the same texts on
every run, more than half of the discovery. Python's own ``.pyc`` cannot hold them (they
are built at import time), so this does the same for them: while ``Registry.discover``
imports, the ``dataclasses`` module's ``exec`` looks the text up in a table of code
objects compiled from exactly that text on an earlier run (``compile(text, "<string>",
"exec", dont_inherit=True)``, what ``exec(text)`` does there), and the table is saved in the
user's own cache directory (doctor/usercache.py: 0700, owned by the effective uid,
nobody else can write it; like a ``.pyc`` it is code, so a foreign or writable file is
never loaded). Keyed by the interpreter (``sys.version`` and the bytecode magic number):
another Python never reads it. A corrupt table is absent. ``ASCEND_DOCTOR_CACHE=0``
turns it off; so does a ``dataclasses`` that no longer calls ``exec`` by that name.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import marshal
import re
import sys
import threading
import types
from typing import Any, Iterator

MAX_ENTRIES = 5000  # more than this: keep only what this run used
_STALE_RX = re.compile(r"dc-[0-9a-f]{16}\.marshal")
_lock = threading.RLock()
_depth = 0


def _file_name() -> str:
    from importlib.util import MAGIC_NUMBER

    tag = hashlib.sha256(sys.version.encode() + MAGIC_NUMBER).hexdigest()[:16]
    return f"dc-{tag}.marshal"


def _load(name: str) -> dict[str, types.CodeType]:
    """The saved table, or {} when absent, unsafe or not a table of code objects."""
    from . import usercache as cache

    raw = cache.read_private(name)
    if raw is None:
        return {}
    try:
        table = marshal.loads(raw)
    except (ValueError, EOFError, TypeError):
        return {}
    if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, types.CodeType) for k, v in table.items()):
        return {}
    return table


def _calls_exec(module: Any) -> bool:
    """Whether the module's functions call a global named ``exec`` (read from their code
    objects, no source needed): the only hook this relies on."""
    return any("exec" in getattr(getattr(v, "__code__", None), "co_names", ())
               for v in vars(module).values())


class _Session:
    """The table of one outermost block: what was loaded, what this run used or compiled."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.table = _load(name)
        self.used: dict[str, types.CodeType] = {}
        self.fresh = 0
        self.before: Any = None
        self.had = False

    def exec(self, src: Any, globals: Any = None, locals: Any = None) -> Any:
        """``exec`` as dataclasses calls it, the text's code taken from the table."""
        if isinstance(src, str):
            code = self.table.get(src)
            if code is None:
                # what exec(src) compiles there: no __future__ flag inherited from here
                code = compile(src, "<string>", "exec", dont_inherit=True)
                self.fresh += 1
            self.used[src] = code
            src = code
        return builtins.exec(src, globals, locals)

    def save(self) -> None:
        if not self.fresh:
            return
        keep = ({**self.table, **self.used}
                if len(self.table) + len(self.used) <= MAX_ENTRIES else self.used)
        try:
            data = marshal.dumps(keep)
        except ValueError:
            return
        from . import usercache

        usercache.write_private(self.name, data, _STALE_RX)


_session: _Session | None = None


@contextlib.contextmanager
def cached_dataclass_code() -> Iterator[None]:
    """Within the block, dataclass methods come from (and go into) the saved table. Blocks
    may nest or overlap across threads: the first one in installs the hook, the last one
    out removes it and saves what was new (the lock is never held across the block)."""
    global _depth, _session
    import dataclasses

    from . import usercache

    if not usercache.enabled() or not _calls_exec(dataclasses):
        yield
        return
    with _lock:
        if _depth == 0:
            session = _Session(_file_name())
            session.had = "exec" in vars(dataclasses)
            session.before = vars(dataclasses).get("exec")
            dataclasses.exec = session.exec  # type: ignore[attr-defined]
            _session = session
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            last = _depth == 0
            session = _session
            if last and session is not None:
                if session.had:
                    dataclasses.exec = session.before  # type: ignore[attr-defined]
                else:
                    vars(dataclasses).pop("exec", None)
                _session = None
        if last and session is not None:
            session.save()
