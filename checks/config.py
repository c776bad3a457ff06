"""Launch configuration of each vLLM server: its command line (and --config file) against the
effective config the engine reports in ``vllm:cache_config_info``.

Seed 000_93c34712512482cd.txt: block size 16 blew up the page tables (P99 240 ms vs 32),
``--max-num-batched-tokens`` above 16384 took P99 from 120 to 380 ms, and above 95 %
``--gpu-memory-utilization`` the NPU memory manager reclaims conservatively and stalls.
vllm-ascend overrides the block size (facts/vllm-internals.md §5, observed-wheels.md), so
the advice depends on the installed version.
"""

from __future__ import annotations

import re
from typing import Iterator

from packaging.version import InvalidVersion, Version

from ascend_doctor.errors import SourceError, SourceMissing, describe
from ascend_doctor.facts import FactFailed, FactStore
from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.npusmi import NpuSmi
from ascend_doctor.probes.packages import Packages
from ascend_doctor.probes.procs import ServiceEnv, ServiceProcess, ServiceProcesses
from ascend_doctor.probes.service import DavinciNodes, ServiceHttp, cache_config
from ascend_doctor.redact import redact_argv
from ascend_doctor.registry import check

BATCHED_TOKENS_MAX = 16384
GPU_UTIL_MAX = 0.95
_DSV4 = re.compile(r"deepseek[-_ ]?v4", re.IGNORECASE)


def _subject(sp: ServiceProcess) -> str:
    return f"pid {sp.pid}"


def _flag(sp: ServiceProcess, name: str) -> str | None:
    v = sp.args.get(name)
    return v if isinstance(v, str) else None


def _bool_flag(sp: ServiceProcess, name: str) -> bool | None:
    v = sp.args.get(name)
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.lower() in ("1", "true", "yes", "on")
    return None


def _version(pkgs: Packages | None, name: str) -> Version | None:
    raw = pkgs.version(name) if pkgs else None
    try:
        return Version(raw) if raw else None
    except InvalidVersion:
        return None


def _servers(procs: ServiceProcesses | None) -> tuple[ServiceProcess, ...]:
    return procs.servers if procs else ()


def predict_block_size(requested: int | None, va: Version | None, model: str,
                       prefix_caching: bool, chunked_prefill: bool) -> tuple[int | None, str]:
    """What vllm-ascend makes of ``--block-size`` (refresh_block_size / check_and_update_config)."""
    if va is None:
        return requested, T("vllm-ascend version unknown: assuming the flag is used as given")
    if va >= Version("0.23") and _DSV4.search(model or ""):
        if requested is None:
            return 128, T("vllm-ascend {va} defaults to 128", va=va)
        if requested in (32, 64, 128):
            return requested, T("vllm-ascend {va} accepts 32/64/128 for deepseek_v4", va=va)
        return 32, T("vllm-ascend {va} accepts only 32/64/128 for deepseek_v4 and falls back "
                     "to 32", va=va)
    if requested is None:
        return 128, T("vllm-ascend {va} defaults to 128", va=va)
    if va >= Version("0.11"):
        if requested != 128 and (prefix_caching or chunked_prefill):
            on = (T("prefix caching and chunked prefill") if prefix_caching and chunked_prefill
                  else T("prefix caching") if prefix_caching else T("chunked prefill"))
            return 128, T("vllm-ascend {va} forces 128 when {on} is on", va=va, on=on)
        return requested, T("vllm-ascend {va} keeps {requested} (prefix caching and chunked "
                            "prefill off)", va=va, requested=requested)
    if va >= Version("0.9") and prefix_caching and requested != 128:
        return 128, T("vllm-ascend {va} forces 128 when prefix caching is on", va=va)
    if prefix_caching and requested != 128:
        return None, T("vllm-ascend {va} refuses to start with prefix caching and block size "
                       "!= 128", va=va)
    return requested, T("vllm-ascend {va} keeps {requested}", va=va, requested=requested)


def _int(v: object) -> int | None:
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return None


def _float(v: object) -> float | None:
    try:
        return float(str(v))
    except (TypeError, ValueError):
        return None


