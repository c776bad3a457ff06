"""Many bundles: what differs between a good node and a bad one.

Each bundle is read through the bounded bundle reader (``BundleHost.open``), replayed with
the options it was collected with, and run through the normal engine. One extra check,
added to this run's registry only, reads the facts a comparison needs (versions, the
service's environment, the ld.so.conf order, npu-smi health, and per device the RoCE
ports, ECC and firmware below the npu-smi table) from the same FactStore, so no
fact is computed twice. What is kept per node is a small ``NodeSummary``; the bundle itself
is dropped before the next is read, so a fleet of 1 000 bundles runs in bounded memory.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, Mapping

from .cancel import Cancelled
from .facts import FactStore
from .i18n import Msg, T
from .model import Category, Finding, Report, Status
from dataclasses import dataclass, field
from .registry import CheckSpec, Registry

SNAPSHOT_CHECK = "fleet.snapshot"
FAILING = ("fail", "warn", "error")
MAX_MESSAGE = 240
MAX_ENV = 256  # variables kept per node (a service environment rarely has more)
BUNDLE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
# (label, package name) in the order a reader scans them
PACKAGES = (("torch", "torch"), ("torch_npu", "torch-npu"), ("vllm", "vllm"),
            ("vllm_ascend", "vllm-ascend"), ("triton_ascend", "triton-ascend"))
VERSION_KEYS = ("kernel", "cann", "driver", "firmware", "npu_smi", "chip", "python") + tuple(
    k for k, _ in PACKAGES)
# The drift an operator needs first, in this order: the NPU driver is a kernel module, so the
# kernel leads; then what sits on it up to the serving stack; then the launch flags.
STACK = ("kernel", "driver", "firmware", "cann", "torch", "torch_npu", "vllm", "vllm_ascend")
STACK_FIELDS = tuple(f"version {k}" for k in STACK)


@dataclass
class NodeSummary:
    """What the comparison needs of one bundle (small: no blobs, no full findings)."""

    name: str  # the bundle's file name
    hostname: str = ""
    error: str = ""  # why the bundle was refused (then everything else is empty)
    checks: dict[str, str] = field(default_factory=dict)  # check id -> status
    messages: dict[str, str] = field(default_factory=dict)  # failing check -> first message
    kb: dict[str, list[str]] = field(default_factory=dict)  # failing check -> KB ids
    versions: dict[str, str | None] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the service's, redacted
    ldconf: list[str] = field(default_factory=list)  # search directories in ldconfig's order
    npu: dict[str, str] = field(default_factory=dict)  # "npu/chip" -> health
    # below the npu-smi table, per device: "roce 3 link" -> "DOWN", "ecc 0/1" -> "double 2",
    # "firmware npu 0" -> "7.1.0.7.220" (hw_facts)
    hw: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)  # the server's launch flags, redacted
    sysctls: dict[str, str] = field(default_factory=dict)  # the kernel knobs the checks read
    fact_errors: dict[str, str] = field(default_factory=dict)  # fact -> why it is unknown

    @property
    def outcome(self) -> tuple[tuple[str, str], ...]:
        """The failing checks and their statuses: nodes with equal outcomes behave alike."""
        return tuple(sorted((c, s) for c, s in self.checks.items() if s in FAILING))

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("name", "hostname", "error", "checks", "messages",
                                           "kb", "versions", "env", "ldconf", "npu", "hw",
                                           "flags", "sysctls", "fact_errors")}
        return d


# -- reading one bundle ------------------------------------------------------------------
def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def _refusal(exc: BaseException, redact: Any) -> str:
    """Why a bundle was refused, one short redacted line; kept a translatable message when
    redaction and shortening leave it as it was (the fleet report renders it per language)."""
    text = _short(redact(str(exc)))
    arg = exc.args[0] if exc.args else None
    return arg if isinstance(arg, Msg) and text == str(arg) else text


def _versions(store: FactStore) -> tuple[dict[str, str | None], dict[str, str]]:
    from .probes.cann import CannStack
    from .probes.npusmi import NpuSmi
    from .probes.packages import Packages

    out: dict[str, str | None] = {k: None for k in VERSION_KEYS}
    errors: dict[str, str] = {}
    cann = _fact(store, CannStack, errors)
    if cann is not None:
        out["cann"] = cann.active.info.version if cann.active else None
        out["driver"] = cann.driver.version if cann.driver else None
        out["firmware"] = cann.firmware.version if cann.firmware else None
    smi = _fact(store, NpuSmi, errors)
    info = getattr(smi, "info", None)
    if info is not None:
        out["npu_smi"] = info.tool_version or None
        names = sorted({c.name for c in info.chips if c.name})
        out["chip"] = ",".join(names) or None
    pkgs = _fact(store, Packages, errors)
    if pkgs is not None:
        out["python"] = pkgs.python or None
        for label, name in PACKAGES:
            out[label] = pkgs.version(name)
    return out, errors


def _fact(store: FactStore, fact: type, errors: dict[str, str]) -> Any:
    """The fact, or None with the reason noted (one fact missing never hides the others)."""
    try:
        return store.get(fact)
    except Cancelled:
        raise
    except Exception as exc:
        errors[fact.__name__] = _short(getattr(exc, "reason", None) or exc)
        return None


def _sysctls(store: FactStore, errors: dict[str, str]) -> dict[str, str]:
    """The kernel settings the checks read (net.tcp-ports, tlb.hugepages), as sysctl names."""
    from .probes.dns import ResolverConfig
    from .probes.faults import HugePages

    out: dict[str, str] = {}
    rc = _fact(store, ResolverConfig, errors)
    if rc is not None:
        if rc.port_range:
            out["net.ipv4.ip_local_port_range"] = f"{rc.port_range[0]} {rc.port_range[1]}"
        if rc.fin_timeout is not None:
            out["net.ipv4.tcp_fin_timeout"] = str(rc.fin_timeout)
        if rc.tw_reuse is not None:
            out["net.ipv4.tcp_tw_reuse"] = str(rc.tw_reuse)
    hp = _fact(store, HugePages, errors)
    if hp is not None:
        if hp.thp_mode:
            out["/sys/kernel/mm/transparent_hugepage/enabled"] = hp.thp_mode
        if "HugePages_Total" in hp.meminfo:
            out["vm.nr_hugepages"] = str(hp.total)
    return out


def hw_facts(store: FactStore, errors: dict[str, str]) -> dict[str, str]:
    """Per device, the hardware state a fleet compares: each RoCE port's link, detection,
    speed, PFC priorities and optical module, each chip's ECC state, each card's firmware.
    Values are the same on every healthy node, so a drift names the node and the device."""
    from .probes.hccn import HccnState
    from .probes.npusmi import NpuBoard, NpuSmi
    from .probes.npusmi_detail import NpuDetail

    out: dict[str, str] = {}
    st = _fact(store, HccnState, errors)
    for d in getattr(st, "devices", ()) or ():
        for name in ("link", "net_health", "speed", "pfc", "optical"):
            a = getattr(d, name, None)
            if a is None:
                continue
            v = a.value if a.ok else None
            if name == "pfc" and v is not None:
                v = ",".join(map(str, v)) or "off"
            elif name == "optical" and isinstance(v, Mapping):
                v = v.get("present", "?")
            out[f"roce {d.dev} {name}"] = "(no answer)" if not a.ok else str(v)
    det = _fact(store, NpuDetail, errors)
    for (npu, chip), s in sorted((getattr(det, "first", None) or {}).items()):
        later = (getattr(det, "second", None) or {}).get((npu, chip))
        c = (later.counters if later is not None and later.counters is not None
             else s.counters)
        if c is None:
            out[f"ecc {npu}/{chip}"] = "(no answer)"
            continue
        rose = (later is not None and later.counters is not None and s.counters is not None
                and later.counters.single > s.counters.single)
        out[f"ecc {npu}/{chip}"] = (f"double {c.double}" if c.double else
                                    "single rising" if rose else
                                    "single" if c.single else "ok")
    smi = _fact(store, NpuSmi, errors)
    for npu, sub in sorted((getattr(smi, "boards", None) or {}).items()):
        b = sub.value
        out[f"firmware npu {npu}"] = (b.firmware_version or "?" if isinstance(b, NpuBoard)
                                      else "(no answer)")
    return out


def _snapshot(store: FactStore) -> Finding:
    """The hidden check: the comparison's facts, as evidence of one info finding."""
    from .probes.ldconf import LdSoConf
    from .probes.npusmi import NpuSmi
    from .probes.procs import ServiceEnv, ServiceProcesses
    from .redact import REDACTED, is_secret_name, redact_env, redact_text

    versions, errors = _versions(store)
    env = _fact(store, ServiceEnv, errors)
    ld = _fact(store, LdSoConf, errors)
    smi = _fact(store, NpuSmi, errors)
    procs = _fact(store, ServiceProcesses, errors)
    npu: dict[str, str] = {}
    info = getattr(smi, "info", None)
    for c in getattr(info, "chips", ()) or ():
        npu[f"{c.npu}/{c.chip}"] = str(c.health).strip() or "?"
    flags: dict[str, str] = {}
    primary = getattr(procs, "primary", None)
    if primary is not None:
        for k, v in list(primary.args.items())[:128]:
            flags[str(k)] = REDACTED if is_secret_name(str(k)) else redact_text(str(v))
    envd = dict(sorted(redact_env(env.env).items())[:MAX_ENV]) if env is not None else {}
    return Finding.info("fleet comparison facts", evidence={
        "versions": versions, "env": envd, "ldconf": ld.dirs if ld is not None else [],
        "npu": npu, "hw": hw_facts(store, errors), "flags": flags,
        "sysctls": _sysctls(store, errors), "fact_errors": errors})


