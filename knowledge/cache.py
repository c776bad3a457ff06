"""A cache of the parsed knowledge base, so a run does not re-parse 200 KiB of TOML and
re-compile every signature to validate it (about 60–100 ms of a 0.4 s ``demo --json``).

The cache is JSON (never pickle: reading it cannot run code), keyed by the SHA-256 of the
knowledge files' bytes, this module's and the parser's source and the Python version, so
any edit to an entry or to the parser is a miss; a file's SHA-256 is taken from its stamp
when its stat is unchanged (``_Stamps``: why that cannot miss an edit). The kb file holds
every id and signature in a header and each entry as its own JSON line, rebuilt only when
used (``LazyEntries``); a crc32 rejects a damaged file when read. It lives in the invoking
user's own cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``ascend-doctor/``),
created 0700, and is used only when that directory and the file are owned by the effective
uid and writable by nobody else: a doctor run by root under another user's ``HOME``
neither reads nor writes there. A file that is unreadable, corrupt, for another key or
that does not rebuild into entries is treated as absent (the TOML is parsed, and the cache
rewritten). ``ASCEND_DOCTOR_CACHE=0`` turns it off.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
import zlib
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Sequence

from ascend_doctor.usercache import (  # noqa: F401  (re-exported for the tests)
    cache_dir, enabled, read_private, write_private)

FORMAT = 2  # 2: the kb file is a header and one JSON line per entry (LazyEntries)
_NAME_RX = re.compile(r"kb-[0-9a-f]{32}\.json")


def _sha256(data: bytes) -> Any:
    """hashlib's SHA-256 without hashlib: importing it loads OpenSSL (~3 ms of every run);
    the builtin module gives the same digest."""
    global _SHA256
    if _SHA256 is None:  # looked up once: a failed import searches sys.path every time
        try:
            from _sha2 import sha256  # 3.12+
        except ImportError:
            try:
                from _sha256 import sha256  # 3.10, 3.11
            except ImportError:
                from hashlib import sha256
        _SHA256 = sha256
    return _SHA256(data)


_SHA256: Any = None


def key_for(files: Sequence[tuple[str, bytes]], code: Sequence[str],
            paths: Sequence[tuple[str, str]] = ()) -> str | None:
    """The cache key: the files' names and SHA-256s (``files`` by their bytes, ``paths`` by
    the file at each path, see ``_Stamps``), the parser sources', the Python version. None
    when a file of ``paths`` cannot be read (then the caller reads the bytes)."""
    named = [(name, _sha256(raw).digest()) for name, raw in files]
    stamps = _stamps()
    for name, path in paths:
        d = stamps.digest(path)
        if d is None:
            return None
        named.append((name, d))
    h = _sha256(f"ascend-doctor-kb:{FORMAT}:{sys.version_info[:2]}".encode())
    for name, d in sorted(named):
        h.update(b"\0F" + name.encode() + b"\0" + d)
    for path in code:
        d = stamps.digest(path)
        h.update(b"\0C" + d if d is not None else b"\0C?" + path.encode())
    return h.hexdigest()[:32]


# A file's SHA-256 is kept with its stat (device, inode, size, mtime, ctime) in
# ``stamps.json``, so a run stats the ~20 KB and parser files instead of reading and hashing
# 250 KiB (~2 ms). A stat alone would miss an edit made within the file system's timestamp
# granularity of the hashed version (or with the old mtime put back): a stamp is therefore
# only taken of a file whose mtime and ctime are STAMP_AGE_NS old when it is read, as git
# does with "racily clean" files. Any later write sets ctime (which no user call can set
# back) to a later time, so a file that matches its stamp is the file that was hashed. What
# remains is a clock stepped back past that age, or a file system that does not keep ctime.
STAMP_AGE_NS = 2_000_000_000  # above any granularity (FAT: 2 s) and the kernel's clock lag
_STAMP_FILE = "stamps.json"
_STAMP_MAX = 256  # stamps kept: other installations' files too, the newest last
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class _Stamps:
    """The stamps of one user cache directory: path -> [dev, ino, size, mtime_ns, ctime_ns,
    sha256 hex]; new ones are written by ``save``."""

    def __init__(self) -> None:
        self.known: dict[str, list] | None = None  # read when first needed
        self.new: dict[str, list] = {}

    def _read(self) -> dict[str, list]:
        raw = read_private(_STAMP_FILE)
        try:
            doc = json.loads(raw.decode("utf-8")) if raw is not None else None
        except (ValueError, RecursionError, UnicodeDecodeError):
            doc = None  # corrupt: no stamps, every file hashed
        stamps = doc.get("stamps") if isinstance(doc, dict) and doc.get("format") == FORMAT \
            else None
        if not isinstance(stamps, dict):
            return {}
        return {p: v for p, v in stamps.items()
                if isinstance(v, list) and len(v) == 6 and all(type(x) is int for x in v[:5])
                and isinstance(v[5], str) and _HEX64.fullmatch(v[5])}

    def digest(self, path: str) -> bytes | None:
        """The SHA-256 of the file at ``path``, from its stamp when the stat is the same."""
        try:
            now = _stat_key(os.stat(path))
        except OSError:
            return None
        if self.known is None:
            self.known = self._read()
        got = self.new.get(path) or self.known.get(path)
        if got is not None and got[:5] == now:
            return bytes.fromhex(got[5])
        try:
            with open(path, "rb") as fh:
                before = os.fstat(fh.fileno())
                data = fh.read()
                after = os.fstat(fh.fileno())
        except OSError:
            return None
        d = _sha256(data).digest()
        if _stat_key(before) == _stat_key(after) and (
                time.time_ns() - max(before.st_mtime_ns, before.st_ctime_ns) >= STAMP_AGE_NS):
            self.new[path] = [*_stat_key(before), d.hex()]
        return d

    def save(self) -> None:
        """Write the stamps taken this run (merged with the file's); nothing when none."""
        if not self.new:
            return
        merged = {p: v for p, v in self._read().items() if p not in self.new}
        merged.update(self.new)
        keep = dict(list(merged.items())[-_STAMP_MAX:])
        write_private(_STAMP_FILE, json.dumps({"format": FORMAT, "stamps": keep}).encode())
        self.known, self.new = keep, {}


_STAMPS: dict[tuple[str, str], _Stamps] = {}


def _stamps() -> _Stamps:
    """The stamps of the user cache directory the environment names (tests move it)."""
    where = (os.environ.get("XDG_CACHE_HOME", ""), os.environ.get("HOME", ""))
    got = _STAMPS.get(where)
    if got is None:
        got = _STAMPS[where] = _Stamps()
    return got


def _encode(entries: list[Any]) -> dict[str, Any]:
    """Entries as JSON-able rows (each field by name) and the names of the tuple fields
    (JSON gives lists back); ``write`` checks that they rebuild the same entries."""
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


_MAGIC = b"ascend-doctor-kb"


def _row_entry(raw: bytes, entry_type: type, names: frozenset, tuples: frozenset,
               id: str, signatures: list) -> Any:
    """One entry from its JSON line; ValueError when it is not the one the header names."""
    row = json.loads(raw.decode("utf-8"))
    if not isinstance(row, dict) or set(row) != names:
        raise ValueError("an entry of another shape")
    if row.get("id") != id or row.get("signatures") != signatures:
        raise ValueError("an entry the header does not name")
    return entry_type(**{k: tuple(v) if k in tuples and isinstance(v, list) else v
                         for k, v in row.items()})


class LazyEntries(Mapping):
    """The cached entries by id, each rebuilt from its JSON line when first asked for: a run
    needs every signature (in the header) but only the few entries its findings name, and
    decoding all ~200 was ~3 ms of every run. The crc32 in the first line covers header and
    rows, so a damaged file is rejected when read; a row that still does not rebuild (a file
    written by hand) is taken from ``fallback``, the parsed TOML."""

    def __init__(self, ids: list[str], signatures: list[list[str]], raw: bytes, first: int,
                 entry_type: type, tuples: frozenset,
                 fallback: "Callable[[], list[Any]] | None" = None) -> None:
        self.ids = ids
        self.signatures = signatures  # per entry, in entry order
        self._raw = raw  # the rows: newline-separated JSON lines from offset ``first``
        self._first = first
        self._starts: "list[int] | None" = None
        self._at = {i: k for k, i in enumerate(ids)}
        self._done: list[Any] = [None] * len(ids)
        self._type = entry_type
        self._names = frozenset(f.name for f in dataclasses.fields(entry_type))
        self._tuples = tuples
        self._fallback = fallback
        self._parsed: "dict[str, Any] | None" = None

    def __getitem__(self, id: str) -> Any:
        k = self._at[id]
        e = self._done[k]
        if e is None:
            try:
                e = _row_entry(self._row(k), self._type, self._names, self._tuples, id,
                               self.signatures[k])
            except (ValueError, TypeError, RecursionError, UnicodeDecodeError):
                if self._fallback is None:
                    raise
                if self._parsed is None:
                    self._parsed = {p.id: p for p in self._fallback()}
                e = self._parsed[id]
            self._done[k] = e
        return e

    def _row(self, k: int) -> bytes:
        if self._starts is None:
            starts, find = [self._first], self._raw.find
            for _ in range(len(self.ids) - 1):
                starts.append(find(b"\n", starts[-1]) + 1)
            self._starts = [*starts, len(self._raw) + 1]
        return self._raw[self._starts[k]:self._starts[k + 1] - 1]

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def _lazy(raw: bytes, entry_type: type, key: str,
          fallback: "Callable[[], list[Any]] | None" = None) -> LazyEntries:
    """The file's entries, not yet decoded; ValueError when it is not one of ours: damaged
    (crc), another format or key, or a header of the wrong shape."""
    body = raw.find(b"\n") + 1  # offsets, not slices: copying 200 KiB twice cost 0.4 ms
    magic, _, crc = raw[:body - 1].partition(b" ")
    if not body or magic != _MAGIC or crc != b"%08x" % zlib.crc32(memoryview(raw)[body:]):
        raise ValueError("not this cache")
    # json.dumps puts no raw newline in a line: one line per row after the header's
    end = raw.find(b"\n", body)
    rows = 0 if end < 0 else raw.count(b"\n", end + 1) + 1
    doc = json.loads(raw[body:len(raw) if end < 0 else end].decode("utf-8"))
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
        raise ValueError("not this cache")
    ids, sigs, tuples = doc.get("ids"), doc.get("signatures"), doc.get("tuples")
    if (not isinstance(ids, list) or not isinstance(sigs, list) or not isinstance(tuples, list)
            or len(ids) != len(sigs) or rows != len(ids)
            or not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids)
            or not all(isinstance(s, list) and all(isinstance(p, str) for p in s)
                       for s in sigs)
            or not all(isinstance(t, str) for t in tuples)):
        raise ValueError("a header of another shape")
    return LazyEntries(ids, sigs, raw, end + 1, entry_type, frozenset(tuples), fallback)