@check("config.launch", title="vLLM server instances, their users, ports, workers and arguments",
       category=Category.CONFIG, tags=("service", "config"))
def launch(procs: ServiceProcesses) -> Iterator[Finding]:
    if not procs.servers:
        yield Finding.skip(T("no vLLM server process (vllm serve / "
                             "vllm.entrypoints.openai.api_server)"))
        return
    for sp in procs.servers:
        ev = {"pid": sp.pid, "user": sp.user, "interpreter": sp.interpreter,
              "argv": redact_argv(list(sp.proc.cmdline)), "ports": list(sp.listen_ports),
              "side_ports": list(sp.side_ports),
              "workers": [{"pid": w.pid, "name": w.name} for w in sp.workers],
              "children": len(sp.children), "config_file": sp.config_file,
              "visible_devices": sp.visible_devices}
        if sp.config_error:
            yield Finding.error(T("cannot use the --config file {file}: {reason}",
                                  file=sp.config_file, reason=sp.config_error),
                                subject=_subject(sp), evidence=ev)
        ports = ", ".join(str(p) for p in sp.listen_ports) or T("no listening port seen")
        yield Finding.info(T("vLLM server pid {pid} (user {user}, {python}) on {ports}, {n} "
                             "EngineCore/worker processes, model {model}", pid=sp.pid,
                             user=sp.user or "?", python=sp.interpreter or "?", ports=ports,
                             n=len(sp.workers), model=sp.model_name or "?"),
                           subject=_subject(sp), evidence=ev)
    if len(procs.servers) > 1:
        yield Finding.info(T("{n} vLLM servers on this host: {pids}", n=len(procs.servers),
                             pids=", ".join(f"pid {s.pid}" for s in procs.servers)),
                           evidence={"pids": [s.pid for s in procs.servers]})


@check("config.block-size", title="KV block size: requested, effective, and TLB pressure",
       category=Category.CONFIG, tags=("service", "config", "tlb"), timeout=15.0)
def block_size(procs: ServiceProcesses | None, http: ServiceHttp | None,
               facts: FactStore) -> Iterator[Finding]:
    """The package listing only sharpens the prediction (vllm-ascend's version): asked for
    here, tolerantly, so a listing that failed or timed out never makes this check error."""
    try:
        pkgs: Packages | None = facts.get(Packages)
        unknown = None
    except (SourceMissing, SourceError, FactFailed) as exc:
        pkgs, unknown = None, describe(exc)
    yield from block_size_from(procs, http, pkgs, unknown)


