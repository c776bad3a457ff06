"""Compiled dataclass methods, kept between runs.

Profiled on ``demo --json`` (issue 16): importing the checks and probes creates ~100
dataclasses, and ``dataclasses`` writes each one's ``__init__``/``__repr__``/``__eq__``/
``__setattr__``… as source text and ``exec``s it: ~80 ms of compiling the same texts on
every run, more than half of the discovery. Python's own ``.pyc`` cannot hold them (they
are built at import time), so this does the same for them: while ``Registry.discover``
imports, the ``dataclasses`` module's ``exec`` looks the text up in a table of code
objects compiled from exactly that text on an earlier run (``compile(text, "<string>",
"exec", dont_inherit=True)``, what ``exec(text)`` does there), and the table is saved in the
user's own cache directory (knowledge/cache.py's rules: 0700, owned by the effective uid,
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
    from ascend_doctor.knowledge import cache

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


@contextlib.contextmanager
def cached_dataclass_code() -> Iterator[None]:
    """Within the block, dataclass methods come from (and go into) the saved table."""
    global _depth
    import dataclasses

    from ascend_doctor.knowledge import cache

    if not cache.enabled() or not _calls_exec(dataclasses):
        yield
        return
    with _lock:
        if _depth:  # nested or concurrent discovery: the outer block does the work
            _depth += 1
            try:
                yield
            finally:
                _depth -= 1
            return
        name = _file_name()
        table = _load(name)
        used: dict[str, types.CodeType] = {}
        fresh = [0]

        def cached_exec(src: Any, globals: Any = None, locals: Any = None) -> Any:
            if isinstance(src, str):
                code = table.get(src)
                if code is None:
                    code = compile(src, "<string>", "exec", dont_inherit=True)
                    fresh[0] += 1
                used[src] = code
                src = code
            return builtins.exec(src, globals, locals)

        had = "exec" in vars(dataclasses)
        before = vars(dataclasses).get("exec")
        dataclasses.exec = cached_exec  # type: ignore[attr-defined]
        _depth = 1
        try:
            yield
        finally:
            _depth = 0
            if had:
                dataclasses.exec = before  # type: ignore[attr-defined]
            else:
                del dataclasses.exec  # type: ignore[attr-defined]
            if fresh[0]:
                keep = {**table, **used} if len(table) + len(used) <= MAX_ENTRIES else used
                try:
                    data = marshal.dumps(keep)
                except ValueError:
                    data = b""
                if data:
                    cache.write_private(name, data, _STALE_RX)
