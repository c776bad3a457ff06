"""Parsers of the service probes: vLLM argv, the --config YAML subset, /proc/<pid>/stat,
Prometheus exposition, THP / meminfo, perf CSV, npu-smi HBM — real formats plus fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from ascend_doctor.errors import ParseError
from ascend_doctor.probes.faults import (parse_meminfo, parse_perf_csv, parse_proc_stat, parse_thp_mode,
                                  rates_between)
from ascend_doctor.probes.leak import parse_npusmi_hbm
from ascend_doctor.probes.logs import parse_stats_line
from ascend_doctor.probes.procs import is_worker, parse_simple_yaml, parse_vllm_args
from ascend_doctor.probes.service import bucket_delta, histogram_quantile, parse_metrics
from ascend_doctor.host import ProcInfo
from tests.fixtures.npusmi import A2


def test_args_all_forms():
    flags, pos = parse_vllm_args(["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
                                  "--model", "/m/DeepSeek-V4", "--block-size=16",
                                  "--no-enable-prefix-caching", "--enforce-eager",
                                  "--max_num_seqs", "256", "--port", "8000"])
    assert flags == {"model": "/m/DeepSeek-V4", "block-size": "16", "enable-prefix-caching": False,
                     "enforce-eager": True, "max-num-seqs": "256", "port": "8000"}
    assert pos is None


def test_vllm_serve_positional_model_and_bool_flag_before_it():
    flags, pos = parse_vllm_args(["/opt/venv/bin/vllm", "serve", "--trust-remote-code",
                                  "Qwen/Qwen3-8B", "--tensor-parallel-size", "2"])
    assert pos == "Qwen/Qwen3-8B" and flags["trust-remote-code"] is True
    assert flags["tensor-parallel-size"] == "2"


def test_yaml_subset_and_nested_rejected():
    assert parse_simple_yaml("model: 'Qwen/Qwen3-8B'  # served\nenable_chunked_prefill: true\n"
                             "gpu-memory-utilization: 0.85\n") == {
        "model": "Qwen/Qwen3-8B", "enable-chunked-prefill": True, "gpu-memory-utilization": "0.85"}
    with pytest.raises(ParseError, match="line 2: nested"):
        parse_simple_yaml("additional_config:\n  torchair_graph_config: {}\n")


def test_workers_by_title():
    assert is_worker(ProcInfo(2, 1, "VLLM::EngineCor", ("VLLM::EngineCore",)))
    assert is_worker(ProcInfo(3, 2, "VLLMWorker_TP3", ("VLLMWorker_TP3",)))
    assert not is_worker(ProcInfo(4, 1, "python3", ("python3", "train.py")))


STAT = ("4711 (python3) S 1 4711 4711 0 -1 4194560 1204511 0 3 0 81234 9321 0 0 20 0 41 0 "
        "1234567 98765432192 1310720 18446744073709551615 1 1 0 0 0 0 0 16781312 16386 0 0 0 17 "
        "3 0 0 0 0 0\n")


def test_proc_stat_real_and_tricky_comm():
    s = parse_proc_stat(STAT)
    assert (s.pid, s.comm, s.ppid, s.minflt, s.majflt, s.num_threads) == (4711, "python3", 1,
                                                                          1204511, 3, 41)
    tricky = STAT.replace("(python3)", "(a) b (c))")
    assert parse_proc_stat(tricky).comm == "a) b (c)"
    assert parse_proc_stat(open("/proc/self/stat").read()).num_threads >= 1


def test_proc_stat_broken():
    for bad in ("", "4711 python3 S 1", "x (a) S 1 2 3", "4711 (a) S 1 2"):
        with pytest.raises(ParseError):
            parse_proc_stat(bad)


def test_rates_skip_reused_pid():
    a = {1: parse_proc_stat(STAT)}
    b = {1: parse_proc_stat(STAT.replace("(python3)", "(other)"))}
    assert rates_between(a, b, 1.0) == []


@given(st.text(max_size=300))
def test_fuzz_proc_stat(text):
    try:
        parse_proc_stat(text)
    except ParseError:
        pass


@given(st.binary(max_size=200), st.integers(0, len(STAT)))
def test_fuzz_proc_stat_mutated(noise, at):
    text = STAT[:at] + noise.decode("latin-1") + STAT[at:]
    try:
        parse_proc_stat(text)
    except ParseError:
        pass


@given(st.lists(st.text(max_size=30), max_size=30))
def test_fuzz_args(argv):
    flags, pos = parse_vllm_args(argv)
    assert all(isinstance(k, str) for k in flags)
    assert pos is None or isinstance(pos, str)


@given(st.text(max_size=400))
def test_fuzz_yaml(text):
    try:
        parse_simple_yaml(text)
    except ParseError:
        pass


def _exposition() -> str:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
    reg = CollectorRegistry()
    lab = ["model_name", "engine"]
    Gauge("vllm:kv_cache_usage_perc", "KV", lab, registry=reg).labels("m", "0").set(0.42)
    Counter("vllm:num_preemptions", "p", lab, registry=reg).labels("m", "0").inc(2)
    h = Histogram("vllm:e2e_request_latency_seconds", "e2e", lab, registry=reg,
                  buckets=[0.3, 0.5, 0.8, 1.0, 1.5, 2.0])
    for v in [0.2] * 90 + [1.2] * 9 + [1.9]:
        h.labels("m", "0").observe(v)
    return generate_latest(reg).decode()


def test_metrics_real_exposition_and_quantile():
    snap = parse_metrics(_exposition())
    assert snap.value("vllm:num_preemptions_total") == 2.0  # the _total rule
    assert snap.value("vllm:kv_cache_usage_perc") == 0.42
    b = snap.buckets("vllm:e2e_request_latency_seconds")
    q = histogram_quantile(0.99, b)
    assert 1.5 <= q <= 2.0
    assert histogram_quantile(0.5, b) <= 0.3
    assert bucket_delta(b, b) == {k: 0.0 for k in b}


@pytest.mark.parametrize("body", ["<html><body>502 Bad Gateway</body></html>", '{"detail":"x"}',
                                  "hello world\n", 'vllm:x{a="1"} 3\nvllm:y{a="'])
def test_metrics_not_prometheus(body):
    with pytest.raises(ParseError):
        parse_metrics(body)


@given(st.text(max_size=500))
def test_fuzz_metrics(text):
    try:
        parse_metrics(text)
    except ParseError:
        pass


@given(st.integers(0, 2000), st.text(max_size=40))
def test_fuzz_metrics_mutated(at, noise):
    text = _exposition()
    try:
        parse_metrics(text[:at] + noise + text[at:])
    except ParseError:
        pass


def test_thp_meminfo_perf():
    assert parse_thp_mode("always [madvise] never\n") == "madvise"
    mem = parse_meminfo(open("/proc/meminfo").read())
    assert "MemTotal" in mem and "HugePages_Total" in mem
    with pytest.raises(ParseError):
        parse_thp_mode("garbage")
    assert parse_perf_csv("12345,,dTLB-load-misses:u,1000,100.00,,\n<not supported>,,dTLB-loads,0,"
                          "100.00,,\n") == {"dTLB-load-misses": 12345, "dTLB-loads": None}




def test_npusmi_hbm_reader():
    assert parse_npusmi_hbm(A2) == {"0.0": (3373, 65536), "1.0": (20701, 65536)}
    with pytest.raises(ParseError):
        parse_npusmi_hbm("command not found")


@given(st.text(max_size=300))
def test_fuzz_npusmi(text):
    try:
        parse_npusmi_hbm(text)
    except ParseError:
        pass


def test_stats_line_v1():
    st_ = parse_stats_line("INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: "
                           "5198.0 tokens/s, Avg generation throughput: 903.2 tokens/s, Running: 48 "
                           "reqs, Waiting: 140 reqs, GPU KV cache usage: 97.0%, Prefix cache hit "
                           "rate: 0.0%", 7)
    assert (st_.running, st_.waiting, st_.kv_percent, st_.line_no) == (48, 140, 97.0, 7)
    assert parse_stats_line("nothing here") is None