def block_size_from(procs: ServiceProcesses | None, http: ServiceHttp | None,
                    pkgs: Packages | None, unknown: str | None = None) -> Iterator[Finding]:
    """config.block-size on given facts; ``unknown`` says why the packages are missing."""
    cc = cache_config(http)
    servers = _servers(procs)
    if not servers and not cc:
        yield Finding.skip(T("no vLLM server process and no vllm:cache_config_info in /metrics"))
        return
    va = _version(pkgs, "vllm-ascend")
    targets: list[ServiceProcess | None] = list(servers) or [None]
    for i, sp in enumerate(targets):
        subj = _subject(sp) if sp else (http.base_url if http else "service")
        requested = _int(_flag(sp, "block-size")) if sp else None
        model = sp.model_name if sp else ""
        pc = _bool_flag(sp, "enable-prefix-caching") if sp else None
        cp = _bool_flag(sp, "enable-chunked-prefill") if sp else None
        pc = True if pc is None else pc  # V1 defaults for generative models
        cp = True if cp is None else cp
        predicted, why = predict_block_size(requested, va, model, pc, cp)
        effective = _int(cc.get("block_size")) if (cc and i == 0) else None
        source = "vllm:cache_config_info" if effective is not None else T("predicted")
        runs = effective if effective is not None else predicted
        ev = {"requested": requested, "effective": effective, "predicted": predicted,
              "reason": why, "vllm_ascend": str(va) if va else None, "model": model,
              "prefix_caching": pc, "chunked_prefill": cp}
        if unknown:
            why = T("{why}; vllm-ascend version unknown ({reason})", why=why, reason=unknown)
            ev["packages_error"] = unknown
        dsv4 = bool(_DSV4.search(model or ""))
        good = 32 if (dsv4 or va is None or va < Version("0.11")) else 128
        if runs == 16:
            yield Finding.warn(
                T("block size 16 ({source}): 16-token KV pages multiply page-table entries; on "
                  "a 910B host P99 was 240 ms at 16 against 215 ms at 32 (TLB pressure)",
                  source=source),
                subject=subj, evidence=ev, kb="ASC-CFG-001", fix="service.launch-flags",
                fix_params={"pid": sp.pid if sp else None, "set": [["--block-size", str(good)]]})
        if requested is not None and runs is not None and requested != runs:
            yield Finding.warn(
                T("--block-size {requested} requested but the engine runs {runs} ({source}; "
                  "{why}); the flag is ignored", requested=requested, runs=runs, source=source,
                  why=why), subject=subj, evidence=ev, kb="ASC-CFG-002",
                fix="service.launch-flags",
                fix_params={"pid": sp.pid if sp else None, "set": [["--block-size", str(runs)]]})
        elif runs is None and requested is not None:
            yield Finding.fail(T("--block-size {requested}: {why}", requested=requested, why=why),
                               subject=subj, evidence=ev,
                               kb="ASC-CFG-002", fix="service.launch-flags",
                               fix_params={"pid": sp.pid if sp else None,
                                           "set": [["--block-size", "128"]]})
        elif runs != 16:
            yield Finding.passed(T("block size {runs} ({source}; {why})",
                                   runs=runs if runs is not None else T("default"),
                                   source=source, why=why), subject=subj, evidence=ev)


@check("config.batched-tokens", title="--max-num-batched-tokens within the latency budget",
       category=Category.CONFIG, tags=("service", "config"))
def batched_tokens(procs: ServiceProcesses) -> Iterator[Finding]:
    if not procs.servers:
        yield Finding.skip(T("no vLLM server process"))
        return
    for sp in procs.servers:
        n = _int(_flag(sp, "max-num-batched-tokens"))
        ev = {"max_num_batched": n, "limit": BATCHED_TOKENS_MAX}  # "TOKEN" keys get redacted
        if n is not None and n > BATCHED_TOKENS_MAX:
            yield Finding.warn(T("--max-num-batched-tokens {n} > {limit}: on a 910B host P99 rose "
                                 "from 120 ms to 380 ms past 16384 (long batches, cache misses); "
                                 "8192 balanced throughput and latency", n=n,
                                 limit=BATCHED_TOKENS_MAX),
                               subject=_subject(sp), evidence=ev, kb="ASC-CFG-003",
                               fix="service.launch-flags",
                               fix_params={"pid": sp.pid,
                                           "set": [["--max-num-batched-tokens", "8192"]]})
        else:
            yield Finding.passed(T("--max-num-batched-tokens {n}",
                                   n=n if n is not None else T("default")),
                                 subject=_subject(sp), evidence=ev)


def _devices(sp: ServiceProcess, all_devices: tuple[str, ...]) -> tuple[str, ...]:
    if sp.visible_devices is None or not sp.visible_devices.strip():
        return all_devices
    return tuple(d.strip() for d in sp.visible_devices.split(",") if d.strip())


def _world_size(sp: ServiceProcess) -> int:
    """NPUs one server drives on this node: TP × PP × local data-parallel ranks."""
    tp = _int(_flag(sp, "tensor-parallel-size")) or 1
    pp = _int(_flag(sp, "pipeline-parallel-size")) or 1
    dp = (_int(_flag(sp, "data-parallel-size-local"))
          or _int(_flag(sp, "data-parallel-size")) or 1)
    return tp * pp * dp