def read_lazy(key: str, entry_type: type,
              fallback: "Callable[[], list[Any]] | None" = None) -> LazyEntries | None:
    """The cached entries for ``key`` by id, decoded when used, or None (absent, unsafe,
    damaged, other key)."""
    raw = read_private(f"kb-{key}.json")
    if raw is None:
        return None
    try:
        return _lazy(raw, entry_type, key, fallback)
    except (ValueError, TypeError, RecursionError, UnicodeDecodeError):
        return None  # corrupt or foreign: as if absent


def read(key: str, entry_type: type) -> list[Any] | None:
    """The cached entries for ``key``, every one decoded, or None (absent, unsafe, corrupt,
    other key, an entry that does not rebuild)."""
    lazy = read_lazy(key, entry_type)
    if lazy is None:
        return None
    try:
        return list(lazy.values())
    except (ValueError, TypeError, RecursionError, UnicodeDecodeError):
        return None


def _file_bytes(key: str, entries: list[Any]) -> bytes:
    """The cache file: a crc32 line, a header (ids, signatures, the tuple fields), then one
    JSON line per entry. ValueError/TypeError for a value JSON cannot carry."""
    doc = _encode(entries)
    header = {"format": FORMAT, "key": key, "tuples": doc["tuples"],
              "ids": [r["id"] for r in doc["entries"]],
              "signatures": [list(r["signatures"]) for r in doc["entries"]]}
    lines = [json.dumps(d, ensure_ascii=False, allow_nan=False)
             for d in (header, *doc["entries"])]
    body = "\n".join(lines).encode("utf-8")
    return b"%s %08x\n" % (_MAGIC, zlib.crc32(body)) + body


