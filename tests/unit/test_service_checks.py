"""Service, config, TLB, leak and log rules on hand-built facts; the fault sampler on real
processes (one faulting on fresh pages, one quiet)."""

from __future__ import annotations

import subprocess
import sys

from ascend_doctor.host import LiveHost, ProcInfo
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.faults import FaultRates, HugePages, ProcRate, ServiceFaults, sample_faults
from ascend_doctor.probes.leak import MemPoint, NpuMemoryTrend
from ascend_doctor.probes.kbfact import gather_knowledge
from ascend_doctor.probes.logmatch import gather_log_matches
from ascend_doctor.probes.logs import LogFile, LogSources
from ascend_doctor.probes.packages import Package, Packages
from ascend_doctor.probes.procs import ServiceProcess, ServiceProcesses, parse_vllm_args
from ascend_doctor.probes.service import Endpoint, MetricsSnapshot, Sample, ServiceHttp
from ascend_doctor.checks import config, leak, logs, service, tlb

LAB = {"model_name": "m", "engine": "0"}


def server(pid=4711, argv=(), visible=None, model_cmd=("--model", "/models/Qwen3-8B")):
    cmd = ("python3", "-m", "vllm.entrypoints.openai.api_server", *model_cmd, *argv)
    flags, pos = parse_vllm_args(cmd)
    return ServiceProcess(ProcInfo(pid, 1, "python3", cmd, "vllm"), (), flags, pos,
                          visible_devices=visible)


def procs(*servers):
    return ServiceProcesses(tuple(servers))


def pkgs(va="0.23.0"):
    return Packages("3.11", "/usr/bin/python3", "test",
                    {"vllm-ascend": Package("vllm_ascend", va), "vllm": Package("vllm", va)})


def snap(t, **values):
    samples = []
    for name, v in values.items():
        n = name.replace("__", ":")
        if isinstance(v, dict):
            for le, c in v.items():
                samples.append(Sample(n + "_bucket", {**LAB, "le": le}, c))
        else:
            samples.append(Sample(n, dict(LAB), v))
    return MetricsSnapshot(tuple(samples), t)


def http(*scrapes, health=200, error=None, models=200, cc=None):
    eps = {"/health": Endpoint("/health", health, error, 0.003)}
    if health is not None:
        eps["/version"] = Endpoint("/version", 200, None, 0.002, {"version": "0.23.0"})
        eps["/v1/models"] = Endpoint("/v1/models", models, None, 0.002,
                                     {"data": [{"id": "m", "root": "/models/m"}]})
    if cc is not None:
        s = scrapes[-1]
        scrapes = scrapes[:-1] + (MetricsSnapshot(s.samples + (Sample("vllm:cache_config_info",
                                                                      {**cc, "engine": "0"}, 1.0),),
                                                  s.t),)
    return ServiceHttp("http://127.0.0.1:8000", True, eps, tuple(scrapes))


def statuses(findings):
    return [f.status for f in findings]


# -- service ------------------------------------------------------------------------------
def test_health_pass_and_each_failure():
    assert statuses(service.health(http()))[0] == Status.PASS
    cases = {"connection refused (nothing listens there)": "ASC-SVC-001",
             "no answer within 2 s": "ASC-SVC-003",
             "not an HTTP answer (BadStatusLine: x)": "ASC-SVC-004"}
    for err, kb in cases.items():
        f = list(service.health(http(health=None, error=err)))[0]
        assert f.status == Status.FAIL and f.kb == (kb,)
    f = list(service.health(http(health=503)))[0]
    assert f.status == Status.FAIL and f.kb == ("ASC-SVC-002",)
    f = list(service.health(http(models=401)))
    assert f[1].status == Status.INFO and f[1].kb == ("ASC-SVC-011",)


def test_version_pairing():
    assert statuses(service.version(http(), pkgs("0.23.0"))) == [Status.PASS]
    f = list(service.version(http(), pkgs("0.18.0")))[0]
    assert f.status == Status.FAIL and f.fix.id == "versions.pip-match"


def test_metrics_healthy_and_broken():
    calm = http(snap(0, vllm__kv_cache_usage_perc=0.4, vllm__num_requests_waiting=3,
                     vllm__num_preemptions_total=5),
                snap(1, vllm__kv_cache_usage_perc=0.4, vllm__num_requests_waiting=3,
                     vllm__num_preemptions_total=5))
    assert statuses(service.metrics(calm)) == [Status.PASS]
    hot = http(snap(0, vllm__gpu_cache_usage_perc=0.93, vllm__num_requests_waiting=140,
                    vllm__num_preemptions_total=5),
               snap(2, vllm__gpu_cache_usage_perc=0.93, vllm__num_requests_waiting=140,
                    vllm__num_preemptions_total=9))
    fs = list(service.metrics(hot))
    kbs = [f.kb[0] for f in fs if f.kb]
    assert "ASC-SVC-007" in kbs and "ASC-SVC-008" in kbs
    assert "vllm:gpu_cache_usage_perc" in fs[0].message and "5 → 9" in fs[0].message


