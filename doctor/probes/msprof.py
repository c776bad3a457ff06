"""msprof / torch_npu profiler exports: copy time vs kernel time, per device.

Seed 000_93c34712512482cd.txt §4.2: msprof showed 72 % of the time in aclrtMemcpyAsync
because the weights were copied before every inference; "if Memory Copy Time > 50 % of
Kernel Time, the bottleneck is data movement". Formats: facts/ascend-stack.md §4
(op_summary, kernel_details, api_statistic, op_statistic, task_time; msprof_*.json /
trace_view.json for MEMCPY_ASYNC sizes and directions).

The CSV parsers are pure functions over text line iterators and stream (csv module, one
row at a time); ``gather_profile`` finds the files through the Host.
"""

from __future__ import annotations

import csv
import io
import posixpath
import re
import sys
from operator import itemgetter
from typing import BinaryIO, Iterable, Iterator

from ..errors import ParseError, SourceError, SourceMissing, describe
from ..i18n import T
from ..host import Host
from ..inputs import user_files
from ..native import NativeFallback, load, read_into
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from ..safeopen import Guard

COMPUTE_TYPES = {"AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX_AIC", "MIX_AIV", "KERNEL_AICORE",
                 "KERNEL_AICPU", "AIC", "AIV", "MIX"}
MEMCPY = "MEMCPY_ASYNC"
_HCCL = re.compile(r"hcom|hccl|allreduce|allgather|reducescatter|alltoall|broadcast|send|recv",
                   re.IGNORECASE)

# canonical column -> accepted header spellings (op_summary and kernel_details)
OP_COLUMNS = {
    "device": ("Device_id", "Device ID", "Device Id"),
    "name": ("Op Name", "Name"),
    "type": ("OP Type", "Type"),
    "task_type": ("Task Type", "Accelerator Core"),
    "stream": ("Stream ID", "Stream Id"),
    "start": ("Task Start Time(us)", "Start Time(us)"),
    "duration": ("Task Duration(us)", "Duration(us)"),
    "block": ("Block Num", "Block Dim"),
    "step": ("Step Id", "Step ID"),
    "model": ("Model ID",),
}
API_COLUMNS = {"device": ("Device_id",), "level": ("Level",), "name": ("API Name",),
               "time": ("Time(us)",), "count": ("Count",), "avg": ("Avg(us)",)}
OPSTAT_COLUMNS = {"device": ("Device_id",), "type": ("OP Type",), "core": ("Core Type",),
                  "count": ("Count",), "total": ("Total Time(us)",)}
TASK_COLUMNS = {"device": ("Device_id",), "name": ("kernel_name",), "type": ("kernel_type",),
                "stream": ("stream_id",), "time": ("task_time(us)",)}


class CsvFormatError(ValueError):
    """A CSV export that does not have the columns of its kind."""


def _index(header: list[str], spec: dict[str, tuple[str, ...]], required: Iterable[str],
           kind: str) -> dict[str, int]:
    clean = [h.strip().lstrip("\ufeff").strip('"') for h in header]
    idx: dict[str, int] = {}
    for key, names in spec.items():
        for n in names:
            if n in clean:
                idx[key] = clean.index(n)
                break
    missing = [spec[k][0] for k in required if k not in idx]
    if missing:
        # the header of a file not recognised is never quoted: it may be anything (a link
        # the service planted to a root-only file), only counted
        raise CsvFormatError(T("not a {kind} export: column(s) {missing} missing (its first "
                               "row has {n} field(s))", kind=kind, missing=", ".join(missing),
                               n=len(clean)))
    return idx


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