def write(key: str, entries: list[Any]) -> bool:
    """Store ``entries`` under ``key``, dropping older kb caches; False when not cached."""
    try:
        data = _file_bytes(key, entries)
        # only what rebuilds into the very same entries is worth keeping
        back = _lazy(data, type(entries[0]) if entries else object, key)
        if list(back.values()) != entries:
            return False
    except (TypeError, ValueError, RecursionError, KeyError, AttributeError,
            UnicodeError):
        return False  # a value JSON cannot carry (a TOML date, say): no cache
    return write_private(f"kb-{key}.json", data, _NAME_RX)


def load_entries(files: Sequence[tuple[str, bytes]], parse: Callable[[str, bytes], list[Any]],
                 entry_type: type, code: Sequence[str]) -> list[Any]:
    """Every entry of ``files`` as ``parse`` gives them, served from the cache when its key
    matches; a parse error is raised as ever (nothing is cached then)."""
    got = load_lazy(files, parse, entry_type, code)
    return got if isinstance(got, list) else list(got.values())


def load_lazy(files: "Sequence[tuple[str, bytes]] | Callable[[], Sequence[tuple[str, bytes]]]",
              parse: Callable[[str, bytes], list[Any]], entry_type: type, code: Sequence[str],
              paths: Sequence[tuple[str, str]] = ()) -> "list[Any] | LazyEntries":
    """``load_entries``, but a hit is a ``LazyEntries`` (rebuilt when used), a miss the list.

    ``paths``: where the files are, (name, path); then the key comes from their stamps and
    ``files`` (a callable) is read only on a miss, and keyed by the bytes read.
    """
    got: list = []

    def read() -> Sequence[tuple[str, bytes]]:
        if not got:
            got.append(files() if callable(files) else files)
        return got[0]

    def parse_all() -> list[Any]:
        return [e for name, raw in read() for e in parse(name, raw)]

    def parse_and_store() -> list[Any]:
        entries = parse_all()
        write(key_for(read(), code) or "", entries)  # the key of what was parsed
        return entries

    if not enabled():
        return parse_all()
    key = key_for((), code, paths) if paths else None
    # a row that does not rebuild on use: parsed again and the file rewritten
    hit = read_lazy(key or key_for(read(), code) or "", entry_type, parse_and_store)
    if hit is None:
        hit = parse_and_store()
    _stamps().save()
    return hit