def test_p99_over_interval_and_disabled_stats():
    b0 = {"0.1": 10.0, "0.5": 10.0, "1.0": 10.0, "+Inf": 10.0}
    b1 = {"0.1": 10.0, "0.5": 10.0, "1.0": 110.0, "+Inf": 110.0}  # 100 new, all in (0.5, 1]
    h = http(snap(0, vllm__time_to_first_token_seconds=b0, vllm__num_requests_waiting=0),
             snap(1, vllm__time_to_first_token_seconds=b1, vllm__num_requests_waiting=0))
    f = next(f for f in service.metrics(h) if f.message.startswith("TTFT"))
    assert f.status == Status.WARN and 0.9 < f.evidence["p99_s"] <= 1.0
    assert "scrape interval" in f.evidence["window"]
    # a slow P99 says nothing of the KV state: its summary (with the preemption counter) stays
    (kv,) = [f for f in service.metrics(h) if "preemptions" in f.evidence]
    assert kv.status == Status.PASS and "0 waiting" in kv.message
    off = http(MetricsSnapshot((Sample("http_requests_total", {"handler": "/health"}, 3.0),), 0))
    f = list(service.metrics(off))[0]
    assert f.status == Status.WARN and f.kb == ("ASC-SVC-005",)


# -- config -------------------------------------------------------------------------------
def test_block_size_version_aware():
    # 0.23 + deepseek_v4 + 16 → falls back to 32: requested vs effective
    sp = server(argv=("--block-size", "16"), model_cmd=("--model", "/models/DeepSeek-V4"))
    fs = list(config.block_size_from(procs(sp), None, pkgs("0.23.0")))
    assert [f.kb for f in fs] == [("ASC-CFG-002",)] and "falls back to 32" in fs[0].message
    # 0.23 + other model + prefix caching default → forced 128
    fs = list(config.block_size_from(procs(server(argv=("--block-size", "16"))), None, pkgs("0.23.0")))
    assert fs[0].evidence["predicted"] == 128
    # both off: 16 is kept → TLB warning with a fix
    sp = server(argv=("--block-size", "16", "--no-enable-prefix-caching",
                      "--no-enable-chunked-prefill"))
    fs = list(config.block_size_from(procs(sp), None, pkgs("0.23.0")))
    assert fs[0].kb == ("ASC-CFG-001",) and fs[0].fix.id == "service.launch-flags"
    # effective from the metrics wins over the prediction
    h = http(snap(0, vllm__num_requests_waiting=0), cc={"block_size": "16"})
    fs = list(config.block_size_from(procs(server()), h, pkgs("0.23.0")))
    assert fs[0].kb == ("ASC-CFG-001",) and fs[0].evidence["effective"] == 16
    # healthy: 128 everywhere
    assert statuses(config.block_size_from(procs(server(argv=("--block-size", "128"))), None,
                                      pkgs("0.23.0"))) == [Status.PASS]
    # 0.7.3 refuses to start
    fs = list(config.block_size_from(procs(server(argv=("--block-size", "16"))), None, pkgs("0.7.3")))
    assert fs[0].status == Status.FAIL


def test_block_size_does_not_error_when_the_package_listing_times_out(sysroot):
    """config.block-size reads the packages only for version-aware advice: a listing that
    timed out leaves the verdict to the flags and says the version is unknown (issue 13.7)."""
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.errors import SourceError, SourceMissing
    from ascend_doctor.registry import ProviderSpec, Registry

    def slow_listing() -> Packages:
        raise SourceError("python3 -c importlib.metadata", "timed out after 10 s")

    def no_http() -> ServiceHttp:
        raise SourceMissing("http://127.0.0.1:8000", "connection refused")

    def servers() -> ServiceProcesses:
        return procs(server(argv=("--block-size", "128")))

    reg = Registry.discover(plugins=False)
    reg.providers[Packages] = ProviderSpec(Packages, slow_listing)
    reg.providers[ServiceHttp] = ProviderSpec(ServiceHttp, no_http)
    reg.providers[ServiceProcesses] = ProviderSpec(ServiceProcesses, servers)
    rep = run(sysroot.host(), RunOptions(), reg, RunConfig(only=("config.block-size",)))
    (r,) = rep.results
    assert r.status == Status.PASS, r.findings
    (f,) = r.findings
    assert "vllm-ascend version unknown" in f.message and "timed out after 10 s" in f.message
    # a check that does need the packages still reports the listing's error
    rep = run(sysroot.host(), RunOptions(), reg, RunConfig(only=("versions.pins",)))
    assert rep.results[0].status == Status.ERROR


