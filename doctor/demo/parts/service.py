"""The vLLM service of the demo host, as seed 000_93c34712512482cd.txt found it under load.

pid 4711 runs DeepSeek-V4 with --block-size 16 (vllm-ascend 0.23 runs 32 for deepseek_v4),
--max-num-batched-tokens 32768 and --gpu-memory-utilization 0.97, started without
set_env.sh (no ASCEND_HOME_PATH, no Ascend dirs in LD_LIBRARY_PATH) and with an HF_TOKEN
that must come out redacted. Its EngineCore and eight TP workers fault ≈12 000 minor pages/s
with 0 major over the 3 s window; /metrics shows KV cache 97 %, 140 waiting and preemptions
rising; its stdout is /var/log/vllm/server.log with real error lines.
"""

from __future__ import annotations

import json

from ...bundle import BundleWriter
from ...host import Connection

PID = 4711
ENGINE = 4720
WORKERS = tuple(range(4731, 4739))
MODEL = "/models/DeepSeek-V4"
SERVED = "deepseek-v4"
BASE = "http://127.0.0.1:8000"

CMDLINE = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL,
           "--served-model-name", SERVED, "--block-size", "16",
           "--max-num-batched-tokens", "32768", "--gpu-memory-utilization", "0.97",
           "--tensor-parallel-size", "8", "--max-model-len", "131072", "--max-num-seqs", "256",
           "--dtype", "bfloat16", "--no-enable-prefix-caching", "--host", "0.0.0.0",
           "--port", "8000"]

ENVIRON = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/home/vllm", "USER": "vllm", "LANG": "C.UTF-8",
    "LD_LIBRARY_PATH": "/usr/local/lib:/usr/lib/x86_64-linux-gnu",
    "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
    "NCCL_SOCKET_IFNAME": "eth0",  # copied from a GPU host: no effect on Ascend
    "HF_TOKEN": "hf_demoSecretToken1234567890abcdef",
    "VLLM_API_KEY": "sk-demo-0123456789abcdef",
}


def stat_line(pid: int, comm: str, ppid: int, minflt: int, majflt: int, threads: int,
              rss_pages: int) -> str:
    """A /proc/<pid>/stat line in the kernel's field order (proc(5))."""
    fields = [str(pid), f"({comm})", "S", str(ppid), str(pid), str(pid), "0", "-1", "4194560",
              str(minflt), "0", str(majflt), "0", "81234", "9321", "0", "0", "20", "0",
              str(threads), "0", "1234567", "98765432192", str(rss_pages)]
    fields += ["18446744073709551615"] + ["0"] * 27
    return " ".join(fields) + "\n"


def _labels(**kw: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(kw.items())) + "}"


TTFT_LE = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5",
           "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0",
           "640.0", "2560.0", "+Inf"]
E2E_LE = ["0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0",
          "30.0", "40.0", "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0",
          "7680.0", "+Inf"]


def _hist(name: str, help_: str, les: list[str], cumulative: list[float], total: float) -> str:
    lab = {"engine": "0", "model_name": SERVED}
    out = [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
    for le, c in zip(les, cumulative):
        out.append(f"{name}_bucket{_labels(le=le, **lab)} {c:.1f}")
    out.append(f"{name}_count{_labels(**lab)} {cumulative[-1]:.1f}")
    out.append(f"{name}_sum{_labels(**lab)} {total}")
    return "\n".join(out)


def _cum(counts: list[int]) -> list[float]:
    acc, out = 0.0, []
    for c in counts:
        acc += c
        out.append(acc)
    return out


def metrics_text(step: int) -> str:
    """vLLM 0.23-style exposition (V1 names, {engine, model_name}) plus NPU exporter series."""
    lab = _labels(engine="0", model_name=SERVED)
    pre = 310 + 24 * step
    # TTFT: between the scrapes 40 requests finished, 9 of them after more than 0.5 s
    ttft = [0, 0, 0, 2, 30, 120, 310, 520, 900, 410, 160, 70, 30, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0]
    if step:
        for i, extra in ((8, 12), (9, 19), (10, 4), (11, 3), (12, 2)):
            ttft[i] += extra
    e2e = [0, 0, 0, 0, 3, 20, 60, 900, 1200, 240, 90, 40, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    if step:
        for i, extra in ((7, 18), (8, 14), (9, 5), (10, 2), (11, 1)):
            e2e[i] += extra
    cc = _labels(block_size="32", cache_dtype="auto", calculate_kv_scales="False",
                 cpu_offload_gb="0", enable_prefix_caching="False", engine="0",
                 gpu_memory_utilization="0.97", is_attention_free="False",
                 num_cpu_blocks="None", num_gpu_blocks="18432", num_gpu_blocks_override="None",
                 prefix_caching_hash_algo="sha256", sliding_window="None", swap_space="4")
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{lab} {48 + step:.1f}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{lab} {138 + 2 * step:.1f}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{lab} {0.96 + 0.01 * step}",
        "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{lab} {pre:.1f}",
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{lab} {81234567 + 52000 * step:.1f}",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{lab} {12345678 + 9100 * step:.1f}",
        _hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              TTFT_LE, _cum(ttft), 1321.7 + 31.2 * step),
        _hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              E2E_LE, _cum(e2e), 12873.1 + 210.4 * step),
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f"vllm:cache_config_info{cc} 1.0",
    ]
    return "\n".join(lines) + "\n"


