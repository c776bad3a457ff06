"""The live service: health, version, and what its /metrics say about load and latency.

Thresholds come from the field reports: an SRE checklist (queue depth > 100, NPU
temperature > 85 °C, memory > 90 %), a production Prometheus alert set (device memory 28 GB of
32 GB = 87.5 %, HBM bandwidth 95 %, the 200 ms / 500 ms latency buckets) and vllm-ascend's
FAQ Q22 (preemptions rising with KV usage near 100 % explain TPOT blow-ups).
"""

from __future__ import annotations

import re
from typing import Iterator

from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.npu_exporter import NpuExporterMetrics
from ascend_doctor.probes.packages import Packages
from ascend_doctor.probes.service import (MetricsSnapshot, ServersHttp, ServiceHttp, bucket_delta,
                                   endpoint_url,
                                   histogram_quantile, series_names)
from ascend_doctor.registry import check

KV_WARN = 0.90
KV_FAIL = 0.98
QUEUE_FAIL = 100  # seed 003: 请求队列深度（>100需告警）
TTFT_P99_WARN_S = 0.5  # seed 000: watch the le="0.5" bucket
E2E_P99_WARN_S = 30.0
NPU_TEMP_FAIL_C = 85.0  # seed 000 / 003: 910B throttles above 85 °C
NPU_MEM_FRACTION = 0.875  # seed 000: alert at 28 GB of a 32 GB card
NPU_MEM_ABS_BYTES = 28 * 1024 ** 3


def _subject(http: ServiceHttp) -> str:
    """Which server, and which context chose it (issue 31): its pid and API URL when
    discovered (several may run on one host), the URL --service names, or the default URL."""
    if http.pid is not None:  # "pid N at": found through the process, said as such
        return f"pid {http.pid} at {http.base_url}"
    if http.given:
        return f"{http.base_url} (named: --service)"
    return f"{http.base_url} (default: no --service, no vLLM process found)"


def _context(http: ServiceHttp) -> str:
    """Which service this is: named by --service, discovered (a vLLM process), or the
    default URL (nothing named, nothing found)."""
    return "discovered" if http.pid is not None else ("named" if http.given else "default")


def _each(http: ServiceHttp, servers: ServersHttp | None) -> tuple[ServiceHttp, ...]:
    return servers.per_server if servers is not None and servers.per_server else (http,)


@check("service.health", title="The vLLM service answers /health, /version and /v1/models",
       category=Category.SERVICE, tags=("service", "http"), timeout=30.0)
def health(http: ServiceHttp, servers: ServersHttp | None = None) -> Iterator[Finding]:
    """Every discovered server on its own API port (findings name it), or --service's URL."""
    for one in _each(http, servers):
        yield from _health_one(one)