def test_batched_tokens_and_gpu_memory():
    f = list(config.batched_tokens(procs(server(argv=("--max-num-batched-tokens", "32768")))))[0]
    assert f.status == Status.WARN and f.fix.params["set"] == [["--max-num-batched-tokens", "8192"]]
    assert statuses(config.batched_tokens(procs(server(argv=("--max-num-batched-tokens", "8192"))))) \
        == [Status.PASS]
    f = list(config.gpu_memory(procs(server(argv=("--gpu-memory-utilization", "0.97"))), None, None))
    assert f[0].status == Status.WARN and f[0].kb == ("ASC-CFG-004",)
    two = procs(server(1, ("--gpu-memory-utilization", "0.6"), visible="0"),
                server(2, ("--gpu-memory-utilization", "0.6"), visible="0"))
    fs = list(config.gpu_memory(two, None, None))
    shared = [f for f in fs if f.kb == ("ASC-CFG-005",)]
    assert len(shared) == 1 and shared[0].status == Status.FAIL and "1.20" in shared[0].message
    apart = procs(server(1, ("--gpu-memory-utilization", "0.6"), visible="0"),
                  server(2, ("--gpu-memory-utilization", "0.6"), visible="1"))
    assert all(f.status == Status.PASS for f in config.gpu_memory(apart, None, None))


def test_parallel_visible_devices_backend_device():
    f = list(config.parallel(procs(server(argv=("--tensor-parallel-size", "8"), visible="0,1,2,3")),
                             None))[0]
    assert f.status == Status.FAIL and f.kb == ("ASC-CFG-006",)
    assert statuses(config.parallel(procs(server(argv=("--tensor-parallel-size", "4"),
                                                   visible="0,1,2,3")), None)) == [Status.PASS]
    fs = list(config.parallel(procs(server(argv=("--distributed-backend", "nccl", "--device",
                                                  "cuda"))), None))
    assert {f.kb[0] for f in fs} == {"ASC-CFG-007", "ASC-CFG-009"}
    assert all(f.status == Status.FAIL for f in fs)


# -- tlb ----------------------------------------------------------------------------------
def rates(minor, major=0, s=3.0):
    return ServiceFaults((FaultRates(4711, s, (ProcRate(4711, "python3", int(minor * s),
                                                        int(major * s), s),)),))


def test_tlb_rules():
    hp = HugePages("never", "madvise", {"HugePages_Total": 0})
    f = list(tlb.faults(rates(12_000), hp, None, None))[0]
    assert f.status == Status.FAIL and f.fix.id == "tlb.hugepages" and "12 000/s" in f.message
    assert "ASC-CFG-001" in f.kb
    assert list(tlb.faults(rates(12_000, 50), hp, None, None))[0].kb == ("ASC-PERF-002",)
    assert statuses(tlb.faults(rates(40), hp, None, None)) == [Status.PASS]
    assert statuses(tlb.hugepages(hp)) == [Status.WARN]
    assert statuses(tlb.hugepages(HugePages("madvise", "madvise", {"HugePages_Total": 0}))) == \
        [Status.INFO]


FAULTER = r"""
import mmap, sys, time
print("go", flush=True)
while True:
    m = mmap.mmap(-1, 4 << 20)
    for off in range(0, 4 << 20, mmap.PAGESIZE):
        m[off] = 1
    m.close()
"""
QUIET = "import sys, time\nprint('go', flush=True)\ntime.sleep(60)\n"


def _spawn(code):
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    p.stdout.readline()
    return p


def test_sampler_tells_faulting_from_quiet_process():
    busy, quiet = _spawn(FAULTER), _spawn(QUIET)
    try:
        host = LiveHost("/")
        rb = sample_faults(host, busy.pid, [busy.pid], 1.0)
        rq = sample_faults(host, quiet.pid, [quiet.pid], 1.0)
    finally:
        for p in (busy, quiet):
            p.kill()
            p.wait()
    assert rb.minor_per_s > 1000 and rb.minor_per_s > 50 * max(rq.minor_per_s, 1)
    assert rq.minor_per_s < 200 and rb.major_per_s < 10
    assert rb.top_threads and rb.top_threads[0].minflt > 0


