"""Compiled regular expressions kept across runs, so a CLI run does not parse and compile
the ~200 patterns it meets (the redactor's, the KB's, packaging's, fnmatch's) each time.

Why: Python keeps compiled patterns only in memory, and parsing and compiling them again
was ~5 % of every ``demo --json`` (alternating runs with and without, 2026-12-06). What is kept is what ``re._compiler.compile`` hands to
``_sre.compile`` — the flags, the SRE code (a list of ints), the group count and the group
names — as JSON in the user cache (doctor/usercache.py: owned by the effective uid, written
atomically), under a name that carries the Python version and ``_sre.MAGIC``.

Trust: a pattern goes into the file only when what this module builds is *equal* to what
``re`` itself compiled (``Pattern.__eq__`` compares the pattern, the flags and the code),
and a stored entry is used only after its types and group numbers check out; ``_sre``
validates the code itself and refuses what it could not run safely. The file is trusted as
Python trusts a ``__pycache__`` (only its owner can write it). Any refusal or surprise
falls back to ``re``'s own compile. ``re.DEBUG`` patterns are never served from the file.
Where ``re`` lacks the internals this relies on (not CPython 3.11+), nothing is installed.
``ASCEND_DOCTOR_CACHE=0`` turns it off with the other caches.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from . import usercache

FORMAT = 2  # 2: the code as hex
MAX_ENTRIES = 2048  # a CLI run meets ~250 patterns, the TUI more; far above any real union
MAX_BYTES = 8 << 20

_state: dict[str, Any] = {}  # "orig", "table", "new", "used" once installed


def cache_name() -> str | None:
    """The file name for this interpreter, or None where the internals are missing."""
    try:
        import _sre

        magic = int(_sre.MAGIC)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    impl = sys.implementation
    if impl.name != "cpython":
        return None
    v = sys.version_info
    return f"re-{impl.cache_tag}-{v.major}.{v.minor}.{v.micro}-{magic}.json"


def _compiler() -> Any | None:
    comp = getattr(re, "_compiler", None)  # 3.11+; 3.10 has sre_compile: not served
    if comp is None or not all(hasattr(comp, n) for n in ("compile", "_code", "_parser")):
        return None
    return comp


def _key(pattern: str | bytes, flags: int) -> tuple[str, str, int]:
    if isinstance(pattern, bytes):
        return ("b", pattern.decode("latin-1"), int(flags))
    return ("s", pattern, int(flags))


_ITEMSIZE = 4  # _sre's code unit (SRE_CODE, 32 bits)


def _code_type() -> str | None:
    """The array type code of a 32-bit unsigned int here, None if there is none."""
    from array import array

    return next((t for t in ("I", "L") if array(t).itemsize == _ITEMSIZE), None)


def _row(key: tuple[str, str, int], value: tuple[int, list[int], int, dict[str, int]]) -> list:
    """A table entry as the file stores it: the code as hex of native 32-bit words, which
    JSON decodes as one string instead of ~100 numbers per pattern."""
    from array import array

    final, code, groups, names = value
    return [*key, final, array(_code_type(), code).tobytes().hex(), groups, names]


def _entry(row: Any) -> tuple[tuple[str, str, int], tuple[int, list[int], int, dict[str, int]]]:
    """One stored row checked and split into (key, value); ValueError when it is not one of
    ours. Group names must number 1..groups, so the index → name table built from them
    has a slot for every group ``_sre`` may report."""
    if not isinstance(row, list) or len(row) != 7:
        raise ValueError("row shape")
    kind, pattern, flags, final, code_hex, groups, names = row
    if kind not in ("s", "b") or not isinstance(pattern, str):
        raise ValueError("pattern")
    if kind == "b" and any(ord(c) > 255 for c in pattern):
        raise ValueError("bytes pattern")
    if not all(type(x) is int for x in (flags, final, groups)) or not 0 <= groups < 10_000:
        raise ValueError("numbers")
    if not isinstance(code_hex, str) or len(code_hex) % (2 * _ITEMSIZE):
        raise ValueError("code")
    from array import array

    code = array(_code_type(), bytes.fromhex(code_hex)).tolist()  # ValueError if not hex
    if not isinstance(names, dict) or not all(
            isinstance(k, str) and type(i) is int and 1 <= i <= groups
            for k, i in names.items()):
        raise ValueError("group names")
    return (kind, pattern, flags), (final, code, groups, names)


def _load(name: str) -> dict:
    """The stored rows by key, as read: each is checked by ``_entry`` only when its
    pattern is compiled (a run uses about half of them)."""
    raw = usercache.read_private(name, MAX_BYTES)
    if raw is None or _code_type() is None:
        return {}
    try:
        doc = json.loads(raw.decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT \
                or not isinstance(doc.get("entries"), list):
            return {}
        table = {}
        for row in doc["entries"][:MAX_ENTRIES]:
            if isinstance(row, list) and len(row) == 7 and isinstance(row[1], str) \
                    and type(row[2]) is int and row[0] in ("s", "b"):
                table[(row[0], row[1], row[2])] = row
        return table
    except (ValueError, RecursionError, UnicodeDecodeError):
        return {}


def _build(pattern: str | bytes, value: tuple[int, list[int], int, dict[str, int]]) -> Any:
    import _sre

    final, code, groups, names = value
    index = [None] * (groups + 1)
    for k, i in names.items():
        index[i] = k
    return _sre.compile(pattern, final, list(code), groups, dict(names), tuple(index))


def entry_for(comp: Any, p: str | bytes, flags: int, ref: Any) -> Any:
    """What to keep for ``p``: the arguments ``re._compiler.compile`` hands to ``_sre``,
    or None unless they rebuild a pattern equal to ``ref`` (re's own compile of it)."""
    try:
        parsed = comp._parser.parse(p, flags)
        code = comp._code(parsed, flags)
        value = (int(flags | parsed.state.flags), [int(x) for x in code],
                 parsed.state.groups - 1, dict(parsed.state.groupdict))
        if _build(p, value) == ref and ref.groupindex == value[3]:
            return value
    except Exception:
        pass  # this interpreter's internals differ: the pattern is just not kept
    return None


def _make(comp: Any, orig: Any) -> Any:
    debug = int(re.DEBUG)

    def compile(p: Any, flags: int = 0) -> Any:
        if not isinstance(p, (str, bytes)) or int(flags) & debug:
            return orig(p, flags)
        table = _state["table"]
        key = _key(p, flags)
        value = table.get(key)
        if value is not None:
            try:
                if isinstance(value, list):  # as read from the file: checked on first use
                    value = table[key] = _entry(value)[1]
                pat = _build(p, value)
                _state["used"].add(key)
                return pat
            except Exception:  # a damaged row, or code _sre refuses: compile as ever
                table.pop(key, None)
        ref = orig(p, flags)
        value = entry_for(comp, p, flags, ref)
        if value is not None:
            table[key] = value
            _state["new"][key] = value
            _state["used"].add(key)
        return ref

    return compile


def install() -> bool:
    """Serve ``re``'s compiles from the user cache for this process and save the new ones
    at exit. Idempotent; False when not installed (cache off, no safe place, no support)."""
    if _state:
        return True
    comp = _compiler()
    name = cache_name()
    # without a place to keep them, a miss would cost a second compile on every run
    if comp is None or name is None or _code_type() is None or not usercache.enabled() \
            or usercache.cache_dir(create=True) is None:
        return False
    _state.update(orig=comp.compile, name=name, table=_load(name), new={}, used=set())
    comp.compile = _make(comp, _state["orig"])
    import atexit

    atexit.register(save)
    return True


def uninstall() -> None:
    """Put ``re``'s own compile back (tests)."""
    comp = _compiler()
    if _state and comp is not None:
        comp.compile = _state["orig"]
    _state.clear()


def save() -> bool:
    """Write the table when this run compiled patterns the file lacked; keep the file's
    older rows unless that would pass MAX_ENTRIES (then only what this run used). Never
    raises: it runs at exit, after the report, and a cache not written only costs time."""
    try:
        return _save()
    except Exception:
        return False


def _save() -> bool:
    if not _state or not _state["new"]:
        return False
    table, used = dict(_state["table"]), set(_state["used"])  # workers may still compile
    keys = list(table) if len(table) <= MAX_ENTRIES else [k for k in table if k in used]
    rows = [v if isinstance(v, list) else _row(k, v)  # a row never used goes back as read
            for k, v in ((k, table[k]) for k in keys[:MAX_ENTRIES])]
    try:
        # ASCII escapes: a str pattern may hold lone surrogates (a range such as
        # [\ud800-\udfff]), which UTF-8 cannot encode but a JSON \u escape round-trips
        data = json.dumps({"format": FORMAT, "entries": rows}, ensure_ascii=True,
                          separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError):
        return False
    if len(data) > MAX_BYTES:
        return False
    _state["new"] = {}
    # older files of this Python (another micro version or _sre.MAGIC) go; other Pythons'
    # stay, so two interpreters of one user do not evict each other
    stale = re.compile(rf"re-{re.escape(sys.implementation.cache_tag)}-[0-9.]+-[0-9]+\.json")
    return usercache.write_private(_state["name"], data, stale)