@dataclass
class DeviceCopy:
    """Accumulated per device (mutable while parsing, then frozen into DeviceProfile)."""

    kernel_us: float = 0.0
    kernel_tasks: int = 0
    memcpy_us: float = 0.0  # MEMCPY_ASYNC tasks not belonging to HCCL
    memcpy_tasks: int = 0
    hccl_memcpy_us: float = 0.0
    hccl_memcpy_tasks: int = 0
    hccl_us: float = 0.0  # communication ops themselves
    other_us: float = 0.0
    api_memcpy_us: float = 0.0  # aclrtMemcpy* at the API level
    api_memcpy_calls: int = 0
    api_total_us: float = 0.0  # every acl-level API
    # per aclrtMemcpy* API (aclrtMemcpy, aclrtMemcpyAsync, aclrtMemcpy2d, …): [us, calls]
    api_memcpy_by: dict[str, list] = field(default_factory=dict)
    op_types: dict[str, float] = field(default_factory=dict)
    steps: set[str] = field(default_factory=set)


@dataclass
class ProfileAcc:
    devices: dict[str, DeviceCopy] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # file -> rows read
    problems: list[str] = field(default_factory=list)
    # per (device, stream): memcpy time/tasks and whether HCCL ops run there
    _stream_memcpy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    _hccl_streams: set[tuple[str, str]] = field(default_factory=set)
    copies: dict[tuple[str, int], int] = field(default_factory=dict)  # (operation, size) -> n

    def dev(self, d: str) -> DeviceCopy:
        d = d.strip() or "?"
        x = self.devices.get(d)
        if x is None:
            x = self.devices[d] = DeviceCopy()
        return x


def _header(reader: Iterator[list[str]]) -> list[str]:
    """The first row; an empty file is a format error."""
    header = next(reader, None)
    if header is None:
        raise CsvFormatError(T("empty file (no header)"))
    return header


if sys.version_info >= (3, 11):
    def _csv_reader(lines: Iterable[str]) -> Iterator[list[str]]:
        return csv.reader(lines)
else:  # Python 3.10's csv refuses NUL ("line contains NUL"); 3.11 reads it as a character
    def _csv_reader(lines: Iterable[str]) -> Iterator[list[str]]:
        return csv.reader(ln.replace("\0", "\ufffd") if "\0" in ln else ln for ln in lines)


def _open_csv(lines: Iterable[str], columns, required: tuple[str, ...], kind: str):
    """(row reader, header, column index) of one export; an empty file is a format error."""
    reader = _csv_reader(lines)
    header = _header(reader)
    return reader, header, _index(header, columns, required, kind)


@dataclass(frozen=True)
class _OpLayout:
    """Where parse_op_rows finds its columns in one export's header."""

    width: int
    need: int  # the highest column index used: a shorter row is skipped
    i_dur: int
    i_name: int
    i_step: int | None
    cols: tuple[int, int, int, int]  # device, task type, op type, stream (i_dur if absent)
    missing: tuple[bool, ...]


def _op_layout(header: list[str]) -> _OpLayout:
    idx = _index(header, OP_COLUMNS, ("duration",), "op_summary/kernel_details")
    if "name" not in idx and "type" not in idx:
        raise CsvFormatError(T("not an op_summary/kernel_details export: neither Op Name "
                               "nor OP Type column"))
    i_dur = idx["duration"]
    i_dev = idx.get("device")
    i_name = idx.get("name", idx.get("type"))
    i_type = idx.get("type", i_name)
    i_task = idx.get("task_type")
    i_stream = idx.get("stream")
    i_step = idx.get("step")
    need = max(i for i in (i_dur, i_dev, i_name, i_type, i_task, i_stream, i_step) if i is not None)
    cols = (i_dev, i_task, i_type, i_stream)
    return _OpLayout(len(header), need, i_dur, i_name, i_step,
                     tuple(c if c is not None else i_dur for c in cols),  # blanked in _fold
                     tuple(c is None for c in cols))