def npu_exporter_text() -> str:
    """Huawei npu-exporter's /metrics on its own port (8082), in its format (the label set of
    its own test data, tests/fixtures/npu_exporter/): the same chips as npu-smi shows them
    (parts/stack.py), HBM in MB, utilization in %, health 1/0 (NPU 5's Warning is 0)."""
    from .stack import LEAK_NPU, NPUS, WARN_NPU

    temps = [47, 49, 46, 86, 48, 51, 45, 44]
    rows = {
        "hbm_total_memory": ("the npu hbm total memory", lambda i: 32768),
        "hbm_used_memory": ("the npu hbm used memory",
                            lambda i: 5200 if i == LEAK_NPU else 27420),
        "health_status": ("the npu health status", lambda i: 0 if i == WARN_NPU else 1),
        "power": ("the npu power", lambda i: 88.0 + i),
        "temperature": ("the npu temperature", lambda i: temps[i]),
        "utilization": ("the ai core utilization", lambda i: 0 if i == LEAK_NPU else 71 + i),
    }
    lines = ["# HELP machine_npu_nums Amount of npu installed on the machine.",
             "# TYPE machine_npu_nums gauge", f"machine_npu_nums {NPUS}"]
    for name, (help_text, value) in rows.items():
        lines += [f"# HELP npu_chip_info_{name} {help_text}", f"# TYPE npu_chip_info_{name} gauge"]
        for i in range(NPUS):
            lines.append(f'npu_chip_info_{name}{{container_name="",id="{i}",model_name="910B4",'
                         f'namespace="",pcie_bus_info="",pod_name="",vdie_id=""}} {value(i):g}')
    return "\n".join(lines) + "\n"


MEMINFO = """MemTotal:       1583282176 kB
MemFree:        402918400 kB
MemAvailable:   1290471424 kB
Buffers:          3311616 kB
Cached:         871735296 kB
SwapCached:             0 kB
Active:         301456384 kB
Inactive:       842235904 kB
AnonPages:      266182656 kB
Mapped:          12845056 kB
Shmem:            1181696 kB
PageTables:       2712576 kB
SwapTotal:              0 kB
SwapFree:               0 kB
AnonHugePages:          0 kB
ShmemHugePages:         0 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:                0 kB
"""

SERVER_LOG = """INFO 11-20 02:41:07 [__init__.py:43] Available plugins for group vllm.platform_plugins:
INFO 11-20 02:41:07 [__init__.py:45] - ascend -> vllm_ascend:register
INFO 11-20 02:41:07 [__init__.py:235] Platform plugin ascend is activated
INFO 11-20 02:41:12 [api_server.py:1896] vLLM API server version 0.23.0
INFO 11-20 02:47:58 [kv_cache_utils.py:1087] GPU KV cache size: 589,824 tokens
INFO 11-20 02:47:58 [kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 4.50x
INFO 11-20 02:48:31 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
INFO 11-20 03:05:42 [loggers.py:123] Engine 000: Avg prompt throughput: 5210.4 tokens/s, Avg generation throughput: 911.7 tokens/s, Running: 46 reqs, Waiting: 97 reqs, GPU KV cache usage: 93.1%, Prefix cache hit rate: 0.0%
INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: 5198.0 tokens/s, Avg generation throughput: 903.2 tokens/s, Running: 48 reqs, Waiting: 140 reqs, GPU KV cache usage: 97.0%, Prefix cache hit rate: 0.0%
ERROR 11-20 03:06:09 [serving_chat.py:1210] Error in chat completion stream generator.
RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB total capacity; 27.91 GiB already allocated; 27.91 GiB current active; 1.02 GiB free; 28.02 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
[ERROR] 2026-11-20-03:06:09 (PID:4733, Device:2, RankID:2) ERR00100 PTA call acl api failed
ERROR 11-20 03:07:31 [core.py:711] ACL_ERROR_NOT_ENOUGH_MEMORY while allocating the decode workspace on device 2
INFO 11-20 03:08:02 [loggers.py:123] Engine 000: Avg prompt throughput: 5187.3 tokens/s, Avg generation throughput: 899.8 tokens/s, Running: 49 reqs, Waiting: 142 reqs, GPU KV cache usage: 97.0%, Prefix cache hit rate: 0.0%
"""


