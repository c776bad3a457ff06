"""A miniature vLLM V1 scheduler whose objects carry vLLM 0.11's attribute names.

Used by the demo scenario, the tests and bench/bench_block_audit.py to drive the *real*
plugin code (``install_v1`` wraps ``schedule`` and ``kv_cache_manager.free`` exactly as in
an EngineCore) without vLLM. It follows vLLM's rules where they matter for block ids
(facts: vllm-internals §3.2): block 0 is the null block; a pool with an LRU free queue;
prefix-cache hits on full blocks only (at most ``num_tokens - 1`` tokens), chained by the
parent hash; chunked prefill under a token budget; preemption of the last running request
when the pool is empty (its blocks freed, ``num_computed_tokens`` reset), resumed later
with its whole new block list (``resumed_from_preemption``); finished requests freed in
reverse order. ``inject`` corrupts the allocator on purpose (a block handed out twice,
an id past the pool, an id repeated in one request) to produce the seed's symptom.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

from dataclasses import dataclass, field


# -- stand-ins with vLLM 0.11 names (vllm/v1/core/sched/output.py) --------------------------
@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list[int]
    mm_features: list[Any]
    sampling_params: Any
    pooling_params: Any
    block_ids: tuple[list[int], ...]
    num_computed_tokens: int
    lora_request: Any = None


@dataclass
class CachedRequestData:
    req_ids: list[str]
    resumed_from_preemption: list[bool]
    new_token_ids: list[list[int]]
    new_block_ids: list[tuple[list[int], ...] | None]
    num_computed_tokens: list[int]


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    scheduled_encoder_inputs: dict[str, list[int]]
    num_common_prefix_blocks: list[int]
    finished_req_ids: set[str]
    free_encoder_mm_hashes: list[str] = field(default_factory=list)


class FullAttentionSpec:  # the class name is what the plugin records per group
    def __init__(self, block_size: int) -> None:
        self.block_size = block_size


@dataclass
class KVCacheGroupSpec:
    layer_names: list[str]
    kv_cache_spec: Any


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_tensors: list[Any]
    kv_cache_groups: list[KVCacheGroupSpec]


@dataclass
class CacheConfig:
    block_size: int
    enable_prefix_caching: bool
    num_gpu_blocks: int
    gpu_memory_utilization: float = 0.9


@dataclass
class Request:
    request_id: str
    prompt: list[int]
    max_tokens: int
    output: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    blocks: list[int] = field(default_factory=list)
    preempted: bool = False
    hashes: list[int] = field(default_factory=list)  # chained hashes of full blocks

    @property
    def num_tokens(self) -> int:
        return len(self.prompt) + len(self.output)


class BlockPool:
    def __init__(self, num_blocks: int, caching: bool) -> None:
        self.num_blocks = num_blocks
        self.caching = caching
        self.free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(1, num_blocks))
        self.ref: dict[int, int] = {}
        self.hash_of: dict[int, int] = {}
        self.by_hash: dict[int, int] = {}

    def take(self, n: int) -> list[int]:
        out = []
        for _ in range(n):
            b, _ = self.free.popitem(last=False)
            h = self.hash_of.pop(b, None)  # evict a stale cached hash
            if h is not None and self.by_hash.get(h) == b:
                del self.by_hash[h]
            self.ref[b] = 1
            out.append(b)
        return out

    def touch(self, b: int) -> None:
        if self.ref.get(b, 0) == 0:
            self.free.pop(b, None)
        self.ref[b] = self.ref.get(b, 0) + 1

    def release(self, blocks: list[int]) -> None:
        for b in reversed(blocks):  # tail blocks are evicted first
            if b == 0 or b >= self.num_blocks:
                continue
            self.ref[b] = self.ref.get(b, 1) - 1
            if self.ref[b] <= 0:
                self.ref[b] = 0
                self.free[b] = None


class KVCacheManager:
    def __init__(self, sched: "MiniScheduler") -> None:
        self.s = sched

    @property
    def block_pool(self) -> BlockPool:  # where vLLM's manager keeps its pool (audit's layout check)
        return self.s.pool

    def get_block_ids(self, req_id: str) -> tuple[list[int], ...]:
        return (list(self.s.requests[req_id].blocks),)

    def free(self, request: Request) -> None:
        self.s.pool.release(request.blocks)
        request.blocks = []


class MiniScheduler:
    """``schedule()`` → SchedulerOutput; ``update_from_output()`` advances the requests."""

    def __init__(self, *, num_blocks: int = 512, block_size: int = 16, prefix_caching: bool = True,
                 max_num_seqs: int = 32, token_budget: int = 1024, seed: int = 7,
                 inject: dict[int, str] | None = None) -> None:
        self.cache_config = CacheConfig(block_size, prefix_caching, num_blocks)
        self.kv_cache_config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(
            ["model.layers.0.self_attn.attn"], FullAttentionSpec(block_size))])
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.token_budget = token_budget
        self.pool = BlockPool(num_blocks, prefix_caching)
        self.kv_cache_manager = KVCacheManager(self)
        self.requests: dict[str, Request] = {}
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.finished: set[str] = set()
        self.rng = random.Random(seed)
        self.inject = dict(inject or {})
        self.step_no = 0
        self.preemptions = 0
        self.injected: list[tuple[int, str, str, int]] = []  # (step, kind, req, block)

    def add_request(self, req_id: str, prompt: list[int], max_tokens: int) -> None:
        r = Request(req_id, list(prompt), max_tokens)
        self.requests[req_id] = r
        self.waiting.append(r)

    # -- allocation ---------------------------------------------------------------------
    def _hashes(self, r: Request, upto_blocks: int) -> list[int]:
        hs, bs, toks = r.hashes, self.block_size, None
        while len(hs) < upto_blocks:  # a full block's tokens never change: extend only
            toks = toks if toks is not None else r.prompt + r.output
            i = len(hs)
            hs.append(hash((hs[-1] if hs else 0, tuple(toks[i * bs:(i + 1) * bs]))))
        return hs[:upto_blocks]

    def _hit(self, r: Request) -> list[int]:
        if not self.pool.caching:
            return []
        hits = []
        for h in self._hashes(r, (r.num_tokens - 1) // self.block_size):
            b = self.pool.by_hash.get(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def _alloc(self, r: Request, n: int) -> list[int] | None:
        if n <= 0:
            return []
        if len(self.pool.free) < n:
            return None
        got = self.pool.take(n)
        due = [k for k in self.inject if k <= self.step_no]  # at the first allocation from then
        kind = self.inject.get(min(due)) if due else None
        if kind and got:
            victim = next((o for o in self.running if o is not r and len(o.blocks) > 2), None)
            if kind == "duplicate" and victim is not None:
                got[-1] = victim.blocks[1]  # the allocator hands out a block still in use
                self.injected.append((self.step_no, kind, r.request_id, got[-1]))
                del self.inject[min(due)]
            elif kind == "out-of-range":
                got[-1] = self.pool.num_blocks + 3
                self.injected.append((self.step_no, kind, r.request_id, got[-1]))
                del self.inject[min(due)]
            elif kind == "twice" and r.blocks:
                got[-1] = r.blocks[-1]
                self.injected.append((self.step_no, kind, r.request_id, got[-1]))
                del self.inject[min(due)]
        return got

    def _preempt(self) -> Request:
        victim = self.running.pop()
        self.kv_cache_manager.free(victim)  # the call the plugin hooks
        victim.num_computed_tokens = 0
        victim.preempted = True
        self.waiting.insert(0, victim)
        self.preemptions += 1
        return victim

    # -- one step ----------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        self.step_no += 1
        bs, budget = self.block_size, self.token_budget
        tokens: dict[str, int] = {}
        cached_ids, resumed, new_ids, computed, new_tok = [], [], [], [], []
        new_reqs: list[NewRequestData] = []
        preempted_now = False
        i = 0
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            n = min(r.num_tokens - r.num_computed_tokens, budget)
            need = -(-(r.num_computed_tokens + n) // bs) - len(r.blocks)
            got = self._alloc(r, need)
            while got is None:
                victim = self._preempt()
                preempted_now = True
                if victim is r:
                    break
                got = self._alloc(r, need)
            if got is None:
                continue
            r.blocks += got
            tokens[r.request_id] = n
            budget -= n
            cached_ids.append(r.request_id)
            resumed.append(False)
            new_ids.append((got,) if got else None)
            computed.append(r.num_computed_tokens)
            new_tok.append([])
            i += 1
        while (self.waiting and budget > 0 and not preempted_now
               and len(self.running) < self.max_num_seqs):
            r = self.waiting[0]
            hits = self._hit(r)
            start = len(hits) * bs
            n = min(r.num_tokens - start, budget)
            need = -(-(start + n) // bs) - len(hits)
            revived = sum(1 for b in hits if self.pool.ref.get(b, 0) == 0)
            if len(self.pool.free) - revived < need:
                break
            for b in hits:
                self.pool.touch(b)
            got = self._alloc(r, need)
            self.waiting.pop(0)
            r.blocks = hits + got
            r.num_computed_tokens = start
            tokens[r.request_id] = n
            budget -= n
            self.running.append(r)
            if r.preempted:
                r.preempted = False
                cached_ids.append(r.request_id)
                resumed.append(True)
                new_ids.append((list(r.blocks),))
                computed.append(start)
                new_tok.append([])
            else:
                new_reqs.append(NewRequestData(r.request_id, r.prompt, [], None, None,
                                               (list(r.blocks),), start))
        out = SchedulerOutput(new_reqs, CachedRequestData(cached_ids, resumed, new_tok, new_ids,
                                                          computed),
                              tokens, sum(tokens.values()), {}, {}, [0], self.finished)
        self.finished = set()
        return out

    def update_from_output(self, out: SchedulerOutput) -> None:
        bs = self.block_size
        for rid, n in out.num_scheduled_tokens.items():
            r = self.requests[rid]
            r.num_computed_tokens += n
            if self.pool.caching:  # cache newly full blocks
                for i, h in enumerate(self._hashes(r, r.num_computed_tokens // bs)):
                    if i < len(r.blocks):
                        b = r.blocks[i]
                        if b not in self.pool.hash_of and 0 < b < self.pool.num_blocks:
                            self.pool.hash_of[b] = h
                            self.pool.by_hash.setdefault(h, b)
            if r.num_computed_tokens >= r.num_tokens:
                r.output.append(self.rng.randrange(1000, 30000))
        for r in list(self.running):
            if len(r.output) >= r.max_tokens:
                self.running.remove(r)
                self.kv_cache_manager.free(r)
                self.finished.add(r.request_id)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)


def workload(sched: MiniScheduler, n_requests: int, *, shared_prefix: int = 48,
             groups: int = 3, prompt: tuple[int, int] = (40, 400),
             max_tokens: tuple[int, int] = (8, 48), seed: int = 11) -> None:
    """Requests with a few shared system prompts (prefix-cache hits) and unique tails."""
    rng = random.Random(seed)
    systems = [[rng.randrange(100, 30000) for _ in range(shared_prefix)] for _ in range(groups)]
    for i in range(n_requests):
        tail = [rng.randrange(100, 30000) for _ in range(rng.randint(*prompt))]
        sched.add_request(f"cmpl-{i:04x}-0", systems[i % groups] + tail, rng.randint(*max_tokens))


def run(sched: MiniScheduler, max_steps: int = 100_000) -> int:
    """Drive ``schedule``/``update_from_output`` until idle; returns the steps taken."""
    steps = 0
    while sched.has_work() and steps < max_steps:
        out = sched.schedule()
        sched.update_from_output(out)
        steps += 1
    from .recorder import flush_all

    flush_all()  # the engine is idle: its last batch is written (the background flush)
    return steps