def parse_op_rows(lines: Iterable[str], acc: ProfileAcc, source: str = "op_summary") -> int:
    """op_summary_*.csv or kernel_details.csv rows into ``acc``; returns rows read.

    A row cut short (truncated file) is counted as a problem, not fatal.
    """
    reader = _csv_reader(lines)
    lay = _op_layout(_header(reader))
    i_dur, i_name, i_step, need, width = lay.i_dur, lay.i_name, lay.i_step, lay.need, lay.width
    key_of = itemgetter(*lay.cols)
    sums: dict[tuple[str, ...], list] = {}
    get = sums.get
    memcpy: dict[tuple[str, str, str], list] = {}  # (device, stream, name) -> [us, n]
    steps: set[tuple[str, str]] = set()
    n = bad = 0
    for row in reader:
        n += 1
        if len(row) != width:
            if not row:
                continue
            bad += 1  # cut short (truncated file) or extra fields: use it only if it can be
            if len(row) <= need:
                continue
        try:
            dur = float(row[i_dur])
        except ValueError:
            if row[i_dur] not in ("N/A", ""):
                bad += 1
            continue
        k = key_of(row)
        v = get(k)
        if v is None:
            sums[k] = [dur, 1]
        else:
            v[0] += dur
            v[1] += 1
        if k[1] == MEMCPY or k[2] == MEMCPY:
            mk = (k[0], k[3], row[i_name])
            m = memcpy.get(mk)
            if m is None:
                memcpy[mk] = [dur, 1]
            else:
                m[0] += dur
                m[1] += 1
        if i_step is not None:
            steps.add((k[0], row[i_step]))
    return _op_done(acc, source, lay, n, bad, sums, memcpy, steps)


def _op_done(acc: ProfileAcc, source: str, lay: _OpLayout, n: int, bad: int, sums: dict,
             memcpy: dict, steps: set) -> int:
    _fold(acc, sums, memcpy, steps, lay.missing)
    if bad:
        acc.problems.append(f"{source}: {bad} of {n} rows cut short, too long or not numeric")
    acc.rows[source] = acc.rows.get(source, 0) + n
    return n


OP_BLOCK = 4 << 20  # bytes per read of the C scanner
OP_CARRY = 64 << 20  # a record longer than this goes to the Python path (it holds a line too)


def _native():
    """The C scanner (doctor/_opscan.c) when it was built and not ruled out, else None."""
    return load("_opscan", "ASCEND_DOCTOR_CSV_ENGINE")


def parse_op_bytes(raw: BinaryIO, acc: ProfileAcc, source: str = "op_summary") -> int:
    """``parse_op_rows`` over a binary stream, by the C scanner when it is built: the same
    rows, counts, keys and sums (it emulates the text path's decoding and csv's default
    dialect). Raises NativeFallback, before touching ``acc``, for input it leaves to the
    Python path; without the scanner it is that path."""
    mod = _native()
    if mod is None:
        return parse_op_rows(text_lines(raw), acc, source)
    limit = csv.field_size_limit()
    buf = bytearray(OP_BLOCK)  # reused: a fresh block per read costs page faults
    have, final = 0, False

    def fill() -> None:
        nonlocal have, final
        if have == len(buf):  # one record fills the buffer: grow it, up to OP_CARRY
            if len(buf) >= OP_CARRY:
                raise NativeFallback(source)
            buf.extend(bytes(len(buf)))
        got = read_into(raw, buf, have, OP_BLOCK)
        final = got == 0
        have += got

    try:
        while True:  # the header, however long its first record
            fill()
            header, pos = mod.first_record(buf, have, final, limit)
            if pos >= 0:
                break
        if header is None:
            raise CsvFormatError(T("empty file (no header)"))
        lay = _op_layout(header)
        scan = mod.Scanner(lay.width, lay.need, lay.i_dur, lay.cols, lay.i_name,
                           -1 if lay.i_step is None else lay.i_step, limit)
        while True:
            pos = scan.feed(buf, pos, have, final)
            if final:
                break
            buf[:have - pos] = buf[pos:have]  # the record cut by the read, to the front
            have -= pos
            pos = 0
            fill()
    except mod.Fallback:
        raise NativeFallback(source) from None
    n, bad, sums, memcpy, steps = scan.result()
    return _op_done(acc, source, lay, n, bad, sums, memcpy, steps)