# -- leak ---------------------------------------------------------------------------------
def trend(values, running=0):
    return NpuMemoryTrend("npu-smi info", tuple(MemPoint(i * 5.0, {"0.0": v}, running)
                                                for i, v in enumerate(values)), 60.0)


def test_leak_rules():
    f = list(leak.npu_memory(trend([20000, 20040, 20090, 20130, 20190, 20230])))[0]
    assert f.status == Status.FAIL and f.kb == ("ASC-PERF-003",)
    assert statuses(leak.npu_memory(trend([20000, 20004, 19998, 20001, 20000]))) == [Status.PASS]
    assert statuses(leak.npu_memory(trend([1, 200, 400, 800], running=3))) == [Status.SKIP]


# -- logs ---------------------------------------------------------------------------------
def test_log_signatures_with_line_numbers(sysroot):
    sysroot.write("/var/log/vllm/server.log",
                  "INFO starting\n"
                  "RuntimeError: Failed to infer device type\n"
                  "INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 "
                  "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 120 "
                  "reqs, GPU KV cache usage: 50.0%, Prefix cache hit rate: 0.0%\n"
                  "EI0006: Getting socket times out. Reason: Remote Rank did not send the data\n")
    src = LogSources((LogFile("/var/log/vllm/server.log", "--log", 400),
                      LogFile("/var/log/missing.log", "--log", None, "not found")))
    fs = list(logs.signatures(gather_log_matches(sysroot.host(), src, gather_knowledge())))
    by_kb = {f.kb[0]: f for f in fs if f.kb}
    assert by_kb["ASC-VER-007"].status == Status.FAIL
    assert by_kb["ASC-VER-007"].evidence["lines"][0]["line"] == 2
    # EI0006 is the connect phase (HCCL_CONNECT_TIMEOUT), not the execution timeout entry
    assert by_kb["ASC-UPS-019"].evidence["lines"][0]["line"] == 4
    assert "ASC-LOG-003" not in by_kb
    assert by_kb["ASC-UPS-019"].evidence["answer"]["source"] == "curated"
    assert by_kb["ASC-SVC-008"].status == Status.FAIL  # the stats line: 120 waiting
    assert any(f.status == Status.ERROR and "missing.log" in f.message for f in fs)


def test_clean_log_passes(sysroot):
    sysroot.write("/var/log/ok.log", "INFO all good\n" * 100)
    src = LogSources((LogFile("/var/log/ok.log", "--log", 1400),))
    fs = list(logs.signatures(gather_log_matches(sysroot.host(), src, gather_knowledge())))
    assert statuses(fs) == [Status.PASS] and "100 lines" in fs[0].message


def test_options_default_sample_seconds():
    assert RunOptions().sample_seconds == 3.0


def test_perf_provider_counted_and_unsupported(sysroot):
    from ascend_doctor.probes.faults import gather_perf_tlb
    p = procs(server())
    sysroot.script("/usr/bin/perf", "echo '81234567,,dTLB-load-misses,1001234567,100.00,,' >&2\n"
                                    "echo '4123456789,,dTLB-loads,1001234567,100.00,,' >&2\n")
    got = gather_perf_tlb(sysroot.host(), p)
    assert got.skipped is None and got.misses == 81234567 and got.loads == 4123456789
    f = list(tlb.perf(got))[0]
    assert f.status == Status.WARN and "1.97 %" in f.message
    sysroot.script("/usr/bin/perf", "echo '<not supported>,,dTLB-load-misses,0,100.00,,' >&2\n")
    got = gather_perf_tlb(sysroot.host(), p)
    assert "not supported" in got.skipped
    assert statuses(tlb.perf(got)) == [Status.SKIP]