def _health_one(http: ServiceHttp) -> Iterator[Finding]:
    h = http.health
    ev = {"url": endpoint_url(http.base_url, "/health"), "base_url": http.base_url,
          "context": _context(http), "status": h.status, "error": h.error,
          "duration_ms": round(h.duration_s * 1000, 1)}
    if h.status is None:
        err = h.error or "no answer"
        if "refused" in err:
            # vLLM 0.32 (measured, tests/integration/test_real_vllm.py): after the engine core
            # dies /health answers 503 for a few seconds, then the API server exits; from
            # then on this is what a dead engine looks like, not a 503.
            yield Finding.fail(T("service down: nothing listens at {url} ({err}): the "
                                 "server is not running — it exited (an engine core that dies "
                                 "takes vLLM's API server down with it; the server log names "
                                 "the root cause) or it never started", url=http.base_url,
                                 err=err), subject=_subject(http),
                               evidence=ev, kb="ASC-SVC-001")
        elif "within" in err:
            yield Finding.fail(T("service hung: {url} gave {err}; the event loop "
                                 "or the engine is stuck", url=endpoint_url(http.base_url, "/health"),
                                   err=err),
                               subject=_subject(http), evidence=ev,
                               kb="ASC-SVC-003")
        else:
            yield Finding.fail(T("not a vLLM HTTP answer at {url}: {err}",
                                 url=endpoint_url(http.base_url, "/health"), err=err),
                               subject=_subject(http), evidence=ev, kb="ASC-SVC-004")
        return
    if h.status == 503 or (h.status >= 500):
        yield Finding.fail(T("engine dead: /health answered HTTP {status} (vLLM maps "
                             "EngineDeadError to 503: the engine core has died while the HTTP "
                             "server still runs; vLLM 0.32 shuts the server down seconds "
                             "later)", status=h.status),
                           subject=_subject(http), evidence=ev, kb="ASC-SVC-002")
    elif h.status != 200:
        yield Finding.fail(T("/health answered HTTP {status}, not 200: this is not a vLLM "
                             "OpenAI server or it is behind something else", status=h.status),
                           subject=_subject(http),
                           evidence=ev, kb="ASC-SVC-004")
    else:
        yield Finding.passed(T("/health answered 200 in {ms:.0f} ms", ms=h.duration_s * 1000),
                             subject=_subject(http), evidence=ev)
    models = http.endpoints.get("/v1/models")
    if models is not None:
        mev = {"status": models.status, "error": models.error, "api_key_sent": http.api_key_sent}
        if http.api_key_withheld:
            mev["api_key_withheld"] = http.api_key_withheld
        if models.status == 401:
            if http.api_key_withheld:
                yield Finding.info(T("/v1/models needs an API key (HTTP 401); {why}",
                                     why=http.api_key_withheld), subject=_subject(http),
                                   evidence=mev, kb="ASC-SVC-011")
            elif http.api_key_sent:
                yield Finding.fail(T("/v1/models refused the API key given (HTTP 401)"),
                                   subject=_subject(http), evidence=mev, kb="ASC-SVC-011")
            else:
                yield Finding.info(T("/v1/models needs an API key (HTTP 401: the server runs "
                                     "with --api-key); pass --api-key or set VLLM_API_KEY to "
                                     "list the served models"), subject=_subject(http), evidence=mev,
                                   kb="ASC-SVC-011")
        elif models.ok and isinstance(models.json, dict):
            cards = [c for c in models.json.get("data") or [] if isinstance(c, dict)]
            served = [{"id": c.get("id"), "root": c.get("root"),
                       "max_model_len": c.get("max_model_len")} for c in cards]
            yield Finding.passed(T("serves {models}", models=", ".join(
                                     str(c["id"]) for c in served) or T("no model")),
                                 subject=_subject(http), evidence={"models": served})
        elif models.error or models.status != 200:
            yield Finding.warn(T("{what}", what=models.describe()) if models.error else
                               T("/v1/models answered HTTP {status}", status=models.status),
                               subject=_subject(http), evidence=mev, kb="ASC-SVC-004")