def _fold(acc: ProfileAcc, sums: dict, memcpy: dict, steps: set, missing: tuple[bool, ...]
          ) -> None:
    """Classify per-(device, task type, op type, stream) sums into device totals."""
    def norm(k: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(("0" if i == 0 else "") if m else v for i, (v, m) in enumerate(zip(k, missing)))

    for (dev, stream, name), (us, cnt) in memcpy.items():
        dev = "0" if missing[0] else dev
        stream = "" if missing[3] else stream
        s = acc._stream_memcpy.setdefault((dev, stream), [0.0, 0, 0.0, 0])
        if _HCCL.search(name):
            s[2] += us
            s[3] += cnt
        else:
            s[0] += us
            s[1] += cnt
    for k, (us, cnt) in sums.items():
        dev, task, optype, stream = norm(k)
        if task == MEMCPY or optype == MEMCPY:
            continue  # counted from ``memcpy`` (names decide HCCL)
        d = acc.dev(dev)
        is_hccl = optype.lower().startswith(("hcom", "hccl")) or task in ("HCCL", "COMMUNICATION")
        if task in COMPUTE_TYPES or (not task and optype):
            d.kernel_us += us
            d.kernel_tasks += cnt
            d.op_types[optype] = d.op_types.get(optype, 0.0) + us
            if is_hccl:
                d.hccl_us += us
        elif is_hccl or _HCCL.search(optype):
            d.hccl_us += us
            is_hccl = True
        else:
            d.other_us += us
        if is_hccl and not missing[3]:
            acc._hccl_streams.add((dev, stream))
    for dev, step in steps:
        acc.dev("0" if missing[0] else dev).steps.add(step)


def parse_task_time(lines: Iterable[str], acc: ProfileAcc, source: str = "task_time") -> int:
    """task_time_*.csv: MEMCPY_ASYNC and compute tasks (used when there is no op_summary)."""
    reader, header, idx = _open_csv(lines, TASK_COLUMNS, ("name", "time"), "task_time")
    n = 0
    for row in reader:
        n += 1
        if len(row) < len(header):
            continue
        t = _num(row[idx["time"]])
        if t is None:
            continue
        dkey = row[idx["device"]] if "device" in idx else "0"
        name = row[idx["name"]]
        ktype = row[idx["type"]] if "type" in idx else ""
        if name == MEMCPY or ktype == MEMCPY:
            sk = (dkey, row[idx["stream"]] if "stream" in idx else "")
            s = acc._stream_memcpy.setdefault(sk, [0.0, 0, 0.0, 0])
            s[0] += t
            s[1] += 1
        elif ktype in COMPUTE_TYPES:
            d = acc.dev(dkey)
            d.kernel_us += t
            d.kernel_tasks += 1
    acc.rows[source] = acc.rows.get(source, 0) + n
    return n


def parse_api_statistic(lines: Iterable[str], acc: ProfileAcc, source: str = "api_statistic"
                        ) -> int:
    reader, header, idx = _open_csv(lines, API_COLUMNS, ("name", "time"), "api_statistic")
    need = max(idx.values())
    n = 0
    for row in reader:
        n += 1
        if len(row) <= need:
            continue
        t = _num(row[idx["time"]])
        if t is None:
            continue
        d = acc.dev(row[idx["device"]] if "device" in idx else "host")
        level = row[idx["level"]].strip().lower() if "level" in idx else "acl"
        name = row[idx["name"]].strip()
        if level in ("acl", ""):
            d.api_total_us += t
        if name.startswith("aclrtMemcpy"):
            d.api_memcpy_us += t
            c = _num(row[idx["count"]]) if "count" in idx else None
            d.api_memcpy_calls += int(c or 0)
            by = d.api_memcpy_by.setdefault(name[:64], [0.0, 0])
            by[0] += t
            by[1] += int(c or 0)
    acc.rows[source] = acc.rows.get(source, 0) + n
    return n


def parse_op_statistic(lines: Iterable[str], acc: ProfileAcc, source: str = "op_statistic"
                       ) -> int:
    """op_statistic: per-type totals (top operators when there is no op_summary)."""
    reader, header, idx = _open_csv(lines, OPSTAT_COLUMNS, ("type", "total"), "op_statistic")
    need = max(idx.values())
    n = 0
    for row in reader:
        n += 1
        if len(row) <= need:
            continue
        t = _num(row[idx["total"]])
        if t is None:
            continue
        d = acc.dev(row[idx["device"]] if "device" in idx else "0")
        ot = row[idx["type"]]
        d.op_types[ot] = d.op_types.get(ot, 0.0) + t
    acc.rows[source] = acc.rows.get(source, 0) + n
    return n


_SIZE = re.compile(r'"size\(B\)"\s*:\s*"?(\d+)')
_OPER = re.compile(r'"operation"\s*:\s*"([^"]*)"')
_EVENT = re.compile(rb'"name"\s*:\s*"MEMCPY_ASYNC"')
WINDOW = 2048


def scan_timeline(chunks: Iterable[bytes], acc: ProfileAcc, limit: int = 1_000_000) -> int:
    """MEMCPY_ASYNC events of a timeline JSON (msprof_*.json, trace_view.json), scanned in
    chunks: copies counted by (operation, size) without building the JSON tree.

    ``chunks`` ends with an empty chunk (end of file)."""
    found = 0
    buf = b""
    for chunk in chunks:
        final = not chunk
        buf += chunk
        safe = len(buf) if final else len(buf) - WINDOW
        pos = 0
        for m in _EVENT.finditer(buf):
            i = m.start()
            if i >= safe or found >= limit:
                break
            window = buf[i:i + WINDOW]
            nxt = window.find(b'"name"', 10)
            text = window[:nxt if nxt > 0 else len(window)].decode("utf-8", "replace")
            m_size, m_op = _SIZE.search(text), _OPER.search(text)
            if m_size:
                key = ((m_op.group(1) if m_op else "unknown"), int(m_size.group(1)))
                acc.copies[key] = acc.copies.get(key, 0) + 1
                found += 1
            pos = m.end()
        if final:
            break
        buf = buf[max(pos, safe, 0):]
    return found


@dataclass(frozen=True)
class DeviceProfile:
    device: str
    kernel_us: float
    kernel_tasks: int
    memcpy_us: float
    memcpy_tasks: int
    hccl_memcpy_us: float
    hccl_memcpy_tasks: int
    hccl_us: float
    api_memcpy_us: float
    api_memcpy_calls: int
    api_total_us: float
    top_ops: tuple[tuple[str, float], ...]
    steps: int
    # (API name, us, calls) per aclrtMemcpy* API, most time first
    api_memcpy_by: tuple[tuple[str, float, int], ...] = ()

    @property
    def copy_us(self) -> float:
        """Device copy time when tasks were exported, else host-side aclrtMemcpy* time."""
        return self.memcpy_us if self.memcpy_tasks else self.api_memcpy_us

    @property
    def copy_source(self) -> str:
        return "MEMCPY_ASYNC tasks" if self.memcpy_tasks else "aclrtMemcpy* API time"


@dataclass(frozen=True)
class Profile:
    """The copy/compute picture of one profiler output directory."""

    root: str
    layout: str  # msprof | msprof-legacy | torch_npu
    files: tuple[str, ...]
    rows: dict[str, int]
    devices: tuple[DeviceProfile, ...]
    copies: tuple[tuple[str, int, int], ...] = ()  # (operation, size bytes, count), most first
    problems: tuple[str, ...] = ()


def freeze(acc: ProfileAcc, root: str, layout: str, files: Iterable[str]) -> Profile:
    for (dkey, _stream), (t, n, ht, hn) in acc._stream_memcpy.items():
        d = acc.dev(dkey)
        if (dkey, _stream) in acc._hccl_streams:  # copies on a communication stream
            d.hccl_memcpy_us += t + ht
            d.hccl_memcpy_tasks += n + hn
        else:
            d.memcpy_us += t
            d.memcpy_tasks += n
            d.hccl_memcpy_us += ht
            d.hccl_memcpy_tasks += hn
    devs = dict(acc.devices)
    host = devs.pop("host", None)
    if host is not None:  # host-side API rows: attach to the device when there is one
        compute = [k for k, v in devs.items() if v.kernel_us or v.memcpy_tasks]
        target = devs[compute[0]] if len(compute) == 1 else None
        if target is not None:
            target.api_memcpy_us += host.api_memcpy_us
            target.api_memcpy_calls += host.api_memcpy_calls
            target.api_total_us += host.api_total_us
            for name, (t, c) in host.api_memcpy_by.items():
                by = target.api_memcpy_by.setdefault(name, [0.0, 0])
                by[0] += t
                by[1] += c
        else:
            devs["host"] = host
    out = []
    for k in sorted(devs, key=lambda s: (not s.strip().isdigit(), int(s) if s.strip().isdigit() else 0, s)):
        v = devs[k]
        top = tuple(sorted(((t, round(u, 3)) for t, u in v.op_types.items()),
                           key=lambda x: -x[1])[:8])
        out.append(DeviceProfile(k.strip(), round(v.kernel_us, 3), v.kernel_tasks,
                                 round(v.memcpy_us, 3), v.memcpy_tasks,
                                 round(v.hccl_memcpy_us, 3), v.hccl_memcpy_tasks,
                                 round(v.hccl_us, 3), round(v.api_memcpy_us, 3),
                                 v.api_memcpy_calls, round(v.api_total_us, 3), top,
                                 len(v.steps - {"", "N/A"}),
                                 tuple(sorted(((n, round(t, 3), c) for n, (t, c)
                                               in v.api_memcpy_by.items()),
                                              key=lambda x: (-x[1], x[0])))))
    copies = tuple(sorted(((op, size, n) for (op, size), n in acc.copies.items()),
                          key=lambda x: (-x[2], -x[1]))[:20])
    return Profile(root, layout, tuple(files), dict(acc.rows), tuple(out), copies,
                   tuple(acc.problems))


# -- finding the files through the Host ------------------------------------------------------
KINDS = (("op_summary", parse_op_rows), ("kernel_details", parse_op_rows),
         ("api_statistic", parse_api_statistic), ("op_statistic", parse_op_statistic),
         ("task_time", parse_task_time))


def _kind(path: str) -> str | None:
    base = posixpath.basename(path)
    for k, _ in KINDS:
        if base.startswith(k) and base.endswith(".csv"):
            return k
    return None


def find_exports(host: Host, root: str, outside: list[str] | None = None
                 ) -> tuple[str, list[str], list[str]]:
    """(layout, csv files, timeline json files) under a profiler output directory.

    A directory link (``PROF_1 -> /elsewhere``) is not followed out of ``root``: the files
    it leads to are dropped and the link is named in ``outside``. A file link stays: the
    guarded open judges where it lands (doctor/safeopen.py)."""
    r = root.rstrip("/") or "/"
    real_root = host.realpath(r).rstrip("/")
    real_of: dict[str, str] = {}

    def glob(pattern: str) -> list[str]:
        kept = []
        for p in host.glob(pattern):
            d = posixpath.dirname(p)
            if d not in real_of:
                real_of[d] = host.realpath(d)
            if real_of[d] == real_root or real_of[d].startswith(real_root + "/"):
                kept.append(p)
            elif outside is not None:
                note = f"{d} -> {real_of[d]}"
                if note not in outside:
                    outside.append(note)
        return kept

    pt = (glob(f"{r}/ASCEND_PROFILER_OUTPUT/*.csv") + glob(f"{r}/*_ascend_pt/ASCEND_PROFILER_OUTPUT/*.csv")
          + (glob(f"{r}/*.csv") if posixpath.basename(r) == "ASCEND_PROFILER_OUTPUT" else []))
    if pt:
        js = [p.replace(".csv", ".json") for p in pt if p.endswith("kernel_details.csv")]
        js = [p.rsplit("/", 1)[0] + "/trace_view.json" for p in js]
        return "torch_npu", pt, [j for j in js if host.exists(j)]
    cur = (glob(f"{r}/mindstudio_profiler_output/*.csv")
           + glob(f"{r}/PROF_*/mindstudio_profiler_output/*.csv")
           + (glob(f"{r}/*.csv") if posixpath.basename(r) == "mindstudio_profiler_output" else []))
    if cur:
        js = [p for d in {posixpath.dirname(c) for c in cur} for p in host.glob(f"{d}/msprof_*.json")]
        return "msprof", cur, js
    legacy = (glob(f"{r}/device_*/summary/*.csv") + glob(f"{r}/PROF_*/device_*/summary/*.csv")
              + (glob(f"{r}/*.csv") if posixpath.basename(r) == "summary" else []))
    return "msprof-legacy", legacy, []


def text_lines(stream: BinaryIO) -> io.TextIOWrapper:
    """A streamed text view: BOM stripped, undecodable bytes replaced, csv-safe newlines."""
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")


def _chunks(stream: BinaryIO, size: int = 1 << 20) -> Iterator[bytes]:
    while True:
        b = stream.read(size)
        if not b:
            yield b""
            return
        yield b


@provider
def gather_profile(host: Host, options: RunOptions) -> Profile:
    if not options.profile_dir:
        raise SourceMissing("--profile", T("no profiler output given (pass --profile DIR)"))
    root = options.profile_dir
    host = user_files(host)  # the user's directory, not a path inside a sysroot
    if not host.is_dir(root):
        if host.exists(root):
            raise SourceError(f"--profile {root}", T("is not a directory"))
        raise SourceError(f"--profile {root}", T("not found"))
    outside: list[str] = []
    layout, files, timelines = find_exports(host, root, outside)
    chosen = [(f, _kind(f)) for f in files if _kind(f)]
    if not chosen and outside:
        raise SourceError(f"--profile {root}", T("{links}: directory links out of it, not "
                                                 "followed", links="; ".join(outside[:3])))
    if not chosen:
        raise SourceError(f"--profile {root}", T("no {kinds} CSV under it ({layouts})",
                                                 kinds="op_summary / kernel_details / api_statistic"
                                                       " / op_statistic / task_time",
                                                 layouts="msprof: PROF_*/mindstudio_profiler_"
                                                         "output/, legacy PROF_*/device_*/summary/,"
                                                         " torch_npu: *_ascend_pt/ASCEND_PROFILER_"
                                                         "OUTPUT/"))
    # op_summary/kernel_details give per-task truth; op_statistic/task_time only fill gaps
    have_ops = {posixpath.dirname(f) for f, k in chosen if k in ("op_summary", "kernel_details")}
    acc = ProfileAcc()
    used = []
    refused: list[str] = []
    # msprof writes the directory as the service: every file is opened once, links not
    # trusted, and read only when the accounts that can change its path could read it
    # themselves (doctor/safeopen.py); a refused file is named, never read
    guard = Guard()
    for f, kind in sorted(chosen):
        if kind in ("op_statistic", "task_time") and posixpath.dirname(f) in have_ops:
            continue
        parser = dict(KINDS)[kind]
        try:
            read = False
            if parser is parse_op_rows:  # the C scanner when built; refused input: Python
                try:
                    with host.open_stream(f, guard=guard) as raw:
                        parse_op_bytes(raw, acc, f)
                    read = True
                except NativeFallback:
                    pass
            if not read:
                with host.open_stream(f, guard=guard) as raw:
                    parser(text_lines(raw), acc, f)
        except (SourceMissing, SourceError) as exc:
            if isinstance(exc, ParseError):
                raise
            refused.append(f"{f}: {exc.reason}")
            continue
        except CsvFormatError as exc:
            raise ParseError(f, describe(exc)) from None
        except csv.Error as exc:
            raise ParseError(f, T("CSV syntax error: {exc}", exc=str(exc))) from None
        used.append(f)
    if refused and not used:
        raise SourceError(f"--profile {root}", "; ".join(refused[:3]))
    acc.problems.extend(refused)
    acc.problems.extend(f"{o}: a directory link out of --profile, not followed"
                        for o in outside)
    for j in timelines[:4]:
        try:
            with host.open_stream(j, guard=guard) as raw:
                scan_timeline(_chunks(raw), acc)
            used.append(j)
        except (SourceMissing, SourceError) as exc:
            acc.problems.append(f"{j}: {exc}")
    return freeze(acc, root, layout, used)
