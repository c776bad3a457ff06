"""How the Host spawns a command: the one place that decides cwd, environment and credentials.

The doctor runs as root. Every command it starts runs from ``cwd="/"`` (a ``python -c`` never
imports ``json.py`` from where the operator stands), python interpreters get ``-I``, and the
environment is an allowlist unless a probe passes the exact environment it needs. A probe that
executes something from the service's world (its interpreter, its environment) wraps the call in
``as_service(RunAs(...))``: the child then drops to the service's uid/gid (no supplementary
groups, ``no_new_privs`` through ``no_new_privs_prefix``, no preexec_fn) before exec, and a
binary another user could have written is refused.
When that is impossible the run raises ``SourceMissing`` (the check is a skip with the reason),
never root execution. A context variable carries the credentials so the call passes unchanged
through ``RecordingHost`` (collect) to ``LiveHost.run``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import posixpath
import re
import stat as _stat
import sys
from typing import Iterator, Mapping

from .errors import SourceMissing
from dataclasses import dataclass

PR_SET_NO_NEW_PRIVS = 38
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH")
ENV_ALLOW_PREFIX = ("ASCEND_",)
_PYTHON = re.compile(r"^python[0-9.]*$")


@dataclass(frozen=True, eq=False)
class RunAs:
    """The credentials a command from the service's world runs with."""

    uid: int
    gid: int
    name: str = ""

    def describe(self) -> str:
        return f"uid {self.uid} ({self.name})" if self.name else f"uid {self.uid}"


_RUN_AS: contextvars.ContextVar[RunAs | None] = contextvars.ContextVar("ascend_doctor_run_as",
                                                                       default=None)


@contextlib.contextmanager
def as_service(cred: RunAs | None) -> Iterator[None]:
    """Commands run inside this block run as ``cred`` (or are refused)."""
    token = _RUN_AS.set(cred)
    try:
        yield
    finally:
        _RUN_AS.reset(token)


def current_run_as() -> RunAs | None:
    return _RUN_AS.get()


def minimal_env(env: Mapping[str, str]) -> dict[str, str]:
    """The doctor's environment cut to what a system tool needs (PATH, locale, CANN paths)."""
    out = {k: v for k, v in env.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIX)}
    out.setdefault("PATH", os.defpath)
    return out


def is_python(prog: str) -> bool:
    return bool(_PYTHON.match(posixpath.basename(prog)))


def isolate_python(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``python -I …``: no cwd/script dir on sys.path, no PYTHON* variables, no user site."""
    if is_python(argv[0]) and "-I" not in argv[1:2]:
        return (argv[0], "-I", *argv[1:])
    return argv


def display(argv: tuple[str, ...], width: int = 60) -> str:
    text = " ".join(argv)
    return text if len(text) <= width else text[:width - 1] + "…"


def refuse_unsafe_binary(real: str, shown: str, cred: RunAs | None) -> None:
    """A binary (or its directory) another user can write is not run: it is not what it was."""
    trusted = {0, os.geteuid()} | ({cred.uid} if cred else set())
    path = os.path.realpath(real)
    for p in (path, os.path.dirname(path)):
        try:
            st = os.stat(p)
        except OSError:
            return  # Popen names the missing program
        if st.st_uid not in trusted:
            raise SourceMissing(shown, f"not run: {p} is owned by uid {st.st_uid}, "
                                "not root or the service user")
        sticky_dir = _stat.S_ISDIR(st.st_mode) and st.st_mode & _stat.S_ISVTX
        if st.st_mode & 0o022 and not sticky_dir:
            raise SourceMissing(shown, f"not run: {p} is writable by group or others "
                                f"(mode {_stat.S_IMODE(st.st_mode):04o})")


def credentials_for(cred: RunAs | None, shown: str) -> dict:
    """Popen keyword arguments that drop to ``cred``; SourceMissing when the drop is impossible."""
    if cred is None:
        return {}
    euid = os.geteuid()
    if euid == 0:
        return {"user": cred.uid, "group": cred.gid, "extra_groups": []}
    if cred.uid == euid:
        return {}
    raise SourceMissing(shown, f"not run: it must run as the service's {cred.describe()}, and "
                        f"the doctor (uid {euid}) is not root, so it cannot switch to it")


_SETPRIV = ("/usr/bin/setpriv", "/bin/setpriv")  # util-linux
# the fallback when no trusted setpriv is installed: the doctor's own interpreter, isolated
# (-I -S: no site, no cwd, no PYTHON* variables), sets the flag and execs the command
_NNP_PY = ("import ctypes, os, sys\n"
           "if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:\n"
           "    sys.exit('ascend-doctor: prctl(PR_SET_NO_NEW_PRIVS) failed: '"
           " + os.strerror(ctypes.get_errno()))\n"
           "os.execvp(sys.argv[1], sys.argv[1:])\n")


@functools.lru_cache(maxsize=1)
def no_new_privs_prefix() -> tuple[str, ...]:
    """An argv prefix that sets PR_SET_NO_NEW_PRIVS (setuid binaries gain nothing) and then
    execs the command: ``setpriv --no-new-privs --`` from util-linux when a root-owned copy
    is installed, else the doctor's interpreter doing prctl + execvp.

    Why not a ``preexec_fn``: checks run in threads (doctor/engine.py) and CPython documents
    preexec_fn as unsafe with threads (the forked child may deadlock on a lock another
    thread held, e.g. in malloc). Everything else the child needs is done by subprocess
    itself in C between fork and exec, with no Python code: ``user=``/``group=``/
    ``extra_groups=`` (setgroups/setresgid/setresuid), ``start_new_session``, ``cwd``.
    """
    for path in _SETPRIV:
        if not os.path.exists(path):
            continue
        try:
            refuse_unsafe_binary(path, "setpriv", None)
        except SourceMissing:
            continue
        return (path, "--no-new-privs", "--")
    return (sys.executable, "-I", "-S", "-c", _NNP_PY)
