"""Load-client DNS and msprof memcpy of the seed (000_93c34712512482cd.txt §4.2, §5.2, §3.4).

* a capture taken on the jmeter host: every request resolves api.deepseek.example.com
  first (100 queries/s) while the resolver slows from 1 ms to 200 ms; written with struct
  (deterministic, a few thousand packets);
* a copy-bound msprof export: MEMCPY_ASYNC of the same 384 MiB host-to-device buffer in
  every step (weights copied per inference): 72 % of the device time, and of the ACL API time;
* the host side: a benchmark client on this host, no local DNS cache, ndots:5, a narrowed
  ephemeral port range full of TIME_WAIT toward port 8000.

``DEMO_INPUTS`` tells the demo run where the capture and the profile are (build.py puts
them in the manifest as ``demo_inputs``; ``ascend-doctor demo`` reads them).
"""

from __future__ import annotations

import json
import socket
import struct

from ...bundle import BundleWriter
from ...host import Connection

PCAP = "/var/lib/ascend-doctor/demo/jmeter-10.0.1.21.pcap"
PROF = "/var/lib/ascend-doctor/demo/profiling/PROF_000001_20261120031749197_00815596RKPKAHRB"
DEMO_INPUTS = {"pcap": PCAP, "profile_dir": PROF}

NAME = "api.deepseek.example.com"
CLIENT, RESOLVER, SERVICE = "10.0.1.21", "10.0.0.53", "192.168.1.100"
T0 = 1_763_608_320.0  # 2025-11-20 03:12:00 UTC


def _frame(src: str, dst: str, proto: int, l4: bytes) -> bytes:
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    return b"\x52\x54\x00\x12\x35\x02\x52\x54\x00\xab\xcd\x15\x08\x00" + ip + l4


def _qname() -> bytes:
    return b"".join(bytes([len(p)]) + p.encode() for p in NAME.split(".")) + b"\0"