def _major_minor(v: str | None) -> str | None:
    m = re.match(r"^\s*v?(\d+)\.(\d+)", v or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


@check("service.version", title="The served vLLM matches vllm-ascend's major.minor",
       category=Category.SERVICE, tags=("service", "versions"), timeout=15.0)
def version(http: ServiceHttp, pkgs: Packages | None,
            servers: ServersHttp | None = None) -> Iterator[Finding]:
    """Every discovered server's /version (two servers may run two vLLM versions), each
    against the inspected interpreter's vllm-ascend."""
    for one in _each(http, servers):
        yield from _version_one(one, pkgs)


def _version_one(http: ServiceHttp, pkgs: Packages | None) -> Iterator[Finding]:
    if not http.reachable:
        yield Finding.skip(T("the service at {url} did not answer", url=http.base_url),
                           subject=_subject(http))
        return
    served = http.version()
    if served is None:
        ep = http.endpoints.get("/version")
        yield Finding.warn(T("/version gave no version ({what})",
                             what=ep.describe() if ep else T("not asked")),
                           subject=_subject(http), kb="ASC-SVC-006")
        return
    va = pkgs.version("vllm-ascend") if pkgs else None
    ev = {"vllm_served": served, "vllm_ascend_installed": va,
          "packages_source": pkgs.source if pkgs else None, "url": http.base_url,
          "pid": http.pid}
    if va is None:
        yield Finding.info(T("the service runs vLLM {served}; vllm-ascend is not installed in "
                             "the inspected interpreter, so the pairing cannot be checked",
                             served=served), subject=_subject(http), evidence=ev)
        return
    if _major_minor(served) != _major_minor(va):
        yield Finding.fail(T("the service runs vLLM {served} but vllm-ascend is {va}: each "
                             "vllm-ascend X.Y is built against vLLM X.Y", served=served, va=va),
                           subject=_subject(http), evidence=ev, kb="ASC-SVC-006",
                           fix="versions.pip-match",
                           fix_params={"package": "vllm", "requirement": f"vllm=={va}"})
    else:
        yield Finding.passed(T("vLLM {served} pairs with vllm-ascend {va}", served=served, va=va),
                             subject=_subject(http), evidence=ev)


def _rate(http: ServiceHttp, *names: str) -> tuple[float | None, float | None, float | None]:
    """(first, last, per-second delta) of a counter over the two scrapes."""
    if not http.scrapes:
        return None, None, None
    a = http.scrapes[0].value(*names)
    b = http.scrapes[-1].value(*names)
    dt = http.interval_s
    if a is None or b is None:
        return a, b, None
    return a, b, ((b - a) / dt if dt > 0 else None)


def _p99(http: ServiceHttp, base: str) -> tuple[float | None, str, float]:
    """P99 of a histogram over the scrape interval, else over the server's lifetime."""
    first, last = http.scrapes[0], http.scrapes[-1]
    delta = bucket_delta(last.buckets(base), first.buckets(base))
    n = max(delta.values(), default=0.0)
    if n > 0 and len(http.scrapes) > 1:
        return (histogram_quantile(0.99, delta),
                T("over the {s:.1f} s scrape interval", s=http.interval_s), n)
    cum = last.buckets(base)
    n = max(cum.values(), default=0.0)
    return (histogram_quantile(0.99, cum),
            T("since the server started (no requests finished between the scrapes)"), n)


@check("service.metrics", title="KV cache, preemptions, queue depth and latency from /metrics",
       category=Category.SERVICE, tags=("service", "metrics"), timeout=30.0)
def metrics(http: ServiceHttp, servers: ServersHttp | None = None) -> Iterator[Finding]:
    for one in _each(http, servers):
        yield from _metrics_one(one)


def _metrics_one(http: ServiceHttp) -> Iterator[Finding]:
    subj = _subject(http)
    if not http.reachable:
        yield Finding.skip(T("the service at {url} did not answer", url=http.base_url),
                           subject=subj)
        return
    if not http.scrapes:
        yield Finding.error(T("cannot use {url}: {reason}", url=endpoint_url(http.base_url, "/metrics"),
                              reason=http.metrics_error),
                            subject=subj, evidence={"reason": http.metrics_error},
                            kb="ASC-SVC-004")
        return
    fix = {"fix": "service.launch-flags", "fix_params": {"remove": ["--disable-log-stats"]}}
    if http.stats_disabled:
        declared = sorted({f for snap in http.scrapes for f in snap.families
                           if f.startswith("vllm:")})
        yield Finding.warn(T("stats disabled: /metrics declares {n} vllm: metrics (HELP/TYPE) "
                             "but exports no sample of them: the server runs with "
                             "--disable-log-stats, so KV usage, queue depth and latency are "
                             "not exported (the periodic stats log lines are off too)",
                             n=len(declared)), subject=subj,
                           evidence={"stats_disabled": True, "declared": declared[:20]},
                           kb="ASC-SVC-005", **fix)
        return
    if not http.vllm_series:
        yield Finding.warn(T("/metrics has no vllm: series: the server runs with "
                             "--disable-log-stats, so KV usage, queue depth and latency are not "
                             "exported (the periodic stats log lines are off too)"), subject=subj,
                           evidence={"series": series_names(http.scrapes, "")[:20]},
                           kb="ASC-SVC-005", **fix)
        return
    last: MetricsSnapshot = http.scrapes[-1]
    # vllm:gpu_cache_usage_perc is the name before vLLM 0.10 (V0 and early V1)
    kv_name = next((n for n in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
                    if last.named(n)), "vllm:kv_cache_usage_perc")
    kv = last.max_value(kv_name)
    waiting = last.value("vllm:num_requests_waiting")
    running = last.value("vllm:num_requests_running")
    p0, p1, prate = _rate(http, "vllm:num_preemptions_total")
    ev = {"kv_cache_usage": kv, "kv_metric": kv_name, "waiting": waiting, "running": running,
          "preemptions": [p0, p1], "interval_s": round(http.interval_s, 3)}
    rising = p0 is not None and p1 is not None and p1 > p0
    bad = False
    if kv is not None:
        if kv >= KV_FAIL or (kv >= KV_WARN and rising):
            bad = True
            msg = (T("KV cache {pct:.0f} % full ({name}), preemptions {p0:.0f} → {p1:.0f} in "
                     "{dt:.1f} s", pct=kv * 100, name=kv_name, p0=p0, p1=p1, dt=http.interval_s)
                   if rising else
                   T("KV cache {pct:.0f} % full ({name})", pct=kv * 100, name=kv_name))
            yield Finding.fail(msg, subject=subj, evidence=ev, kb="ASC-SVC-007")
        elif kv >= KV_WARN:
            bad = True
            yield Finding.warn(T("KV cache {pct:.0f} % full ({name}); above {warn:.0f} % new "
                                 "requests start to preempt others", pct=kv * 100, name=kv_name,
                                 warn=KV_WARN * 100), subject=subj, evidence=ev, kb="ASC-SVC-007")
    if rising and not (kv is not None and kv >= KV_WARN):
        bad = True
        yield Finding.warn(T("preemptions rising: {p0:.0f} → {p1:.0f} in {dt:.1f} s "
                             "({rate:.1f}/s)", p0=p0, p1=p1, dt=http.interval_s, rate=prate or 0),
                           subject=subj, evidence=ev, kb="ASC-SVC-007")
    if waiting is not None and waiting > QUEUE_FAIL:
        bad = True
        yield Finding.fail(T("{waiting:.0f} requests waiting (> {limit}, the usual alert line); "
                             "{running:.0f} running", waiting=waiting, limit=QUEUE_FAIL,
                             running=running or 0), subject=subj, evidence=ev,
                           kb="ASC-SVC-008", cause="service.queue-deep")  # = logs' QUEUE_DEEP
    for base, limit, label in (("vllm:time_to_first_token_seconds", TTFT_P99_WARN_S, "TTFT"),
                               ("vllm:e2e_request_latency_seconds", E2E_P99_WARN_S, T("e2e latency"))):
        if not last.named(base + "_bucket"):
            continue
        q, window, n = _p99(http, base)
        if q is None:
            continue
        lev = {"p99_s": round(q, 4), "window": window, "observations": n, "threshold_s": limit,
               "histogram": base}
        if q > limit:  # a latency warning says nothing of KV state: the summary below stays
            yield Finding.warn(T("{label} P99 ≈ {ms:.0f} ms {window} ({n:.0f} requests; "
                                 "threshold {limit_ms:.0f} ms)", label=label, ms=q * 1000,
                                 window=window, n=n, limit_ms=limit * 1000), subject=subj,
                               evidence=lev, kb="ASC-SVC-009")
        else:
            yield Finding.passed(T("{label} P99 ≈ {ms:.0f} ms {window} ({n:.0f} requests)",
                                   label=label, ms=q * 1000, window=window, n=n),
                                 subject=subj, evidence=lev)
    if not bad:
        yield Finding.passed(
            T("KV cache {kv}, {waiting:.0f} waiting, {running:.0f} running, no preemption in "
              "{dt:.1f} s", kv=("%.0f %%" % (kv * 100)) if kv is not None else T("n/a"),
              waiting=waiting or 0, running=running or 0, dt=http.interval_s),
            subject=subj, evidence=ev)


NPU_MEM_ABS_MB = NPU_MEM_ABS_BYTES / 2**20  # npu-exporter reports MB (MiB)


@check("service.npu-exporter", title="Huawei npu-exporter: HBM, AI Core utilization, health, "
       "temperature", category=Category.NPU, tags=("service", "metrics", "npu"), timeout=15.0)
def npu_exporter(m: NpuExporterMetrics) -> Iterator[Finding]:
    """npu-exporter's own series in its units (MB, %, 1/0, °C), per ``id``."""
    if not m.chips:
        yield Finding.skip(T("{url} has npu_chip_info_* families but no device rows",
                             url=m.url))
        return
    bad = False
    for c in m.chips:
        subj = f"NPU id {c.id}"
        if c.health is not None and c.health != 1:
            bad = True
            yield Finding.fail(T("NPU id {dev}: npu-exporter reports health {h:.0f} (1 is "
                                 "healthy; error code {code})", dev=c.id, h=c.health,
                                 code="%.0f" % c.error_code if c.error_code is not None
                                 else T("n/a")),
                               subject=subj, evidence={"health_status": c.health,
                                                       "error_code": c.error_code},
                               kb="ASC-SVC-010",
                               explained_by=["npu.health"])  # npu-smi's view of the same chip
        ut = c.used_total_mb
        if ut is not None:
            used, total = ut
            limit = total * NPU_MEM_FRACTION if total else NPU_MEM_ABS_MB
            if used > limit:
                bad = True
                msg = (T("NPU id {dev}: HBM {used:.0f} MB used of {total:.0f} MB ({pct:.1f} %, "
                         "above the alert line of {frac:.1f} %)", dev=c.id, used=used,
                         total=total, pct=100 * used / total, frac=NPU_MEM_FRACTION * 100)
                       if total else
                       T("NPU id {dev}: HBM {used:.0f} MB used and no total series: above the "
                         "alert line of a 32 GB card ({limit:.0f} MB)", dev=c.id, used=used,
                         limit=limit))
                yield Finding.warn(msg, subject=subj, evidence={
                    "used_mb": used, "total_mb": total, "limit_mb": limit}, kb="ASC-SVC-010")
        if c.temperature_c is not None and c.temperature_c > NPU_TEMP_FAIL_C:
            bad = True
            yield Finding.fail(T("NPU {dev}: {t:.0f} °C (> {limit:.0f} °C: the 910B "
                                 "lowers its clock; check the fans)", dev=c.id,
                                 t=c.temperature_c, limit=NPU_TEMP_FAIL_C), subject=f"NPU {c.id}",
                               evidence={"temperature_c": c.temperature_c}, kb="ASC-SVC-010",
                               cause=f"npu.hot:{c.id}")  # npu.temperature's key (checks/npu.py)
    if not bad:
        util = [c.utilization_pct for c in m.chips if c.utilization_pct is not None]
        yield Finding.passed(
            T("npu-exporter at {url}: {n} devices healthy, HBM and temperature within the "
              "alert lines, AI Core {lo:.0f}–{hi:.0f} %", url=m.url, n=len(m.chips),
              lo=min(util) if util else 0.0, hi=max(util) if util else 0.0),
            evidence={"devices": {c.id: {"hbm_used_mb": c.hbm_used_mb,
                                         "hbm_total_mb": c.hbm_total_mb,
                                         "utilization_pct": c.utilization_pct,
                                         "health": c.health, "temperature_c": c.temperature_c}
                                  for c in m.chips}})