def test_env_knobs():
    from ascend_doctor.probes.procs import ServiceEnv
    bad = ServiceEnv({"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
                      "PYTORCH_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "INFO",
                      "HF_TOKEN": "hf_xyz_secret"}, "/proc/4711/environ", 4711)
    fs = list(config.env_knobs(bad))
    assert [f.kb[0] for f in fs] == ["ASC-PERF-004", "ASC-CFG-007"]
    assert fs[0].status == Status.FAIL and fs[0].fix.id == "service.env"
    assert "hf_xyz" not in repr(fs)
    ok = ServiceEnv({"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "HCCL_CONNECT_TIMEOUT": "1200"},
                    "/proc/1/environ", 1)
    f = list(config.env_knobs(ok))[0]
    assert f.status == Status.PASS and "expandable segments on" in f.message


def test_vllm_cli_main_module_is_a_server():
    from ascend_doctor.probes.procs import is_vllm_server
    argv = ("python3", "-m", "vllm.entrypoints.cli.main", "serve", "Qwen/Qwen3-8B", "--port", "9000")
    assert is_vllm_server(argv)
    flags, pos = parse_vllm_args(argv)
    assert pos == "Qwen/Qwen3-8B" and flags == {"port": "9000"}


def _eight() -> "DavinciNodes":
    from ascend_doctor.probes.service import DavinciNodes
    return DavinciNodes(tuple(f"/dev/davinci{i}" for i in range(8)))


def _shared(fs):
    return [f for f in fs if f.kb == ("ASC-CFG-005",)]


def test_two_tp1_servers_without_visible_devices_share_npu_0_only():
    """Without ASCEND_RT_VISIBLE_DEVICES each server takes the first TP×PP NPUs it sees, so
    two TP-1 servers collide on NPU 0 — one fail, not one per /dev/davinci node."""
    two = procs(server(1, ("--gpu-memory-utilization", "0.6")),
                server(2, ("--gpu-memory-utilization", "0.6")))
    (f,) = _shared(config.gpu_memory(two, None, _eight()))
    assert f.subject == "NPU 0" and f.status == Status.FAIL
    assert {i["devices_from"] for i in f.evidence["instances"]} == {"/dev/davinci*"}
    # TP 4 each, no variable: both drive NPUs 0-3
    tp4 = procs(server(1, ("--gpu-memory-utilization", "0.6", "--tensor-parallel-size", "4")),
                server(2, ("--gpu-memory-utilization", "0.6", "--tensor-parallel-size", "4")))
    assert [f.subject for f in _shared(config.gpu_memory(tp4, None, _eight()))] == [
        "NPU 0", "NPU 1", "NPU 2", "NPU 3"]
    # TP 4 on 0-3 and TP 4 on 4-7: apart
    apart = procs(server(1, ("--gpu-memory-utilization", "0.6", "--tensor-parallel-size", "4"),
                         visible="0,1,2,3"),
                  server(2, ("--gpu-memory-utilization", "0.6", "--tensor-parallel-size", "4"),
                         visible="4,5,6,7"))
    assert not _shared(config.gpu_memory(apart, None, _eight()))
    # NPU ids sort as numbers: 10 after 2
    wide = procs(server(1, ("--gpu-memory-utilization", "0.6"), visible="10,2"),
                 server(2, ("--gpu-memory-utilization", "0.6", "--tensor-parallel-size", "2"),
                        visible="10,2"))
    assert [f.subject for f in _shared(config.gpu_memory(wide, None, None))] == ["NPU 10"]


def test_npu_smi_process_table_names_the_devices_a_server_uses():
    """npu-smi's process table (the real A2 layout: pid 124528 holds NPU 0) is the direct
    evidence: a worker of the server there puts the server on that NPU whatever its
    environment says or could not say."""
    from ascend_doctor.host import CommandResult
    from ascend_doctor.probes.npusmi import NpuSmi, parse_npu_smi_info
    from tests.fixtures.npusmi import A2
    smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi", "info"), 0, A2.encode(), b"", 0.1),
                 parse_npu_smi_info(A2))
    worker = ProcInfo(124528, 1, "VLLMWorker_TP0", ("VLLMWorker_TP0",), "vllm")
    a = server(1, ("--gpu-memory-utilization", "0.6"), visible="1")
    a = type(a)(a.proc, (worker,), a.args, a.model, visible_devices="1")  # env says 1, smi says 0
    b = server(2, ("--gpu-memory-utilization", "0.6"), visible="0")
    (f,) = _shared(config.gpu_memory(procs(a, b), None, _eight(), smi))
    assert f.subject == "NPU 0"
    assert {i["pid"]: i["devices_from"] for i in f.evidence["instances"]} == {
        1: "npu-smi", 2: "ASCEND_RT_VISIBLE_DEVICES"}
    # a server whose environment could not be read is judged from npu-smi, not left unknown
    c = type(b)(ProcInfo(3, 1, "python3", b.proc.cmdline, "vllm"), (worker,), b.args, b.model,
                visible_devices=None, env_error="permission denied")
    fs = list(config.gpu_memory(procs(c, b), None, _eight(), smi))
    assert [f.subject for f in _shared(fs)] == ["NPU 0"]
    assert not any("not judged" in f.message for f in fs)
    # without the table the same pair is not judged for pid 3
    fs = list(config.gpu_memory(procs(c, b), None, _eight()))
    assert not _shared(fs) and any("not judged" in f.message and "pid 3" in f.message for f in fs)