SNAPSHOT_SPEC = CheckSpec(SNAPSHOT_CHECK, "Facts the fleet comparison reads", _snapshot,
                          Category.HOST, ("fleet",))


def fleet_registry() -> Registry:
    """The normal registry (with plugins) plus the snapshot check, built once per command."""
    reg = Registry.discover()
    reg.load_plugins()
    reg.add_check(SNAPSHOT_SPEC)
    return reg


def summarize_report(name: str, report: Report) -> NodeSummary:
    """A NodeSummary from a report that includes the snapshot check's result."""
    node = NodeSummary(name, hostname=report.host.hostname)
    for r in report.results:
        if r.check_id == SNAPSHOT_CHECK:
            ev = r.findings[0].evidence if r.findings else {}
            if r.status is not Status.INFO or not isinstance(ev, Mapping) or "versions" not in ev:
                node.fact_errors["snapshot"] = _short(r.findings[0].message if r.findings
                                                      else "no result")
                continue
            node.versions = dict(ev["versions"], kernel=report.host.kernel or None)
            node.env, node.ldconf = dict(ev["env"]), list(ev["ldconf"])
            node.npu, node.flags = dict(ev["npu"]), dict(ev["flags"])
            node.hw = dict(ev.get("hw", {}))
            node.sysctls = dict(ev.get("sysctls", {}))
            node.fact_errors.update(ev["fact_errors"])
            continue
        st = r.status.value
        node.checks[r.check_id] = st
        if st in FAILING:
            bad = [f for f in r.findings if f.status.value == st] or list(r.findings)
            node.messages[r.check_id] = _short(bad[0].message) if bad else ""
            node.kb[r.check_id] = sorted({k for f in r.findings for k in f.kb})
    return node


