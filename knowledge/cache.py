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
import re
import sys
from typing import Any, Callable, Sequence

from ascend_doctor.usercache import (  # noqa: F401  (re-exported for the tests)
    cache_dir, enabled, read_private, write_private)

FORMAT = 1
_NAME_RX = re.compile(r"kb-[0-9a-f]{32}\.json")


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


def load_doc(name: str, raw: bytes, loads: Callable[[bytes], dict], code: Sequence[str],
             kind: str = "toml") -> dict:
    """A document made from ``raw`` by ``loads`` (the parsed ``compat.toml``; ``kind``
    "derived": what the KB computes from its signatures), from the cache when the bytes and
    the code are the same; cached only when JSON gives back exactly the same document."""
    if not enabled():
        return loads(raw)
    key = key_for([(name, raw)], code)
    stem = re.sub(r"[^a-z0-9_]", "_", name.removesuffix(".toml").lower())
    file = f"{kind}-{stem}-{key}.json"
    hit = read_private(file)
    if hit is not None:
        try:
            doc = json.loads(hit.decode("utf-8"))
            if isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("key") == key \
                    and isinstance(doc.get("doc"), dict):
                return doc["doc"]
        except (ValueError, RecursionError, UnicodeDecodeError):
            pass  # corrupt: as if absent
    parsed = loads(raw)
    try:
        text = json.dumps({"format": FORMAT, "key": key, "doc": parsed}, ensure_ascii=False,
                          allow_nan=False)
        if json.loads(text)["doc"] == parsed:
            write_private(file, text.encode("utf-8"),
                          re.compile(rf"{kind}-{re.escape(stem)}-[0-9a-f]{{32}}\.json"))
    except (TypeError, ValueError, RecursionError):
        pass  # a value JSON cannot carry (a TOML date): parsed each run
    return parsed
