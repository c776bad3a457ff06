"""Block-table audit logs written by the ascend-doctor vLLM plugin (doctor/vllm_plugin).

The parser is a pure streaming function: each line becomes a typed record or a
``BadLine`` with its number and reason (truncated, not JSON, wrong field types), so a
log cut off by a crash or a full disk is still read up to the damage. Logs are large
(up to 64 MiB per file by default), so the fact holds a way to *stream* the records
through the Host rather than the records themselves; the check replays them once.

Where the log is: ``--block-audit FILE``; else the file named by
``ASCEND_DOCTOR_BLOCK_AUDIT`` in the service's environment (``{pid}`` expanded by glob).
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Callable, Iterator, NamedTuple, Union

from ..errors import SourceError, SourceMissing
from ..i18n import N_, T
from ..host import Host
from ..inputs import input_error, user_files
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from ..safeopen import Guard
from .svcaccess import refusal, service_creds
from .procs import ServiceEnv, ServiceProcesses

ENV = "ASCEND_DOCTOR_BLOCK_AUDIT"
MAX_LINE = 64 * 1024 * 1024  # one step line; longer = garbled


@dataclass(frozen=True, eq=False)
class Header:
    """An audit log's header: the engine, the KV cache geometry, what the log records."""

    line: int
    engine: str  # "v1" | "v0"
    num_gpu_blocks: int | None
    block_size: int | None
    prefix_caching: bool | None
    groups: tuple[str, ...] = ()
    split: int = 1  # >1: ids are vllm-ascend kernel blocks, `split` per scheduler block
    freed_tracking: bool = False
    every: int = 1
    vllm: str | None = None
    pid: int | None = None
    scheduler: str | None = None


Blocks = tuple[tuple[int, ...], ...]  # block ids per KV-cache group


class NewReq(NamedTuple):  # NamedTuple: thousands per step, cheap to build
    req_id: str
    blocks: Blocks
    computed: int | None


class CachedReq(NamedTuple):
    req_id: str
    resumed: bool
    blocks: Blocks | None  # new ids (append) or the whole table (resumed / full line)
    computed: int | None


class CachedCols(NamedTuple):
    """Cached requests of a step as parallel columns (hundreds per step: no row objects)."""

    ids: tuple[str, ...] = ()
    resumed: tuple[bool, ...] = ()
    blocks: tuple[Blocks | None, ...] = ()
    computed: tuple[int | None, ...] = ()


@dataclass(frozen=True, eq=False)
class StepV1:
    """One V1 scheduler step: new requests, cached-request columns, finished and freed ids."""

    line: int
    step: int
    new: tuple[NewReq, ...]
    cols: CachedCols
    finished: tuple[str, ...] = ()
    freed: tuple[str, ...] = ()
    tokens: dict[str, int] = field(default_factory=dict)
    full: bool = False

    @property
    def cached(self) -> tuple[CachedReq, ...]:
        return tuple(CachedReq(*row) for row in zip(*self.cols)) if self.cols.ids else ()


@dataclass(frozen=True, eq=False)
class SeqGroupV0:
    """One V0 sequence group of a step: its block table per sequence."""

    request_id: str
    tables: dict[int, tuple[int, ...]]  # seq_id -> block table
    computed: tuple[int, ...] | None


@dataclass(frozen=True, eq=False)
class StepV0:
    """One V0 scheduler step: its sequence groups."""

    line: int
    step: int
    groups: tuple[SeqGroupV0, ...]


@dataclass(frozen=True, eq=False)
class Disabled:
    """The plugin stopped auditing at this step, and why."""

    line: int
    step: int
    reason: str


@dataclass(frozen=True, eq=False)
class BadLine:
    """An audit line that could not be read, and why (the replay goes on without it)."""

    line: int
    reason: str
    truncated: bool = False


Record = Union[Header, StepV1, StepV0, Disabled, BadLine]


class _Bad(ValueError):
    pass


def _int(v: Any, what: str) -> int:
    if type(v) is not int:  # bool is not int here
        raise _Bad(f"{what} is {type(v).__name__}, not an integer")
    return v


def _opt_int(v: Any, what: str) -> int | None:
    if v is None or type(v) is int:
        return v
    raise _Bad(f"{what} is {type(v).__name__}, not an integer")


def _str(v: Any, what: str) -> str:
    if type(v) is str:
        return v
    if type(v) is not int:
        raise _Bad(f"{what} is {type(v).__name__}, not a request id")
    return str(v)


_INT = {int}
_STR = {str}
_OPT_INT = {int, type(None)}


def _ids(v: Any, what: str) -> tuple[int, ...]:
    if type(v) is not list:
        raise _Bad(f"{what} is {type(v).__name__}, not a list of block ids")
    if v and set(map(type, v)) != _INT:  # one C-level pass (bool is not int here)
        bad = next(x for x in v if type(x) is not int)
        raise _Bad(f"{what} holds {bad!r}, not a block id")
    return tuple(v)