# the service user is in HwHiAiUser (gid 1000), the group of /dev/davinci*
STATUS = ("Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4711\nPid:\t4711\n"
          "PPid:\t1\nUid:\t1001\t1001\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\n"
          "Groups:\t1000 1001 \nVmRSS:\t 5242880 kB\nThreads:\t41\n")


def build(w: BundleWriter) -> None:
    # the server, its EngineCore and its eight TP workers; 36 000 minor faults in 3 s, 0 major
    w.process(PID, 1, CMDLINE, user="vllm", uid=1001, exe="/usr/local/bin/python3.11",
              environ=ENVIRON,
              files={"status": STATUS,
                     "stat": [stat_line(PID, "python3", 1, 1_204_511, 0, 41, 1_310_720),
                              stat_line(PID, "python3", 1, 1_205_111, 0, 41, 1_310_720)]})
    w.process(ENGINE, PID, ["VLLM::EngineCore"], user="vllm", uid=1001,
              exe="/usr/local/bin/python3.11",
              files={"stat": [stat_line(ENGINE, "VLLM::EngineCor", PID, 3_120_880, 0, 57, 2_621_440),
                              stat_line(ENGINE, "VLLM::EngineCor", PID, 3_122_680, 0, 57, 2_621_440)]})
    for i, wpid in enumerate(WORKERS):
        base = 9_800_000 + 1_000 * i
        w.process(wpid, ENGINE, [f"VLLMWorker_TP{i}"], user="vllm", uid=1001,
                  exe="/usr/local/bin/python3.11",
                  files={"stat": [stat_line(wpid, f"VLLMWorker_TP{i}", ENGINE, base, 0, 88, 4_194_304),
                                  stat_line(wpid, f"VLLMWorker_TP{i}", ENGINE, base + 4_200, 0, 88,
                                            4_194_304)]})
    w.clock(f"tlb:{PID}", [51234.20, 51237.20])
    w.connections([Connection("inet", "tcp", ("0.0.0.0", 8000), None, "LISTEN", PID),
                   Connection("inet", "tcp", ("127.0.0.1", 8000), ("127.0.0.1", 51514),
                              "ESTABLISHED", PID)])
    # the service's stdout/stderr go to a regular file
    w.symlink(f"/proc/{PID}/fd/1", "/var/log/vllm/server.log")
    w.symlink(f"/proc/{PID}/fd/2", "/var/log/vllm/server.log")
    w.file("/var/log/vllm/server.log", SERVER_LOG, uid=1001)
    # HTTP answers at the default URL
    w.http(f"{BASE}/health", 200, b"", duration=0.004)
    w.http(f"{BASE}/version", 200, json.dumps({"version": "0.23.0"}),
           {"content-type": "application/json"})
    w.http(f"{BASE}/v1/models", 401, json.dumps({"error": "Unauthorized"}),
           {"content-type": "application/json"})
    w.clock("metrics", [51230.00, 51231.00])
    for step in (0, 1):
        w.http(f"{BASE}/metrics", 200, metrics_text(step),
               {"content-type": "text/plain; version=0.0.4; charset=utf-8"}, duration=0.021)
    # Huawei's npu-exporter on its own port
    w.http("http://127.0.0.1:8082/metrics", 200, npu_exporter_text(),
           {"content-type": "text/plain; version=0.0.4; charset=utf-8"}, duration=0.012)
    # host memory: THP off, no HugePages reserved
    w.file("/sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
    w.file("/sys/kernel/mm/transparent_hugepage/defrag",
           "always defer defer+madvise [madvise] never\n")
    w.file("/proc/meminfo", MEMINFO)