def capture(requests: int = 1000, rate: float = 100.0) -> bytes:
    """A pcap of ``requests`` lookups + answers + SYNs; resolver latency 1 → 200 ms."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))

    def rec(ts: float, frame: bytes) -> None:
        sec = int(ts)
        out.extend(struct.pack("<IIII", sec, int(round((ts - sec) * 1e6)), len(frame), len(frame)))
        out.extend(frame)

    q = _qname()
    for i in range(requests):
        t = T0 + i / rate
        lat = 0.001 + 0.199 * min(1.0, i / (requests * 0.6))  # the resolver saturates
        qid, sport, cport = (0x1000 + i * 7) & 0xFFFF, 32768 + (i * 13) % 28000, 40000 + i
        query = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + b"\0\x01\0\x01"
        answer = (struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + q + b"\0\x01\0\x01"
                  + b"\xc0\x0c\0\x01\0\x01\0\0\0\x1e\0\x04" + socket.inet_aton(SERVICE))
        rec(t, _frame(CLIENT, RESOLVER, 17, struct.pack(">HHHH", sport, 53, 8 + len(query), 0)
                      + query))
        rec(t + lat, _frame(RESOLVER, CLIENT, 17, struct.pack(">HHHH", 53, sport,
                                                              8 + len(answer), 0) + answer))
        rec(t + lat + 0.0003, _frame(CLIENT, SERVICE, 6, struct.pack(
            ">HHIIBBHHH", cport, 8000, 1000 + i, 0, 0x50, 0x02, 64240, 0, 0)))
    return bytes(out)


OP_HEADER = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
             "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,"
             "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
             "Output Data Types,Output Formats,Context ID,aicore_time(us),total_cycles")
API_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance"
STEPS = 24
WEIGHTS = 384 << 20


def op_summary() -> str:
    ops = [("MatMulV2", "AI_CORE", "1,7168;7168,2048", 410.25), ("FlashAttentionScore", "AI_CORE",
           "1,128,192;1,128,192", 230.5), ("RmsNorm", "AI_VECTOR_CORE", "1,7168;7168", 18.75),
           ("Add", "AI_VECTOR_CORE", "1,7168;1,7168", 9.5)]
    lines, t, task = [OP_HEADER], 1_763_608_400_000_000.0, 1
    for step in range(STEPS):
        # the loader uploads the weights again before each inference (the seed's bug)
        lines.append(f"0,4294967295,{task},3,MEMCPY_ASYNC,MEMCPY_ASYNC,N/A,MEMCPY_ASYNC,{t:.3f},"
                     "13750.5,0.5,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A")
        t += 13751
        task += 1
        for layer in range(8):
            for name, core, shapes, dur in ops:
                lines.append(f'0,4294967295,{task},2,model.layers.{layer}.{name},{name},dynamic,'
                             f'{core},{t:.3f},{dur + (layer % 3) * 0.25},0.2,24,0,NO,"{shapes}",'
                             'DT_BF16;DT_BF16,ND;ND,"1,7168",DT_BF16,ND,N/A,'
                             f'{dur * 0.93:.3f},{int(dur * 1850)}')
                t += dur + 1.5
                task += 1
    return "\r\n".join(lines) + "\r\n"


def api_statistic() -> str:
    rows = [API_HEADER,
            f"host,acl,aclrtMemcpyAsync,{STEPS * 24200.0:.3f},{STEPS},24200.0,24111.2,24390.4,2210.7",
            f"host,acl,aclmdlExecute,{STEPS * 8850.0:.3f},{STEPS},8850.0,8790.0,8960.1,300.2",
            f"host,acl,aclrtSynchronizeStream,{STEPS * 420.5:.3f},{STEPS},420.5,400.1,455.0,12.1",
            f"host,runtime,rtKernelLaunch,{STEPS * 32 * 4.1:.3f},{STEPS * 32},4.1,3.2,9.9,0.4"]
    return "\r\n".join(rows) + "\r\n"


def timeline() -> str:
    ev = []
    for step in range(STEPS):
        ts = 1_763_608_400_000_000.0 + step * 30000.0
        ev.append({"name": "MEMCPY_ASYNC", "pid": 2002, "tid": 3, "ts": f"{ts:.3f}",
                   "dur": 13750.5, "ph": "X", "args": {
                       "Task Type": "MEMCPY_ASYNC", "Physic Stream Id": 3, "Task Id": step + 1,
                       "size(B)": WEIGHTS, "bandwidth(GB/s)": 29.28,
                       "operation": "host to device"}})
        ev.append({"name": "MatMulV2", "pid": 2002, "tid": 2, "ts": f"{ts + 13751:.3f}",
                   "dur": 410.25, "ph": "X", "args": {"Task Type": "AI_CORE"}})
    return json.dumps(ev, separators=(",", ":"))


def build(w: BundleWriter) -> None:
    w.file(PCAP, capture())
    out = f"{PROF}/mindstudio_profiler_output"
    w.file(f"{out}/op_summary_20261120031901.csv", op_summary())
    w.file(f"{out}/api_statistic_20261120031901.csv", api_statistic())
    w.file(f"{out}/msprof_20261120031901.json", timeline())
    # the host side of seed §3.4 / §5.2
    w.file("/etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tatlas800t-a2-07\n"
           "::1\tlocalhost ip6-localhost ip6-loopback\n")
    w.file("/etc/resolv.conf", "# Generated by NetworkManager\nsearch corp.example.com "
           "example.com\nnameserver 10.0.0.53\noptions ndots:5 timeout:5 attempts:3\n")
    w.file("/proc/sys/net/ipv4/ip_local_port_range", "50000\t51999\n")
    w.file("/proc/sys/net/ipv4/tcp_fin_timeout", "60\n")
    w.file("/proc/sys/net/ipv4/tcp_tw_reuse", "0\n")
    w.process(5120, 1, ["/usr/bin/python3", "benchmark_serving.py", "--backend", "vllm",
                        "--host", NAME, "--port", "8000", "--request-rate", "100"],
              files={"stat": "5120 (python3) S 1 5120 5120 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 "
                             "4 0 9000 0 0\n"})
    tw = [Connection("inet", "tcp", ("192.168.1.7", 50000 + i), (SERVICE, 8000), "TIME_WAIT")
          for i in range(1400)]
    existing = w.data.get("connections", "")
    prior = [Connection(c["family"], c["type"], tuple(c["laddr"]),
                        tuple(c["raddr"]) if c.get("raddr") else None, c["status"], c.get("pid"))
             for c in (existing[0] if existing else [])]
    w.connections(prior + tw)
