"""The Host: the only door to the machine.

Probes never touch the file system, run commands or open sockets themselves; they ask a
Host. ``LiveHost(root="/")`` is this machine, ``LiveHost(root=SYSROOT)`` answers file
questions from a directory tree (tests, ``--root``) and ``BundleHost`` (doctor/bundle/)
answers from a collected bundle. Absent sources raise ``SourceMissing``; unreadable ones
``SourceError``.

By role: api.py (the Host API and its records), live.py (``LiveHost``), sysroot.py
(resolving paths inside a root), run.py (the bounded subprocess and HTTP helpers). Every
name is importable from ``ascend_doctor.host`` as before.
"""

from __future__ import annotations

from .api import (DEFAULT_HTTP_CAP, DEFAULT_OUTPUT_CAP, DEFAULT_READ_LIMIT, CommandResult,
                  Connection, Host, HostInfo, HttpResponse, ProcInfo, StatInfo, norm,
                  proc_info_from_files)

# a replayed bundle needs none of these: loaded on first use (PEP 562)
_LAZY = {"LiveHost": ".live", "http_get": ".run", "run_capped": ".run", "SysrootPaths": ".sysroot"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["DEFAULT_HTTP_CAP", "DEFAULT_OUTPUT_CAP", "DEFAULT_READ_LIMIT", "CommandResult",
           "Connection", "Host", "HostInfo", "HttpResponse", "LiveHost", "ProcInfo",
           "StatInfo", "SysrootPaths", "http_get", "norm", "proc_info_from_files", "run_capped"]
