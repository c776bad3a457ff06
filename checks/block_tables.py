"""Replay a block-table audit log and check the block-ownership invariants.

Seed 000_93c34712512482cd.txt §5.3: under high concurrency with long contexts the model
repeated sentences or changed topic, and the block tables held duplicate block ids. Two
live requests writing one KV block corrupt each other's attention, which is exactly
that symptom. The invariants (facts: vllm-internals §3.3–3.4, W1–W3 / I4–I5):

* W1 a block just handed out (a new request's blocks past its prefix-cache hit, a running
  request's appended blocks, a resumed request's blocks past its hit) must not be held
  by any other live request;
* W2 a non-null id appears once in a request (all KV-cache groups share one block pool);
* W3/I4 a block held by two live requests is legal only as a prefix-cache share: prefix
  caching on, the same group, the same index, and a full block of the holder;
* I5 ids lie in [0, num_gpu_blocks); block 0 is V1's null block (placeholder for skipped
  positions) and may appear anywhere;
* vllm-ascend kernel-block ids (``split`` r > 1 in the header) are mapped back to the
  scheduler's block by ``id // r`` (each block is r consecutive kernel ids).

Live tables are rebuilt from the V1 step stream: new requests, cached requests (append,
or replace when resumed from preemption), finished requests and the plugin's ``freed``
events (preemption / finish, straight from KVCacheManager.free). Only full-attention
groups are checked for sharing: sliding-window and mamba groups drop blocks silently.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Iterator

from ascend_doctor.i18n import N_, T, join
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.block_audit import (BadLine, BlockAuditLog, Disabled, Header, Record,
                                       StepV0, StepV1)
from ascend_doctor.registry import check
from dataclasses import dataclass, field

KB = "ASC-KV-001"
MAX_EXAMPLES = 20
KINDS = {
    "fresh-block-held": N_("a block just allocated to one request is still held by another "
                           "live request"),
    "no-prefix-cache": N_("a block is held by two live requests while prefix caching is off"),
    "other-position": N_("a block is shared at different positions (or KV-cache groups)"),
    "partial-block": N_("a block is shared before it is full (only full blocks are prefix-cached)"),
    "twice-in-request": N_("the same block id appears twice in one request"),
    "out-of-range": N_("a block id lies outside [0, num_gpu_blocks)"),
    "split-mismatch": N_("kernel-block ids do not map back to whole scheduler blocks"),
}


@dataclass(frozen=True, eq=False)
class Violation:
    """One broken block-table invariant: what kind, at which step and audit line, whose
    requests and blocks."""

    kind: str
    step: int
    line: int
    requests: tuple[str, ...]
    blocks: tuple[int, ...]
    detail: str

    def as_dict(self) -> dict:
        return {"kind": self.kind, "step": self.step, "line": self.line,
                "requests": list(self.requests), "blocks": list(self.blocks),
                "detail": self.detail}


@dataclass(eq=False)
class AuditResult:
    """What one replay found: counts, the first violations of each kind, unreadable lines."""

    header: Header | None = None
    engines: set[str] = field(default_factory=set)
    steps: int = 0
    requests: int = 0
    max_live: int = 0
    shares: int = 0
    headers: int = 0
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[Violation]] = field(default_factory=dict)
    blocks_by_kind: dict[str, set[int]] = field(default_factory=dict)
    reqs_by_kind: dict[str, set[str]] = field(default_factory=dict)
    bad_lines: int = 0
    bad_examples: list[tuple[int, str]] = field(default_factory=list)
    truncated_at: int | None = None
    disabled: list[tuple[int, str]] = field(default_factory=list)
    unchecked_groups: set[str] = field(default_factory=set)
    partial_requests: int = 0

    def add(self, v: Violation) -> None:
        self.counts[v.kind] += 1
        ex = self.examples.setdefault(v.kind, [])
        if len(ex) < MAX_EXAMPLES:
            ex.append(v)
        bk = self.blocks_by_kind.setdefault(v.kind, set())
        if len(bk) < 100_000:
            bk.update(v.blocks)
        rk = self.reqs_by_kind.setdefault(v.kind, set())
        if len(rk) < 100_000:
            rk.update(v.requests)


def _is_full_attention(kind: str) -> bool:
    return not kind or "Full" in kind or "MLA" in kind


class Replay:
    """Rebuilds live V1 tables line by line; V0 lines are checked as per-step snapshots."""

    def __init__(self) -> None:
        self.r = AuditResult()
        self._seen: set[str] = set()
        self._v0_seen: set[tuple] = set()
        self._reset(None)

    def _reset(self, hdr: Header | None) -> None:
        self.hdr = hdr
        self.tables: dict[str, list[list[int]]] = {}
        self.partial: set[str] = set()  # first seen appending: its earlier blocks unknown
        self.parked: set[str] = set()  # unscheduled, when frees are not tracked
        self.owners: dict[int, dict[str, list[tuple[int, int | None]]]] = {}  # block → holders
        self.tokens: dict[str, int] = {}
        self._step_hits: set[tuple[int, str]] = set()  # (block, request) hits in this step
        self._nblocks = hdr.num_gpu_blocks if hdr else None
        self._bs = hdr.block_size if hdr and hdr.block_size else None
        self._prefix = bool(hdr and hdr.prefix_caching)
        groups = hdr.groups if hdr else ()
        self.checked = [_is_full_attention(g) for g in groups]
        for g in groups:
            if not _is_full_attention(g):
                self.r.unchecked_groups.add(g)

    # -- helpers ----------------------------------------------------------------------------
    @property
    def split(self) -> int:
        return self.hdr.split if self.hdr else 1

    @property
    def block_size(self) -> int | None:
        return self.hdr.block_size if self.hdr and self.hdr.block_size else None

    def _group_checked(self, g: int) -> bool:
        return self.checked[g] if g < len(self.checked) else True

    def _physical(self, ids: tuple[int, ...], req: str, step: StepV1) -> list[int]:
        r = self.split
        if r == 1:
            return list(ids)
        out = []
        for i in range(0, len(ids), r):
            chunk = ids[i:i + r]
            p = chunk[0] // r
            if chunk[0] % r or list(chunk) != list(range(p * r, p * r + len(chunk))):
                self.r.add(Violation("split-mismatch", step.step, step.line, (req,),
                                     tuple(chunk),
                                     T("kernel ids {ids} of {req} are not {r} consecutive ids "
                                       "of one block (split {r})", ids=list(chunk), req=req,
                                       r=r)))
            out.append(p)
        return out

    # -- ownership --------------------------------------------------------------------------
    def _add(self, req: str, g: int, idx: int | None, b: int, fresh: bool, st: StepV1) -> None:
        n = self._nblocks
        if b < 0 or (n is not None and b >= n):
            self.r.add(Violation("out-of-range", st.step, st.line, (req,), (b,),
                                 T("block {b} of {req} (group {g}) is outside [0, {n})", b=b,
                                   req=req, g=g, n=n)))
            return
        if b == 0 or (g and not self._group_checked(g)):
            return  # the null block; or a group whose frees the log cannot see
        if not fresh:
            self._step_hits.add((b, req))
        holders = self.owners.get(b)
        if holders is None:
            self.owners[b] = {req: [(g, idx)]}
            return
        kind = None
        mine = holders.get(req)
        if mine:
            kind, other = "twice-in-request", (req, *mine[0])
        else:
            r2, pos = next(iter(holders.items()))
            other = (r2, *pos[0])
            g2, i2 = pos[0]
            if fresh and not self._hit_in_step_of_full_fresh(b, holders, req, idx):
                kind = "fresh-block-held"
            elif fresh:
                pass  # allocated and hit within one step (below)
            elif not self._prefix:
                kind = "no-prefix-cache"
            elif g2 != g or (idx is not None and i2 is not None and i2 != idx):
                kind = "other-position"
            elif idx is not None and self._bs:
                # a cached block is full in whoever wrote it: look for one such holder
                full_somewhere = False
                bs, tokens = self._bs, self.tokens
                for k, r3 in enumerate(holders):
                    t = tokens.get(r3)
                    if t is None or t // bs > idx or k >= 8:
                        full_somewhere = True
                        break
                if not full_somewhere:
                    kind = "partial-block"
        if kind is None:
            self.r.shares += 1
        else:
            r2, g2, i2 = other
            def where(r_: str, g_: int, i_: int | None) -> str:
                return T("{req} (group {group}, index {index})", req=r_, group=g_,
                         index="?" if i_ is None else i_)
            detail = (T("block {b} held by {a} was handed to {c}", b=b, a=where(r2, g2, i2),
                        c=where(req, g, idx))
                      if kind == "fresh-block-held" else
                      T("block {b}: {a} and {c}", b=b, a=where(r2, g2, i2), c=where(req, g, idx)))
            self.r.add(Violation(kind, st.step, st.line, tuple(dict.fromkeys((r2, req))), (b,),
                                 detail))
        holders.setdefault(req, []).append((g, idx))

    def _hit_in_step_of_full_fresh(self, b: int, holders: dict, req: str, idx: int | None) -> bool:
        """A step's log does not keep the order its requests were scheduled in: vLLM 0.32
        schedules a resumed (preempted) request, allocates it a fresh block, hashes it at once
        because its tokens are known, and a new request later in the same step gets that block
        as a prefix-cache hit (seen on the real CPU engine, tests/corpus/realvllm). When every
        other holder took ``b`` as a hit in this very step and ``b`` is full in ``req``, it is
        that share, not a duplicate."""
        if not self._prefix or idx is None or not self._bs:
            return False
        t = self.tokens.get(req)
        if t is None or t < (idx + 1) * self._bs:
            return False
        return all((b, r2) in self._step_hits for r2 in holders)

    def _drop(self, req: str) -> None:
        owners = self.owners
        for g, ids in enumerate(self.tables.get(req, ())):
            for b in ids:
                hs = owners.get(b)
                if not hs:
                    continue
                mine = hs.get(req)
                if not mine:
                    continue
                for k, pos in enumerate(mine):
                    if pos[0] == g:
                        del mine[k]
                        break
                if not mine:
                    del hs[req]
                    if not hs:
                        del owners[b]

    def _release(self, req: str) -> None:
        if req not in self.parked:
            self._drop(req)
        self.tables.pop(req, None)
        self.partial.discard(req)
        self.parked.discard(req)
        self.tokens.pop(req, None)

    def _set_table(self, req: str, groups: tuple[tuple[int, ...], ...], hit_blocks: int | None,
                   st: StepV1) -> None:
        """Replace a request's whole table; indices ≥ hit_blocks are fresh allocations."""
        if req in self.tables:
            if req not in self.parked:
                self._drop(req)
        self.parked.discard(req)
        self.partial.discard(req)
        table = []
        for g, ids in enumerate(groups):
            phys = self._physical(ids, req, st)
            table.append([])
            for i, b in enumerate(phys):
                self._add(req, g, i, b, hit_blocks is not None and i >= hit_blocks, st)
                table[g].append(b)
        self.tables[req] = table
        self._note(req)

    def _append(self, req: str, groups: tuple[tuple[int, ...], ...], st: StepV1) -> None:
        table = self.tables.get(req)
        if table is None:
            table = self.tables[req] = []
            self.partial.add(req)
            self.r.partial_requests += 1
            self._note(req)
        elif req in self.parked:  # back on the schedule: its old blocks count again
            self.parked.discard(req)
            for g, ids in enumerate(table):
                for i, b in enumerate(ids):
                    self._add(req, g, None if req in self.partial else i, b, False, st)
        while len(table) < len(groups):
            table.append([])
        for g, ids in enumerate(groups):
            for b in self._physical(ids, req, st):
                idx = None if req in self.partial else len(table[g])
                self._add(req, g, idx, b, True, st)
                table[g].append(b)

    def _note(self, req: str) -> None:
        if req not in self._seen:
            self._seen.add(req)
            self.r.requests += 1

    # -- records ----------------------------------------------------------------------------
    def feed(self, rec: Record) -> None:
        r = self.r
        if isinstance(rec, BadLine):
            r.bad_lines += 1
            if rec.truncated:
                r.truncated_at = rec.line
            if len(r.bad_examples) < 10:
                r.bad_examples.append((rec.line, rec.reason))
        elif isinstance(rec, Header):
            r.headers += 1
            r.header = r.header or rec
            r.engines.add(rec.engine)
            self._reset(rec)
        elif isinstance(rec, Disabled):
            r.disabled.append((rec.line, rec.reason))
        elif isinstance(rec, StepV1):
            r.engines.add("v1")
            self._step_v1(rec)
        elif isinstance(rec, StepV0):
            r.engines.add("v0")
            self._step_v0(rec)

    def _step_v1(self, st: StepV1) -> None:
        self.r.steps += 1
        self._step_hits = set()
        for req in (*st.finished, *st.freed):
            self._release(req)
        bs = self.block_size
        cols = st.cols
        tget = st.tokens.get
        tokens = self.tokens
        for n in st.new:  # tokens first: a share is judged against what is filled by now
            if n.computed is not None:
                tokens[n.req_id] = n.computed + tget(n.req_id, 0)
        tokens.update({rid: c + tget(rid, 0) for rid, c in zip(cols.ids, cols.computed)
                       if c is not None})
        for n in st.new:
            hits = (n.computed // bs if bs and n.computed is not None else None)
            self._set_table(n.req_id, n.blocks, hits, st)
        tables, parked = self.tables, self.parked
        for rid, resumed, blocks, computed in zip(*cols):
            if blocks is None:  # nothing new: only unknown or parked requests need work
                if rid not in tables:
                    tables[rid] = []
                    self.partial.add(rid)
                    self._note(rid)
                elif rid in parked:
                    self._append(rid, (), st)
            elif st.full:
                self._set_table(rid, blocks, None, st)
            elif resumed:
                hits = (computed // bs if bs and computed is not None else None)
                self._set_table(rid, blocks, hits, st)
            else:
                self._append(rid, blocks, st)
        if self.hdr is None or not self.hdr.freed_tracking:
            scheduled = {n.req_id for n in st.new} | set(st.cols.ids)
            for req in list(self.tables):
                if req not in scheduled and req not in self.parked:
                    self._drop(req)  # may be preempted: its blocks may be reused
                    self.parked.add(req)
        live = len(self.tables) - len(self.parked)
        self.r.max_live = max(self.r.max_live, live)

    def _step_v0(self, st: StepV0) -> None:
        """One V0 step: every scheduled sequence's full table (forks share by design)."""
        self.r.steps += 1
        hdr = self.hdr
        n = hdr.num_gpu_blocks if hdr else None
        owners: dict[int, tuple[str, int, int]] = {}
        live = 0
        for g in st.groups:
            self._note(g.request_id)
            for seq, table in g.tables.items():
                live += 1
                for i, b in enumerate(table):
                    if b < 0 or (n is not None and b >= n):
                        self._v0_add("out-of-range", st, (g.request_id,), b,
                                     T("block {b} of {req} seq {seq} is outside [0, {n})", b=b,
                                       req=g.request_id, seq=seq, n=n))
                        continue
                    prev = owners.get(b)
                    if prev is None:
                        owners[b] = (g.request_id, seq, i)
                        continue
                    r2, s2, i2 = prev
                    where = T("block {b}: {r2} seq {s2} index {i2} and {req} seq {seq} index {i}",
                              b=b, r2=r2, s2=s2, i2=i2, req=g.request_id, seq=seq, i=i)
                    if r2 == g.request_id and s2 == seq:
                        self._v0_add("twice-in-request", st, (r2,), b, where)
                    elif i2 != i:
                        self._v0_add("other-position", st, (r2, g.request_id), b, where)
                    elif r2 != g.request_id and not (hdr and hdr.prefix_caching):
                        self._v0_add("no-prefix-cache", st, (r2, g.request_id), b, where)
                    else:
                        self.r.shares += 1  # a fork of one seq group, or a prefix-cache hit
        self.r.max_live = max(self.r.max_live, live)

    def _v0_add(self, kind: str, st: StepV0, reqs: tuple[str, ...], b: int, detail: str) -> None:
        key = (kind, reqs, b)  # a V0 table is resent every step: report a clash once
        if key in self._v0_seen:
            return
        if len(self._v0_seen) < 1_000_000:
            self._v0_seen.add(key)
        self.r.add(Violation(kind, st.step, st.line, tuple(dict.fromkeys(reqs)), (b,), detail))


def replay(records: Iterable[Record]) -> AuditResult:
    rp = Replay()
    for rec in records:
        rp.feed(rec)
    return rp.r


def _lines(bad: list[tuple[int, str]]) -> str:
    return join("; ", (T("line {n}: {reason}", n=n, reason=why) for n, why in bad[:3]))


def findings_for(path: str, r: AuditResult) -> Iterator[Finding]:
    """Findings for one replayed log (pure; the check streams the file into ``replay``)."""
    if r.bad_lines:
        only_tail = r.bad_lines == 1 and r.truncated_at is not None
        tail = (T(" — the file ends mid-line (still being written, or the engine died)")
                if r.truncated_at else "")
        msg = T("{path}: {n} unreadable line(s) skipped ({examples}){tail}", path=path,
                n=r.bad_lines, examples=_lines(r.bad_examples), tail=tail)
        evidence = {"file": path, "bad_lines": r.bad_lines,
                    "examples": [{"line": n, "reason": why} for n, why in r.bad_examples]}
        if r.steps == 0 and r.headers == 0:
            yield Finding.error(T("{text}; no audit record could be read", text=msg), subject=path,
                                evidence=evidence, kb=KB)
            return
        yield (Finding.info if only_tail else Finding.warn)(msg, subject=path, evidence=evidence)
    for line, reason in r.disabled[:1]:
        yield Finding.warn(T("{path}: the audit plugin disabled itself at line {line}: {reason} "
                             "(steps after it were not recorded)", path=path, line=line,
                             reason=reason), subject=path,
                           evidence={"file": path, "line": line, "reason": reason}, kb=KB)
    if r.steps == 0:
        yield Finding.warn(T("{path}: no engine step recorded (header only: the engine served "
                             "nothing yet)", path=path) if r.headers else
                           T("{path}: no engine step recorded and no header: is the plugin "
                             "loaded? (VLLM_PLUGINS, ASCEND_DOCTOR_BLOCK_AUDIT in the "
                             "EngineCore's environment)", path=path),
                           subject=path, evidence={"file": path, "headers": r.headers}, kb=KB)
        return
    h = r.header
    context = {"file": path, "steps": r.steps, "requests": r.requests, "max_live": r.max_live,
               "engine": sorted(r.engines), "prefix_caching": h.prefix_caching if h else None,
               "num_gpu_blocks": h.num_gpu_blocks if h else None,
               "block_size": h.block_size if h else None, "split": h.split if h else 1,
               "vllm": h.vllm if h else None, "scheduler": h.scheduler if h else None}
    total = sum(r.counts.values())
    for kind in KINDS:
        count = r.counts.get(kind, 0)
        if not count:
            continue
        ex = r.examples[kind]
        first = ex[0]
        blocks = sorted(r.blocks_by_kind.get(kind, ()))
        reqs = r.reqs_by_kind.get(kind, set())
        yield Finding.fail(
            T("{kind}: {detail} at step {step}; {count} such event(s) over {reqs} request(s) and "
              "{blocks} block id(s) in {steps} steps", kind=T(KINDS[kind]), detail=first.detail,
              step=first.step, count=count, reqs=len(reqs), blocks=len(blocks), steps=r.steps),
            subject=path, kb=KB,
            evidence={**context, "kind": kind, "count": count, "violations_total": total,
                      "blocks": blocks[:MAX_EXAMPLES], "examples": [v.as_dict() for v in ex]})
    if not total:
        notes = []
        if h is None:
            notes.append(T("no header: id range and prefix-cache state unknown"))
        if r.unchecked_groups:
            notes.append(T("not checked for sharing: {groups}",
                           groups=", ".join(sorted(r.unchecked_groups))))
        if r.partial_requests:
            notes.append(T("{n} request(s) started before the log", n=r.partial_requests))
        yield Finding.passed(
            T("{path}: {steps} steps, {requests} requests (up to {live} live), {shares} "
              "prefix-cache share(s); no block id held twice{notes}", path=path, steps=r.steps,
              requests=r.requests, live=r.max_live, shares=r.shares,
              notes=T(" ({notes})", notes=join("; ", notes)) if notes else ""),
            subject=path, evidence={**context, "shares": r.shares})


@check("block_tables.invariants", title="KV block tables: no block held by two live requests",
       category=Category.KVCACHE, tags=("kv", "block_tables", "vllm"), timeout=300.0)
def block_tables(log: BlockAuditLog) -> Iterator[Finding]:
    """A 64 MiB log replays in well under a minute (bench/bench_block_audit.py): own timeout."""
    for path in log.paths:
        yield from findings_for(path, replay(log.records(path)))