def load_node(path: str, registry: Registry, timeout: float | None = None) -> NodeSummary:
    """Read, replay and summarize one bundle; a refused bundle is a node with ``error``."""
    from .bundle import BundleHost
    from .engine import DEFAULT_TIMEOUT, RunConfig, run
    from .errors import DoctorError
    from .options import RunOptions
    from .redact import redact_text
    from .replay import replay_options

    name = os.path.basename(path)
    try:
        host = BundleHost.open(path)
    except (DoctorError, OSError) as exc:
        return NodeSummary(name, error=_refusal(exc, redact_text))
    manifest = host.data.manifest
    options = replay_options(manifest.get("options"), RunOptions(), ())
    config = RunConfig((), (), timeout or DEFAULT_TIMEOUT, override=bool(timeout))
    report = run(host, options, registry, config)
    return summarize_report(name, report)


def bundle_paths(inputs: Iterable[str]) -> list[str]:
    """The bundles named: files as given, directories expanded to their bundle files
    (not recursive, sorted). A name that is neither is a ValueError naming it."""
    out: list[str] = []
    for p in inputs:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if n.endswith(BUNDLE_SUFFIXES))
            out.extend(os.path.join(p, n) for n in names
                       if os.path.isfile(os.path.join(p, n)))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise ValueError(T("{path}: no such bundle file or directory", path=p))
    return out