def _used_devices(sp: ServiceProcess, all_devs: tuple[str, ...],
                  smi: NpuSmi | None) -> tuple[tuple[str, ...], str]:
    """The NPUs a server really uses, and how that was learnt.

    npu-smi's process table names them when it lists a process of the server's tree (its
    workers hold the memory). Otherwise the server takes the first TP×PP×DP of the NPUs it
    sees: ASCEND_RT_VISIBLE_DEVICES, or every /dev/davinci* node when that is unset — so two
    TP-1 servers without the variable share NPU 0, not all eight.
    """
    if smi is not None and smi.info is not None and smi.info.processes:
        tree = {sp.pid, *(c.pid for c in sp.children)}
        held = sorted({p.npu for p in smi.info.processes if p.pid in tree})
        if held:
            return tuple(str(n) for n in held), "npu-smi"
    seen = _devices(sp, all_devs)
    src = "ASCEND_RT_VISIBLE_DEVICES" if seen is not all_devs else "/dev/davinci*"
    if seen == ("all",):
        return seen, "unknown"
    return seen[:_world_size(sp)], src


def _dev_key(dev: str) -> tuple[int, str]:
    return (int(dev), "") if dev.isdigit() else (1 << 30, dev)


@check("config.gpu-memory", title="--gpu-memory-utilization per instance and per shared NPU",
       category=Category.CONFIG, tags=("service", "config", "memory"), timeout=45.0)
def gpu_memory(procs: ServiceProcesses, http: ServiceHttp | None,
               nodes: DavinciNodes | None, smi: NpuSmi | None = None) -> Iterator[Finding]:
    if not procs.servers:
        yield Finding.skip(T("no vLLM server process"))
        return
    cc = cache_config(http)
    all_devs = tuple(n.rsplit("davinci", 1)[-1] for n in nodes.nodes) if nodes else ("all",)
    per_device: dict[str, list[tuple[int, float]]] = {}
    sources: dict[int, str] = {}
    unknown: list[int] = []
    for i, sp in enumerate(procs.servers):
        util = _float(_flag(sp, "gpu-memory-utilization"))
        if util is None and i == 0 and cc.get("gpu_memory_utilization"):
            util = _float(cc.get("gpu_memory_utilization"))
        util = 0.9 if util is None else util
        used, how = _used_devices(sp, all_devs, smi)
        if (len(procs.servers) > 1 and how != "npu-smi" and sp.visible_devices is None
                and sp.env_error):
            unknown.append(sp.pid)  # its devices are unknown: not "every NPU, shared"
        else:
            sources[sp.pid] = how
            for d in used:
                per_device.setdefault(d, []).append((sp.pid, util))
        ev = {"gpu_memory_utilization": util, "limit": GPU_UTIL_MAX}
        if util > GPU_UTIL_MAX:
            yield Finding.warn(T("--gpu-memory-utilization {util} > {limit}: above 95 % the NPU "
                                 "memory manager reclaims conservatively and inference stalls; "
                                 "0.9 is a stable value", util=f"{util:g}",
                                 limit=f"{GPU_UTIL_MAX:g}"), subject=_subject(sp), evidence=ev,
                               kb="ASC-CFG-004", fix="service.launch-flags",
                               fix_params={"pid": sp.pid, "set": [["--gpu-memory-utilization", "0.9"]]})
        else:
            yield Finding.passed(f"--gpu-memory-utilization {util:g}", subject=_subject(sp),
                                 evidence=ev)
    for dev, users in sorted(per_device.items(), key=lambda kv: _dev_key(kv[0])):
        total = sum(u for _, u in users)
        if len(users) > 1 and total > 1.0:
            share = round(0.95 / len(users), 2)
            yield Finding.fail(T("NPU {dev} is shared by {n} vLLM servers whose "
                                 "--gpu-memory-utilization add up to {total} > 1.0 (each is a "
                                 "share of the whole device)", dev=dev, n=len(users),
                                 total=f"{total:.2f}"),
                               subject=f"NPU {dev}",
                               evidence={"instances": [{"pid": p, "utilization": u,
                                                        "devices_from": sources[p]}
                                                       for p, u in users]},
                               kb="ASC-CFG-005", fix="service.launch-flags",
                               fix_params={"pids": [p for p, _ in users],
                                           "set": [["--gpu-memory-utilization", str(share)]]})
    if unknown:
        yield Finding.info(T("NPU sharing not judged for {pids}: its environment "
                             "(ASCEND_RT_VISIBLE_DEVICES) could not be read, so which NPUs it "
                             "uses is unknown", pids=", ".join(f"pid {p}" for p in unknown)),
                           subject=", ".join(
                               f"pid {p}" for p in unknown),
                           evidence={"pids": unknown, "reasons": {
                               sp.pid: sp.env_error for sp in procs.servers if sp.pid in unknown}})