def _groups(v: Any, what: str) -> Blocks:
    if type(v) is not list:
        raise _Bad(f"{what} is {type(v).__name__}, not a list of groups")
    if v and type(v[0]) is int:
        return (_ids(v, what),)  # a flat list: one group
    return tuple([_ids(g, what) for g in v])


def _list(v: Any, what: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(f"{what} is {type(v).__name__}, not a list")
    return v


def _header(d: dict[str, Any], n: int) -> Header:
    engine = d.get("engine")
    if engine not in ("v0", "v1"):
        raise _Bad(f"header engine is {engine!r}, not 'v1' or 'v0'")
    split = d.get("split", 1)
    split = 1 if split is None else _int(split, "header split")
    if split < 1:
        raise _Bad(f"header split is {split}")
    groups = d.get("groups") or []
    if not isinstance(groups, list):
        raise _Bad("header groups is not a list")
    pc = d.get("prefix_caching")
    every = d.get("every", 1)
    return Header(n, engine, _opt_int(d.get("num_gpu_blocks"), "num_gpu_blocks"),
                  _opt_int(d.get("block_size"), "block_size"),
                  None if pc is None else bool(pc), tuple(str(g) for g in groups), split,
                  bool(d.get("freed_tracking")), every if isinstance(every, int) else 1,
                  str(d["vllm"]) if d.get("vllm") is not None else None,
                  d.get("pid") if isinstance(d.get("pid"), int) else None,
                  str(d["scheduler"]) if d.get("scheduler") else None)


def _step_v1(d: dict[str, Any], n: int) -> StepV1:
    new = []
    for i, e in enumerate(_list(d.get("new"), "new")):
        if not isinstance(e, list) or len(e) < 2:
            raise _Bad(f"new[{i}] is not [req_id, block_ids, num_computed]")
        new.append(NewReq(_str(e[0], f"new[{i}] req_id"), _groups(e[1], f"new[{i}] block_ids"),
                          _opt_int(e[2] if len(e) > 2 else None, f"new[{i}] num_computed")))
    ids: list[Any] = []
    res: list[Any] = []
    nb: list[Any] = []
    nc: list[Any] = []
    for i, e in enumerate(_list(d.get("cached"), "cached")):  # rows (older writers, tests)
        if type(e) is not list or len(e) < 3:
            raise _Bad(f"cached[{i}] is not [req_id, resumed, new_block_ids, num_computed]")
        ids.append(e[0])
        res.append(e[1])
        nb.append(e[2])
        nc.append(e[3] if len(e) > 3 else None)
    cc = d.get("cc")
    if cc is not None:  # columns: ids, res, nb, nc
        if type(cc) is not dict:
            raise _Bad("cc is not an object")
        cols = [_list(cc.get(k), f"cc.{k}") for k in ("ids", "res", "nb", "nc")]
        if not len(cols[0]) == len(cols[1]) == len(cols[2]) == len(cols[3]):
            raise _Bad("cc columns differ in length (" + ", ".join(str(len(c)) for c in cols)
                       + ")")
        ids += cols[0]
        res += cols[1]
        nb += cols[2]
        nc += cols[3]
    if ids and not set(map(type, ids)) <= _STR:
        ids = [_str(x, "cached req_id") for x in ids]
    if nc and not set(map(type, nc)) <= _OPT_INT:
        bad = next(x for x in nc if x is not None and type(x) is not int)
        raise _Bad(f"cached num_computed {bad!r} is not an integer")
    cached = CachedCols(tuple(ids), tuple(map(bool, res)),
                        tuple([None if b is None else _groups(b, "cached new_block_ids")
                               for b in nb]), tuple(nc))
    tok = d.get("tok") or {}
    if not isinstance(tok, dict):
        raise _Bad("tok is not an object")
    for k, v in tok.items():
        if type(v) is not int:
            raise _Bad(f"tok[{k}] is {type(v).__name__}, not an integer")
    return StepV1(n, _int(d.get("n", 0), "step"), tuple(new), cached,
                  tuple(_str(x, "fin") for x in _list(d.get("fin"), "fin")),
                  tuple(_str(x, "freed") for x in _list(d.get("freed"), "freed")), tok,
                  bool(d.get("full")))


def _step_v0(d: dict[str, Any], n: int) -> StepV0:
    groups = []
    for i, e in enumerate(_list(d.get("g"), "g")):
        if not isinstance(e, list) or len(e) < 2 or not isinstance(e[1], dict):
            raise _Bad(f"g[{i}] is not [request_id, {{seq_id: block_table}}, computed]")
        tables = {}
        for k, v in e[1].items():
            try:
                seq = int(k)
            except ValueError:
                raise _Bad(f"g[{i}] seq id {k!r} is not an integer") from None
            tables[seq] = _ids(v, f"g[{i}] block_tables[{k}]")
        computed = None if len(e) < 3 or e[2] is None else _ids(e[2], f"g[{i}] computed")
        groups.append(SeqGroupV0(_str(e[0], f"g[{i}] request_id"), tables, computed))
    return StepV0(n, _int(d.get("n", 0), "step"), tuple(groups))


def parse_line(raw: bytes, lineno: int) -> Record | None:
    """One audit line → a record, a BadLine, or None for a blank line. Never raises."""
    text = raw.strip()
    if not text:
        return None
    try:
        d = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return BadLine(lineno, f"not JSON ({str(exc)[:80]})")
    if not isinstance(d, dict):
        return BadLine(lineno, f"a JSON {type(d).__name__}, not an object")
    kind = d.get("t")
    try:
        if kind == "hdr":
            return _header(d, lineno)
        if kind == "s":
            return _step_v1(d, lineno)
        if kind == "s0":
            return _step_v0(d, lineno)
        if kind == "off":
            return Disabled(lineno, d.get("n") if isinstance(d.get("n"), int) else 0,
                            str(d.get("reason", ""))[:500])
        return BadLine(lineno, f"unknown record kind {kind!r}")
    except _Bad as exc:
        return BadLine(lineno, str(exc))
    except (RecursionError, OverflowError, TypeError, ValueError) as exc:
        return BadLine(lineno, f"malformed ({type(exc).__name__})")


def iter_records(stream: BinaryIO, max_line: int = MAX_LINE) -> Iterator[Record]:
    """Stream records from a binary file; a last line without newline is 'truncated'."""
    lineno = 0
    while True:
        raw = stream.readline(max_line + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the giant line
                raw = stream.readline(max_line)
            yield BadLine(lineno, f"line longer than {max_line} bytes")
            continue
        rec = parse_line(raw, lineno)
        if isinstance(rec, BadLine) and not raw.endswith(b"\n"):
            yield BadLine(lineno, rec.reason + "; the last line is cut off (truncated file)",
                          truncated=True)
        elif rec is not None:
            yield rec


def parse_text(text: "str | bytes") -> list[Record]:
    """All records of an in-memory log (tests, the fuzz target)."""
    import io

    data = text.encode() if isinstance(text, str) else text
    return list(iter_records(io.BytesIO(data)))


@dataclass(frozen=True, eq=False)
class BlockAuditLog:
    """Audit logs to replay; ``records(path)`` streams one through the Host."""

    paths: tuple[str, ...]
    origin: str  # "--block-audit" or "ASCEND_DOCTOR_BLOCK_AUDIT in /proc/<pid>/environ"
    opener: Callable[[str], BinaryIO] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def records(self, path: str) -> Iterator[Record]:
        with self.opener(path) as stream:
            yield from iter_records(stream)


@provider
def gather_block_audit(host: Host, options: RunOptions, env: ServiceEnv | None,
                       procs: ServiceProcesses | None = None) -> BlockAuditLog:
    if options.block_audit:
        files = user_files(host)  # the user's file, not a path inside a sysroot
        try:
            files.stat(options.block_audit)
        except (SourceMissing, SourceError) as exc:
            raise input_error("--block-audit", options.block_audit, exc) from None
        # the engine (often the service's account) writes it: opened once, links not
        # trusted, decided on what was opened (doctor/safeopen.py)
        return BlockAuditLog((options.block_audit,), "--block-audit",
                             lambda p: files.open_stream(p, guard=Guard()))
    else:
        named = (env.env.get(ENV, "").strip() if env is not None else "")
        if not named:
            raise SourceMissing(N_("block audit log"),
                                T("no --block-audit FILE given and {env} is not set in {where}",
                                  env=ENV, where=(env.source if env is not None
                                                  else T("the service environment"))))
        origin = T("{env} in {source}", env=ENV, source=env.source) if env is not None else ENV
        paths = sorted(host.glob(named.replace("{pid}", "*"))) if "{pid}" in named else [named]
        if not paths:
            raise SourceMissing(named, T("no file matches ({origin})", origin=origin))
    creds = None
    for p in paths:
        host.stat(p)  # absent → SourceMissing, unreadable → SourceError, named
        uid = next((s.proc.uid for s in (procs.servers if procs else ()) if s.pid == env.pid),
                   None) if env is not None else None
        why = refusal(host, p, env.pid, uid) if env is not None and env.pid is not None else None
        if why:  # the service's environment named it: never read it with root's rights
            raise SourceError(p, T("{why} ({origin})", why=why, origin=origin))
        if env is not None and env.pid is not None:
            creds = service_creds(host, env.pid, uid)
    # the check above is by name, for the message; what is read is decided again on the
    # opened descriptor with the service's uid and groups (a name can be swapped in between)
    guard = Guard(reader=creds)
    return BlockAuditLog(tuple(paths), origin, lambda p: host.open_stream(p, guard=guard))