def iter_nodes(paths: Iterable[str], registry: Registry,
               timeout: float | None = None) -> Iterator[NodeSummary]:
    """One NodeSummary per bundle, one bundle in memory at a time."""
    for p in paths:
        yield load_node(p, registry, timeout)


# -- comparing -----------------------------------------------------------------------------
_RANK = {s.value: s.rank for s in Status}


def _dict_diff(a: Mapping[str, Any], b: Mapping[str, Any],
               first: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The keys whose values differ; those named in ``first`` lead, in that order."""
    order = {k: i for i, k in enumerate(first)}
    keys = sorted(set(a) | set(b), key=lambda k: (order.get(k, len(order)), k))
    return [{"name": k, "a": a.get(k), "b": b.get(k)} for k in keys if a.get(k) != b.get(k)]


def field_rank(fld: str) -> tuple[int, str]:
    """Where a drift field is listed: the stack (kernel … vllm-ascend) in STACK's order, then
    launch flags, then everything else by name."""
    if fld in STACK_FIELDS:
        return STACK_FIELDS.index(fld), fld
    return (len(STACK_FIELDS), fld) if fld.startswith("flag --") else (len(STACK_FIELDS) + 1,
                                                                        fld)


def is_key_field(fld: str) -> bool:
    return fld in STACK_FIELDS or fld.startswith("flag --")


def diff_nodes(a: NodeSummary, b: NodeSummary) -> dict[str, Any]:
    """Everything that differs between two nodes, ranked: the check statuses first (those
    worse on B, the bad node, first; then by the worse status), then versions, ld.so.conf
    order, npu-smi health, launch flags, sysctls and environment."""
    checks = []
    for cid in sorted(set(a.checks) | set(b.checks)):
        sa, sb = a.checks.get(cid), b.checks.get(cid)
        if sa == sb:
            continue
        checks.append({"check": cid, "a": sa, "b": sb,
                       "a_message": a.messages.get(cid, ""), "b_message": b.messages.get(cid, ""),
                       "kb": sorted(set(a.kb.get(cid, [])) | set(b.kb.get(cid, [])))})
    def rank(d: dict[str, Any]) -> tuple[int, int, str]:
        ra, rb = _RANK.get(d["a"] or "", -1), _RANK.get(d["b"] or "", -1)
        return (0 if rb > ra else 1, -max(ra, rb), d["check"])  # worse on B (the bad) first
    checks.sort(key=rank)
    ld = None
    if a.ldconf != b.ldconf:
        ld = {"a": a.ldconf, "b": b.ldconf,
              "only_a": [d for d in a.ldconf if d not in b.ldconf],
              "only_b": [d for d in b.ldconf if d not in a.ldconf]}
    return {"a": a.name, "b": b.name, "a_host": a.hostname, "b_host": b.hostname,
            "stack": _dict_diff({k: a.versions.get(k) for k in STACK},
                                {k: b.versions.get(k) for k in STACK}, STACK),
            "checks": checks, "versions": _dict_diff(a.versions, b.versions, STACK),
            "ldconf": ld,
            "npu": _dict_diff(a.npu, b.npu), "hw": _dict_diff(a.hw, b.hw),
            "flags": _dict_diff(a.flags, b.flags),
            "sysctls": _dict_diff(a.sysctls, b.sysctls), "env": _dict_diff(a.env, b.env)}


def diff_is_empty(d: Mapping[str, Any]) -> bool:
    return not any(d.get(k) for k in ("checks", "versions", "ldconf", "npu", "hw", "flags",
                                      "sysctls", "env"))


class FleetAccumulator:
    """Folds NodeSummaries one at a time into counts: memory grows with the number of
    distinct values seen (outcomes, versions, ld.so.conf orders), not with bundle sizes."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.refused: list[tuple[str, str]] = []
        self.groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
        self.problems: dict[tuple[str, str], list[str]] = {}  # (check, status) -> nodes
        self.messages: dict[tuple[str, str], str] = {}
        self.drift: dict[str, dict[str, list[str]]] = {}  # field -> value -> nodes

    def add(self, node: NodeSummary) -> None:
        label = node.name if not node.hostname or node.hostname in node.name \
            else f"{node.name} ({node.hostname})"
        if node.error:
            self.refused.append((node.name, node.error))
            return
        self.names.append(label)
        self.groups.setdefault(node.outcome, []).append(label)
        for key in node.outcome:
            self.problems.setdefault(key, []).append(label)
            self.messages.setdefault(key, node.messages.get(key[0], ""))
        values: dict[str, str] = {f"version {k}": str(v) for k, v in node.versions.items()}
        values["ld.so.conf order"] = " ".join(node.ldconf) or "(none)"
        unhealthy = sorted(k for k, v in node.npu.items() if v.upper() != "OK")
        values["npu-smi health"] = (
            "no npu-smi data" if not node.npu else
            f"{len(node.npu)} chips OK" if not unhealthy else
            ", ".join(f"{k} {node.npu[k]}" for k in unhealthy))
        for k, v in node.hw.items():
            values[f"hw {k}"] = v
        for k, v in node.env.items():
            values[f"env {k}"] = v
        for k, v in node.flags.items():
            values[f"flag --{k}"] = v
        for k, v in node.sysctls.items():
            values[f"sysctl {k}"] = v
        for fld, v in values.items():
            self.drift.setdefault(fld, {}).setdefault(v, []).append(label)

    def result(self) -> dict[str, Any]:
        n = len(self.names)
        groups = sorted(self.groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        majority = groups[0][0] if groups else ()
        out_groups = []
        for i, (outcome, nodes) in enumerate(groups):
            extra = [f"{c} {s}" for c, s in outcome if (c, s) not in majority]
            missing = [f"{c} {s}" for c, s in majority if (c, s) not in outcome]
            out_groups.append({"nodes": nodes, "size": len(nodes), "majority": i == 0,
                               "failing": [f"{c} {s}" for c, s in outcome],
                               "extra_vs_majority": extra, "missing_vs_majority": missing})
        problems = []
        for (c, s), nodes in sorted(self.problems.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            have = set(nodes)
            problems.append({"check": c, "status": s, "nodes": nodes, "count": len(nodes),
                             "absent_on": [x for x in self.names if x not in have],
                             "message": self.messages.get((c, s), "")})
        drift = []
        for fld in sorted(self.drift, key=field_rank):
            by = dict(self.drift[fld])
            have = sum(len(v) for v in by.values())
            if have < n:  # nodes without the field (an env var set on some nodes only)
                seen = {x for v in by.values() for x in v}
                by["(unset)"] = [x for x in self.names if x not in seen]
            if len(by) < 2:
                continue
            ranked = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            if n > 2 and len(ranked) == n:  # a per-node value (an address, a name): no drift
                drift.append({"field": fld, "majority": None, "majority_count": 0,
                              "per_node": True, "others": []})
                continue
            drift.append({"field": fld, "majority": ranked[0][0], "key": is_key_field(fld),
                          "majority_count": len(ranked[0][1]), "per_node": False,
                          "others": [{"value": v, "nodes": ns} for v, ns in ranked[1:]]})
        odd = sorted({nd for g in out_groups[1:] for nd in g["nodes"]})
        # the nodes off the majority in the stack or the launch flags, the most-drifted first
        off: dict[str, list[str]] = {}
        for x in drift:
            if x.get("key"):
                for o in x["others"]:
                    for nd in o["nodes"]:
                        off.setdefault(nd, []).append(x["field"])
        stack_odd = [{"node": nd, "fields": f} for nd, f in
                     sorted(off.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
        # the node and device off the majority below the npu-smi table (a down port, ECC,
        # other firmware): named apart, as an operator asks for them by device
        hw_odd: list[dict[str, Any]] = []
        for x in drift:
            if not str(x["field"]).startswith("hw ") or x.get("per_node"):
                continue
            others: list[dict[str, Any]] = x["others"]
            hw_odd += [{"node": nd, "device": str(x["field"])[3:], "value": o["value"],
                        "majority": x["majority"], "majority_count": x["majority_count"]}
                       for o in others for nd in o["nodes"]]
        return {"nodes": n, "refused": [{"bundle": b, "reason": r} for b, r in self.refused],
                "stack_odd_nodes": stack_odd, "hardware_odd": hw_odd,
                "groups": out_groups, "odd_nodes": odd,
                "common_problems": [p for p in problems if p["count"] == n and n > 1],
                "some_problems": [p for p in problems if p["count"] < n or n == 1],
                "drift": drift}
