"""The live vLLM service as its HTTP endpoints show it: /health, /version, /v1/models, /metrics.

Read-only and bounded: at most five GETs per run (health, version, models, two /metrics
scrapes), each with a short timeout, and none at all past /health when nothing answers
there, so a hung service costs one timeout, not five. The two scrapes are separated by a
short interval (``host.monotonic("metrics")`` + ``host.sleep``) so counters give rates.
Secrets: the API key is sent as a bearer token on /v1 only and never kept in a fact.
"""

from __future__ import annotations

import dataclasses
import hmac
import math
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from .. import boundedjson
from ..errors import ParseError, SourceError, SourceMissing
from ..i18n import T
from ..host import Host, HttpResponse
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from .procs import ServiceProcesses, parse_environ

HTTP_TIMEOUT = 2.0
SCRAPE_INTERVAL = 1.0
METRICS_CAP = 8 * 1024 * 1024


@dataclass(frozen=True, eq=False)
class Sample:
    """One /metrics sample: name as exposed, labels, value."""

    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, eq=False)
class MetricsSnapshot:
    """One /metrics scrape, flattened to samples (exposition names, e.g. ``..._total``)."""

    samples: tuple[Sample, ...]
    t: float = 0.0
    # metric families the body declares (HELP/TYPE), with or without samples: a vLLM started
    # with --disable-log-stats declares its vllm: families and exports no sample of them
    families: tuple[str, ...] = ()

    def named(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]

    def value(self, *names: str) -> float | None:
        """Sum over label sets of the first name present (engines of one server add up)."""
        for n in names:
            got = self.named(n)
            if got:
                return sum(s.value for s in got)
        return None

    def max_value(self, *names: str) -> float | None:
        for n in names:
            got = self.named(n)
            if got:
                return max(s.value for s in got)
        return None

    def has_prefix(self, prefix: str) -> bool:
        return any(s.name.startswith(prefix) for s in self.samples)

    def buckets(self, base: str) -> dict[float, float]:
        """Cumulative histogram buckets ``le -> count`` summed over label sets."""
        out: dict[float, float] = {}
        for s in self.named(base + "_bucket"):
            try:
                le = float(s.labels.get("le", "nan"))
            except ValueError:
                continue
            if not math.isnan(le):
                out[le] = out.get(le, 0.0) + s.value
        return out