@check("config.parallel", title="Tensor parallelism, visible NPUs, device and collective backend",
       category=Category.CONFIG, tags=("service", "config"))
def parallel(procs: ServiceProcesses, nodes: DavinciNodes | None) -> Iterator[Finding]:
    if not procs.servers:
        yield Finding.skip(T("no vLLM server process"))
        return
    all_devs = tuple(n.rsplit("davinci", 1)[-1] for n in nodes.nodes) if nodes else ()
    for sp in procs.servers:
        subj = _subject(sp)
        tp = _int(_flag(sp, "tensor-parallel-size")) or 1
        pp = _int(_flag(sp, "pipeline-parallel-size")) or 1
        visible = _devices(sp, all_devs)
        src = ("ASCEND_RT_VISIBLE_DEVICES" if sp.visible_devices else
               "/dev/davinci* nodes" if all_devs else None)
        ev = {"tensor_parallel_size": tp, "pipeline_parallel_size": pp,
              "visible": list(visible), "visible_source": src}
        bad = False
        if src is not None and tp * pp > len(visible):
            bad = True
            yield Finding.fail(T("--tensor-parallel-size {tp} × pipeline {pp} needs {n} NPUs but "
                                 "only {k} are visible ({source}: {visible})", tp=tp, pp=pp,
                                 n=tp * pp, k=len(visible), source=src,
                                 visible=",".join(visible)),
                               subject=subj, evidence=ev, kb="ASC-CFG-006",
                               fix="service.launch-flags",
                               fix_params={"pid": sp.pid,
                                           "set": [["--tensor-parallel-size", str(len(visible))]]})
        elif src is not None and tp * pp < len(visible) and len(procs.servers) == 1:
            yield Finding.info(T("TP {tp} × PP {pp} uses {n} of {k} visible NPUs", tp=tp, pp=pp,
                                 n=tp * pp, k=len(visible)),
                               subject=subj, evidence=ev)
        device = _flag(sp, "device")
        if device and device.lower().startswith("cuda"):
            bad = True
            yield Finding.fail(T("--device {device}: the NPU is not a CUDA device; the CUDA paths "
                                 "fail (\"CUDA out of memory\" / no CUDA GPUs) — drop the flag, "
                                 "vllm-ascend's platform plugin selects npu", device=device),
                               subject=subj,
                               evidence={"device": device}, kb="ASC-CFG-009",
                               fix="service.launch-flags",
                               fix_params={"pid": sp.pid, "remove": ["--device"]})
        backend = _flag(sp, "distributed-backend")
        exec_backend = _flag(sp, "distributed-executor-backend")
        if backend is not None or (exec_backend or "").lower() == "nccl":
            b = backend or exec_backend or ""
            bad = True
            status = Finding.fail if b.lower() == "nccl" else Finding.warn
            flag = "distributed-backend" if backend is not None else "distributed-executor-backend"
            yield status(T("--{flag} {backend}: NCCL is CUDA-only; on Ascend collectives go "
                           "through HCCL. Remove it.", flag=flag, backend=b)
                         if b.lower() == "nccl" else
                         T("--{flag} {backend}: vLLM has no such flag (it is "
                           "--distributed-executor-backend mp|ray); the collective backend is "
                           "HCCL on its own. Remove it.", flag=flag, backend=b),
                         subject=subj, evidence={"backend": b,
                                                                 "executor_backend": exec_backend},
                         kb="ASC-CFG-007", fix="service.launch-flags",
                         fix_params={"pid": sp.pid, "remove": ["--distributed-backend"]})
        if not bad:
            where = (T("on {n} visible NPUs", n=len(visible)) if src is not None else
                     T("(no ASCEND_RT_VISIBLE_DEVICES and no /dev/davinci* nodes to compare "
                       "with)"))
            yield Finding.passed(T("TP {tp} × PP {pp} {where}", tp=tp, pp=pp, where=where),
                                 subject=subj, evidence=ev)