def load_doc(name: str, raw: "bytes | Callable[[], bytes]", loads: Callable[[bytes], dict],
             code: Sequence[str], kind: str = "toml", path: str | None = None) -> dict:
    """A document made from ``raw`` by ``loads`` (the parsed ``compat.toml``; ``kind``
    "derived": what the KB computes from its signatures), from the cache when the bytes and
    the code are the same; cached only when JSON gives back exactly the same document.
    ``path``: where ``raw`` (a callable then) is: keyed by its stamp, read only on a miss."""
    reading: Callable[[], bytes] = raw if callable(raw) else (lambda data=raw: data)
    if not enabled():
        return loads(reading())
    key = key_for((), code, [(name, path)]) if path else None
    if key is None:
        raw = reading()
        key = key_for([(name, raw)], code) or ""
    else:
        raw = None
    doc = _cached_doc(name, key, kind)
    _stamps().save()
    if doc is not None:
        return doc
    if raw is None:
        raw = reading()
        key = key_for([(name, raw)], code) or ""  # the key of what is parsed
    return _parse_doc(name, raw, key, kind, loads)


def _doc_stem(name: str) -> str:
    """The file-name part a document's cache files share (``compat`` for compat.toml)."""
    return re.sub(r"[^a-z0-9_]", "_", name.removesuffix(".toml").lower())


def _cached_doc(name: str, key: str, kind: str) -> dict | None:
    hit = read_private(f"{kind}-{_doc_stem(name)}-{key}.json")
    if hit is not None:
        try:
            doc = json.loads(hit.decode("utf-8"))
            if isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("key") == key \
                    and isinstance(doc.get("doc"), dict):
                return doc["doc"]
        except (ValueError, RecursionError, UnicodeDecodeError):
            pass  # corrupt: as if absent
    return None


def _parse_doc(name: str, raw: bytes, key: str, kind: str,
               loads: Callable[[bytes], dict]) -> dict:
    stem = _doc_stem(name)
    file = f"{kind}-{stem}-{key}.json"
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