def parse_metrics(text: str, source: str = "/metrics") -> MetricsSnapshot:
    """Prometheus text exposition → samples; anything else is a ParseError naming why."""
    from ..promtext import parse

    if text.lstrip().startswith(("<", "{", "[")):
        raise ParseError(source, T("not Prometheus text exposition (looks like HTML or JSON)"))
    samples: list[Sample] = []
    families: list[str] = []
    try:
        for fam in parse(text):
            families.append(fam.name)
            for s in fam.samples:
                samples.append(Sample(s.name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ParseError(source, f"not Prometheus text exposition ({exc})"[:300]) from None
    if not samples and not families and text.strip():
        raise ParseError(source, T("no samples and no HELP/TYPE lines in the body"))
    return MetricsSnapshot(tuple(samples), families=tuple(families))


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile on cumulative buckets (linear within a bucket)."""
    if not buckets:
        return None
    bs = sorted(buckets.items())
    total = bs[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in bs:
        if c >= rank:
            if math.isinf(le):
                return prev_le  # the highest finite bound: all we can say
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return bs[-1][0]


def bucket_delta(new: Mapping[float, float], old: Mapping[float, float]) -> dict[float, float]:
    """Observations between two scrapes (a counter reset keeps the new values)."""
    if any(new.get(k, 0.0) < v for k, v in old.items()):
        return dict(new)
    return {k: v - old.get(k, 0.0) for k, v in new.items()}


@dataclass(frozen=True, eq=False)
class Endpoint:
    """What one GET returned, without the raw body (it may be large)."""

    path: str
    status: int | None
    error: str | None
    duration_s: float
    json: object = None
    excerpt: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and self.error is None

    def describe(self) -> str:
        if self.error:
            return f"GET {self.path}: {self.error}"
        return f"GET {self.path}: HTTP {self.status} in {self.duration_s * 1000:.0f} ms"


@dataclass(frozen=True, eq=False)
class ServiceHttp:
    """The service's HTTP answers and its metrics scrapes."""

    base_url: str
    given: bool  # the user named the URL (absence is then a finding, not a skip)
    endpoints: Mapping[str, Endpoint] = field(default_factory=dict)
    scrapes: tuple[MetricsSnapshot, ...] = ()
    metrics_error: str | None = None  # why /metrics gave no usable scrape
    api_key_sent: bool = False
    pid: int | None = None  # the discovered server asked (None: the URL --service names)
    api_key_withheld: str | None = None  # why a key given was not sent to this server

    @property
    def health(self) -> Endpoint:
        return self.endpoints["/health"]

    @property
    def reachable(self) -> bool:
        return self.health.status is not None

    @property
    def vllm_series(self) -> bool:
        return any(s.has_prefix("vllm:") for s in self.scrapes)

    @property
    def stats_disabled(self) -> bool:
        """vLLM's own families are declared (HELP/TYPE) but none has a sample: the server runs
        with --disable-log-stats (measured on vLLM 0.32, tests/corpus/realvllm/)."""
        return bool(self.scrapes) and not self.vllm_series and any(
            f.startswith("vllm:") for snap in self.scrapes for f in snap.families)

    @property
    def interval_s(self) -> float:
        return self.scrapes[-1].t - self.scrapes[0].t if len(self.scrapes) > 1 else 0.0

    def version(self) -> str | None:
        ep = self.endpoints.get("/version")
        if ep is not None and isinstance(ep.json, dict):
            v = ep.json.get("version")
            return str(v) if v is not None else None
        return None


def _endpoint(path: str, r: HttpResponse, want_json: bool) -> Endpoint:
    doc = None
    error = r.error
    declared = r.headers.get("content-length", "") if r.headers else ""
    if error is None and declared.isdigit() and int(declared) > len(r.body) and not r.truncated:
        error = f"connection closed mid-body after {len(r.body)} of {declared} bytes"
    if r.status is not None and want_json and 200 <= r.status < 300 and error is None:
        try:
            # bounded: a hostile body (a recorded /version nested 200 000 deep) errors
            # this endpoint only, never the run or the checks sharing the fact
            doc = boundedjson.loads(r.body)
        except UnicodeDecodeError:
            error = f"HTTP {r.status} but the body is not JSON ({r.body[:60]!r})"
        except ValueError as exc:
            error = f"HTTP {r.status} but the body is not usable JSON ({str(exc)[:80]})"
    if r.truncated and error is None:
        error = f"body larger than {len(r.body)} bytes (truncated)"
    return Endpoint(path, r.status, error, r.duration_s, doc,
                    r.body[:200].decode("utf-8", "replace"))


def key_for(host: Host, sp, base: str, api_key: str | None) -> tuple[str | None, str | None]:
    """(the key to send, why it is withheld) for a server that discovery found (the user
    did not name it with --service). The operator's key goes only to a listener whose
    socket belongs to that server's process tree and whose process already holds that very
    key (``--api-key`` in its argv or VLLM_API_KEY in its environment): a process of any
    account can carry vLLM-like argv, and sending it the key would hand it over."""
    if not api_key:
        return None, None
    port = urlsplit(base).port
    if port is None or port not in sp.listen_ports:
        return None, (f"the key was not sent: port {port} is not a listening socket of pid "
                      f"{sp.pid} (pass --service URL to send it there)")
    held = []
    arg = sp.args.get("api-key")
    if isinstance(arg, str):
        held += arg.replace(",", " ").split()
    try:
        env = parse_environ(host.proc_read(sp.pid, "environ"))
        if env.get("VLLM_API_KEY"):
            held.append(env["VLLM_API_KEY"])
    except (SourceMissing, SourceError):
        pass
    if any(hmac.compare_digest(h.encode(), api_key.encode()) for h in held):
        return api_key, None
    return None, (f"the key was not sent: pid {sp.pid} (uid {sp.proc.uid}) was found by its "
                  f"command line and does not hold that key itself (pass --service URL to "
                  f"send it there)")


def endpoint_url(base: str, path: str) -> str:
    """``base`` with an endpoint's path appended to its path, its query kept after it:
    ``http://h:8000/?token=X`` + ``/v1/models`` is ``http://h:8000/v1/models?token=X``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base)
    if not parts.query and not parts.fragment:
        return base.rstrip("/") + path  # the common case, as recorded in bundles
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query,
                       ""))


def gather_http(host: Host, base: str, given: bool, api_key: str | None,
                interval: float = SCRAPE_INTERVAL) -> ServiceHttp:
    """The bounded probe sequence; same Host calls in every context (bundles replay it)."""
    base = endpoint_url(base, "")
    eps: dict[str, Endpoint] = {}
    health = host.http_get(endpoint_url(base, "/health"), timeout=HTTP_TIMEOUT)
    eps["/health"] = _endpoint("/health", health, want_json=False)
    if health.status is None:  # nothing answers: do not spend four more timeouts
        return ServiceHttp(base, given, eps, (), "not scraped: /health got no HTTP answer")
    eps["/version"] = _endpoint("/version", host.http_get(endpoint_url(base, "/version"),
                                                         timeout=HTTP_TIMEOUT), True)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    eps["/v1/models"] = _endpoint("/v1/models", host.http_get(
        endpoint_url(base, "/v1/models"), timeout=HTTP_TIMEOUT, headers=headers), True)
    scrapes: list[MetricsSnapshot] = []
    err = None
    for i in range(2):
        t = host.monotonic("metrics")
        r = host.http_get(endpoint_url(base, "/metrics"), timeout=HTTP_TIMEOUT, cap=METRICS_CAP)
        ep = _endpoint("/metrics", r, want_json=False)
        eps["/metrics"] = ep
        if r.status is None or ep.error or not (200 <= r.status < 300):
            err = ep.describe() if r.status is None or ep.error else f"GET /metrics: HTTP {r.status}"
            break
        try:
            snap = parse_metrics(r.text, endpoint_url(base, "/metrics"))
        except ParseError as exc:
            err = exc.reason
            break
        scrapes.append(MetricsSnapshot(snap.samples, t, snap.families))
        if i == 0:
            host.sleep(interval)
    return ServiceHttp(base, given, eps, tuple(scrapes), err, bool(api_key))


@provider
def gather_service_http(host: Host, options: RunOptions,
                        procs: ServiceProcesses | None) -> ServiceHttp:
    found = procs is not None and bool(procs.servers)
    base = options.service_url
    key, withheld = options.api_key, None
    if not options.service_url_given and found:
        # no --service: ask the server we found, on the port it listens on
        base = procs.primary.api_url(base)  # type: ignore[union-attr]
        key, withheld = key_for(host, procs.primary, base, options.api_key)  # type: ignore[union-attr]
    http = gather_http(host, base, options.service_url_given, key)
    if not options.service_url_given and found:
        http = dataclasses.replace(http, pid=procs.primary.pid,  # type: ignore[union-attr]
                                   api_key_withheld=withheld)
    if not http.reachable and not options.service_url_given and not found:
        raise SourceMissing(T("vLLM service at {base}", base=base),
                            T("no vLLM server process and {why} (pass --service URL to name one)",
                              why=http.health.error or T("no answer")))
    return http


MAX_SERVERS = 8  # servers probed on one host (each costs up to five requests and a scrape gap)


@dataclass(frozen=True, eq=False)
class ServersHttp:
    """Every discovered server's HTTP answers, each on its own API port (the primary's is
    the ServiceHttp fact itself). With --service only that URL is asked: one entry."""

    per_server: tuple[ServiceHttp, ...]
    not_probed: tuple[int, ...] = ()  # pids beyond MAX_SERVERS, or sharing a URL already asked


@provider
def gather_servers_http(host: Host, options: RunOptions, procs: ServiceProcesses | None,
                        http: ServiceHttp) -> ServersHttp:
    if options.service_url_given or procs is None or len(procs.servers) < 2:
        return ServersHttp((http,))
    out, seen, skipped = [http], {http.base_url}, []
    for sp in procs.servers[1:]:
        base = endpoint_url(sp.api_url(options.service_url), "")
        if base in seen or len(out) >= MAX_SERVERS:
            skipped.append(sp.pid)
            continue
        seen.add(base)
        key, withheld = key_for(host, sp, base, options.api_key)
        out.append(dataclasses.replace(gather_http(host, base, False, key), pid=sp.pid,
                                       api_key_withheld=withheld))
    return ServersHttp(tuple(out), tuple(skipped))


def series_names(snaps: Iterable[MetricsSnapshot], prefix: str) -> list[str]:
    return sorted({s.name for snap in snaps for s in snap.samples if s.name.startswith(prefix)})


@dataclass(frozen=True, eq=False)
class DavinciNodes:
    """The NPU device nodes (/dev/davinci<N>) this host exposes, for TP arithmetic."""

    nodes: tuple[str, ...]


@provider
def gather_davinci_nodes(host: Host) -> DavinciNodes:
    nodes = tuple(p for p in host.glob("/dev/davinci*") if p.rsplit("davinci", 1)[-1].isdigit())
    if not nodes:
        raise SourceMissing("/dev/davinci*", T("no NPU device nodes"))
    return DavinciNodes(nodes)


def cache_config(http: "ServiceHttp | None") -> dict[str, str]:
    """Labels of vllm:cache_config_info (the *effective* CacheConfig), {} when absent."""
    if http is None or not http.scrapes:
        return {}
    got = http.scrapes[-1].named("vllm:cache_config_info")
    return dict(got[0].labels) if got else {}