@check("config.prefix-caching", title="Prefix caching and chunked prefill as the engine runs them",
       category=Category.CONFIG, tags=("service", "config"), timeout=15.0)
def prefix_caching(procs: ServiceProcesses | None, http: ServiceHttp | None) -> Iterator[Finding]:
    cc = cache_config(http)
    servers = _servers(procs)
    if not servers and not cc:
        yield Finding.skip(T("no vLLM server process and no vllm:cache_config_info"))
        return
    sp = servers[0] if servers else None
    flag = _bool_flag(sp, "enable-prefix-caching") if sp else None
    eff = cc.get("enable_prefix_caching")
    state = (eff == "True") if eff is not None else (True if flag is None else flag)
    src = "vllm:cache_config_info" if eff is not None else (
        T("command line") if flag is not None else T("vLLM V1 default"))
    hit = None
    if http is not None and http.scrapes:
        last = http.scrapes[-1]
        q = last.value("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
        h = last.value("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
        hit = (h / q) if (q and h is not None) else None
    ev = {"flag": flag, "effective": eff, "source": src,
          "hash_algo": cc.get("prefix_caching_hash_algo"), "hit_rate": hit}
    rate = (T(", hit rate {rate} % of queried tokens", rate=f"{hit * 100:.1f}")
            if hit is not None else "")
    yield Finding.info(T("prefix caching on ({source}){rate}", source=src, rate=rate) if state
                       else T("prefix caching off ({source}){rate}; every request recomputes "
                              "its prompt (turned off, e.g., for 128K contexts)", source=src,
                              rate=rate),
                       subject=_subject(sp) if sp else "service", evidence=ev, kb="ASC-CFG-008")


@check("config.env-knobs", title="Allocator and collective-communication variables of the service",
       category=Category.CONFIG, tags=("service", "config", "env"))
def env_knobs(senv: ServiceEnv) -> Iterator[Finding]:
    """Names and booleans only: environment values never reach a message."""
    env = senv.env
    subj = f"pid {senv.pid}" if senv.pid else "environment"
    both = "PYTORCH_NPU_ALLOC_CONF" in env and "PYTORCH_ALLOC_CONF" in env
    nccl = sorted(k for k in env if k.startswith("NCCL_"))
    hccl = sorted(k for k in env if k.startswith("HCCL_"))
    expandable = "expandable_segments:true" in (env.get("PYTORCH_NPU_ALLOC_CONF", "")
                                                 + env.get("PYTORCH_ALLOC_CONF", "")).lower()
    ev = {"source": senv.source, "alloc_conf_vars": [k for k in ("PYTORCH_NPU_ALLOC_CONF",
                                                                 "PYTORCH_ALLOC_CONF") if k in env],
          "expandable_segments": expandable, "nccl_vars": nccl, "hccl_vars": hccl}
    bad = False
    if both:
        bad = True
        yield Finding.fail(T("both PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF are set in "
                             "{source}: torch_npu 26.2+ with PyTorch >= 2.10 treats them as "
                             "aliases and exits when both are set", source=senv.source),
                           subject=subj, evidence=ev,
                           kb="ASC-PERF-004", fix="service.env",
                           fix_params={"unset": ["PYTORCH_ALLOC_CONF"]})
    if nccl:
        bad = True
        yield Finding.warn(T("{names} set in {source}: NCCL is CUDA-only, these have no effect "
                             "on Ascend (the HCCL_* variables do)", names=", ".join(nccl),
                             source=senv.source), subject=subj,
                           evidence=ev, kb="ASC-CFG-007")
    if not bad:
        yield Finding.passed(T("allocator: expandable segments on; {n} HCCL_* variables "
                               "({source})", n=len(hccl), source=senv.source) if expandable
                             else T("allocator: expandable segments off; {n} HCCL_* variables "
                                    "({source})", n=len(hccl), source=senv.source),
                             subject=subj,
                             evidence=ev)
