"""A cache of the parsed knowledge base, so a run does not re-parse 200 KiB of TOML and
re-compile every signature to validate it (about 60–100 ms of a 0.4 s ``demo --json``).

The cache is JSON (never pickle: reading it cannot run code), keyed by the SHA-256 of the
knowledge files' bytes, this module's and the parser's source and the Python version, so
any edit to an entry or to the parser is a miss. It lives in the invoking user's own cache
directory (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``ascend-doctor/``), created 0700, and
is used only when that directory and the file are owned by the effective uid and writable
by nobody else: a doctor run by root under another user's ``HOME`` neither reads nor
writes there. A file that is unreadable, corrupt, for another key or that does not rebuild
into entries is treated as absent (the TOML is parsed, and the cache rewritten).
``ASCEND_DOCTOR_CACHE=0`` turns it off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import sys
from typing import Any, Callable, Sequence

FORMAT = 1
MAX_BYTES = 16 << 20  # far above the real cache (~0.3 MiB); anything bigger is not ours
_NAME_RX = re.compile(r"kb-[0-9a-f]{32}\.json")


def enabled() -> bool:
    """False when the user switched the cache off."""
    return os.environ.get("ASCEND_DOCTOR_CACHE", "1").strip().lower() not in ("0", "off", "no",
                                                                             "false")


def cache_dir(create: bool = False) -> str | None:
    """``<user cache>/ascend-doctor`` when it (and its parent) belong to the effective uid;
    with ``create``, made 0700 if missing. None when there is no safe place."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.environ.get("HOME", "")
        if not os.path.isabs(home) or not _owned_dir(home, follow=True):
            return None
        base = os.path.join(home, ".cache")
    uid = os.geteuid()
    try:
        if not os.path.isdir(base):
            if not create or not _owned_dir(os.path.dirname(base.rstrip("/")) or "/",
                                            follow=True):
                return None
            os.mkdir(base, 0o700)
        if not _owned_dir(base, follow=True):
            return None
        path = os.path.join(base, "ascend-doctor")
        if not os.path.lexists(path):
            if not create:
                return None
            os.mkdir(path, 0o700)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        return None  # a link, another account's directory, or one others can write into
    return path


def _owned_dir(path: str, follow: bool) -> bool:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def key_for(files: Sequence[tuple[str, bytes]], code: Sequence[str]) -> str:
    """The cache key: the files' names and bytes, the parser sources, the Python version."""
    h = hashlib.sha256(f"ascend-doctor-kb:{FORMAT}:{sys.version_info[:2]}".encode())
    for name, raw in sorted(files):
        h.update(b"\0F" + name.encode() + b"\0" + len(raw).to_bytes(8, "big") + raw)
    for path in code:
        try:
            with open(path, "rb") as fh:
                h.update(b"\0C" + fh.read())
        except OSError:
            h.update(b"\0C?" + path.encode())
    return h.hexdigest()[:32]


def _encode(entries: list[Any]) -> dict[str, Any] | None:
    """Entries as JSON-able rows (each field by name, the tuple fields listed), or None when
    a value would not come back the same (then nothing is cached)."""
    rows, tuples = [], set()
    for e in entries:
        row = {}
        for f in dataclasses.fields(e):
            value = getattr(e, f.name)
            if isinstance(value, tuple):
                tuples.add(f.name)
            row[f.name] = value
        rows.append(row)
    return {"entries": rows, "tuples": sorted(tuples)}


def _decode(doc: Any, entry_type: type, key: str) -> list[Any]:
    """Entries rebuilt from the cache document; ValueError when it is not one of ours."""
    if (not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key
            or not isinstance(doc.get("entries"), list)
            or not isinstance(doc.get("tuples"), list)):
        raise ValueError("not this cache")
    names = {f.name for f in dataclasses.fields(entry_type)}
    tuples = set(doc["tuples"])
    out = []
    for row in doc["entries"]:
        if not isinstance(row, dict) or set(row) != names:
            raise ValueError("an entry of another shape")
        out.append(entry_type(**{k: tuple(v) if k in tuples and isinstance(v, list) else v
                                 for k, v in row.items()}))
    return out


def read_private(name: str, limit: int = MAX_BYTES) -> bytes | None:
    """The bytes of ``<cache dir>/name`` when it is a regular file of the effective uid that
    nobody else can write (opened without following a link), else None."""
    d = cache_dir()
    if d is None:
        return None
    try:
        fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & 0o022 or st.st_size > limit):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(limit + 1)
        return raw if len(raw) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def write_private(name: str, data: bytes, stale: "re.Pattern[str] | None" = None) -> bool:
    """Write ``<cache dir>/name`` atomically (0600), then drop the other files ``stale``
    matches. Never raises: a cache that cannot be written only costs the next run time."""
    d = cache_dir(create=True)
    if d is None:
        return False
    import tempfile  # only on a miss: it imports random, shutil

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=d)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, os.path.join(d, name))
        tmp = None
        for other in os.listdir(d) if stale is not None else ():
            if stale.fullmatch(other) and other != name:
                try:
                    os.unlink(os.path.join(d, other))
                except OSError:
                    pass
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def read(key: str, entry_type: type) -> list[Any] | None:
    """The cached entries for ``key``, or None (absent, unsafe, corrupt, other key)."""
    raw = read_private(f"kb-{key}.json")
    if raw is None:
        return None
    try:
        return _decode(json.loads(raw.decode("utf-8")), entry_type, key)
    except (ValueError, TypeError, RecursionError, UnicodeDecodeError):
        return None  # corrupt or foreign: as if absent


def write(key: str, entries: list[Any]) -> bool:
    """Store ``entries`` under ``key``, dropping older kb caches; False when not cached."""
    doc = _encode(entries)
    if doc is None:
        return False
    doc = {"format": FORMAT, "key": key, **doc}
    try:
        text = json.dumps(doc, ensure_ascii=False, allow_nan=False)
        # only what rebuilds into the very same entries is worth keeping
        if _decode(json.loads(text), type(entries[0]) if entries else object, key) != entries:
            return False
    except (TypeError, ValueError, RecursionError):
        return False  # a value JSON cannot carry (a TOML date, say): no cache
    return write_private(f"kb-{key}.json", text.encode("utf-8"), _NAME_RX)


def load_entries(files: Sequence[tuple[str, bytes]], parse: Callable[[str, bytes], list[Any]],
                 entry_type: type, code: Sequence[str]) -> list[Any]:
    """Every entry of ``files`` as ``parse`` gives them, served from the cache when its key
    matches; a parse error is raised as ever (nothing is cached then)."""
    if not enabled():
        return [e for name, raw in files for e in parse(name, raw)]
    key = key_for(files, code)
    hit = read(key, entry_type)
    if hit is not None:
        return hit
    entries = [e for name, raw in files for e in parse(name, raw)]
    write(key, entries)
    return entries
