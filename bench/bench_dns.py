"""DNS analysis of a 1,000,000-packet capture vs `tshark -r FILE -Y dns`, side by side.

The capture is built with struct (not scapy: a million scapy packets take minutes): load
clients that resolve per request (query, answer, SYN, SYN-ACK, ACK, request, response, FIN,
FIN, ACK), so a fifth of the packets are DNS and the rest must be skipped fast.
Each side runs in a child process; peak RSS comes from os.wait4's rusage of that child.
Ours reads its modules from .pyc, as an installed wheel does; one row per size runs it with
every module compiled on each run (this environment's PYTHONDONTWRITEBYTECODE; rows
before 2026-12-06 ran in whichever state the checkout was, without saying). A last row per size
runs the same command with ASCEND_DOCTOR_PCAP_ENGINE=python (the pure-Python path), so the
C scanner's share stays visible.
Run: python bench/bench_dns.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = b"".join(bytes([len(p)]) + p for p in b"api.deepseek.example.com".split(b"."))


def _eth_ip(src: bytes, dst: bytes, proto: int, l4: bytes) -> bytes:
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0, src, dst)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip + l4


def _udp(sp: int, dp: int, payload: bytes) -> bytes:
    return struct.pack(">HHHH", sp, dp, 8 + len(payload), 0) + payload


def _tcp(sp: int, dp: int, flags: int, payload: bytes = b"") -> bytes:
    return struct.pack(">HHIIBBHHH", sp, dp, 1, 1, 0x50, flags, 65535, 0, 0) + payload


def write_capture(path: str, packets: int) -> int:
    """A pcap of ``packets`` packets from 50 clients; returns the count written."""
    resolver, service = socket.inet_aton("10.0.0.53"), socket.inet_aton("192.168.1.100")
    body = b"POST /v1/completions HTTP/1.1\r\nHost: api\r\n\r\n" + b"x" * 150
    reply = b"HTTP/1.1 200 OK\r\n\r\n" + b"y" * 400
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    rec = struct.Struct("<IIII").pack
    n = 0
    t = 1_767_225_600.0
    i = 0
    with open(path, "wb") as fh:
        while n < packets:
            client = socket.inet_aton(f"10.0.1.{i % 50 + 1}")
            qid, sp, cp = i & 0xFFFF, 20000 + i % 40000, 40000 + i % 20000
            q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + NAME + b"\0\0\x01\0\x01"
            a = (struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + NAME + b"\0\0\x01\0\x01"
                 + b"\xc0\x0c\0\x01\0\x01\0\0\0\x3c\0\x04" + service)
            frames = [
                (0.0, _eth_ip(client, resolver, 17, _udp(sp, 53, q))),
                (0.002, _eth_ip(resolver, client, 17, _udp(53, sp, a))),
                (0.0025, _eth_ip(client, service, 6, _tcp(cp, 8000, 0x02))),
                (0.0026, _eth_ip(service, client, 6, _tcp(8000, cp, 0x12))),
                (0.0027, _eth_ip(client, service, 6, _tcp(cp, 8000, 0x10))),
                (0.0028, _eth_ip(client, service, 6, _tcp(cp, 8000, 0x18, body))),
                (0.05, _eth_ip(service, client, 6, _tcp(8000, cp, 0x18, reply))),
                (0.051, _eth_ip(client, service, 6, _tcp(cp, 8000, 0x11))),
                (0.052, _eth_ip(service, client, 6, _tcp(8000, cp, 0x11))),
                (0.053, _eth_ip(client, service, 6, _tcp(cp, 8000, 0x10))),
            ]
            for dt, f in frames:
                if n >= packets:
                    break
                ts = t + dt
                sec = int(ts)
                out += rec(sec, int((ts - sec) * 1e6), len(f), len(f))
                out += f
                n += 1
            t += 0.01
            i += 1
            if len(out) > 1 << 22:
                fh.write(out)
                out.clear()
        fh.write(out)
    return n


def _child(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit status) of one child process (GNU time's %M)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import measure_once

    wall, rss, rc = measure_once(argv)
    if rc:
        raise RuntimeError(f"{argv[0]} exited {rc}")
    return wall, rss, rc


OURS = ("import sys; from ascend_doctor.probes.dnsstats import analyse_capture;"
        "t = analyse_capture(open(sys.argv[1], 'rb'), sys.argv[1], (8000,));"
        "c = t.clients[0]; print(t.records, t.dns_messages, t.syns, c.per_request_fraction)")


def run(quick: bool = False) -> list[dict]:
    """One block of rows per size (10⁴, 10⁵, 10⁶ packets), so the table shows how cost grows."""
    rows: list[dict] = []
    for packets in ((10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)):
        rows += _run_size(packets)
    return rows


def _count(argv: list[str]) -> int:
    """Lines a peer prints (one per matching packet)."""
    out = subprocess.run(argv, capture_output=True, check=True).stdout
    return out.count(b"\n")


def _pcapng_rows(path: str, base: str, tmp: str, env: dict, n: int) -> list[dict]:
    """The same capture as a user saves it: pcapng written by ``editcap -F pcapng`` (the
    Wireshark suite), read by ours, tcpdump and tshark; the DNS packet counts are compared."""
    from common import measure_pair

    if not shutil.which("editcap"):
        return [{"name": f"{base} as pcapng", "ours_s": None, "peer": None, "peer_s": None,
                 "ours_rss_mb": None, "peer_rss_mb": None, "note": "editcap not installed"}]
    ng = path + "ng"
    subprocess.run(["editcap", "-F", "pcapng", path, ng], check=True, capture_output=True)
    with open(ng, "rb") as fh:
        assert fh.read(4) == b"\x0a\x0d\x0d\x0a", "editcap did not write pcapng"
    argv = [sys.executable, "-c", OURS, ng]
    ours_out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout
    dns = int(ours_out.split()[1])
    rows = []
    for tool, peer in (("tcpdump", ["tcpdump", "-n", "-r", ng, "udp", "port", "53"]),
                       ("tshark", ["tshark", "-r", ng, "-Y", "dns"])):
        if not shutil.which(tool):
            continue
        lines = _count(peer)
        ours, theirs, ratio = measure_pair(argv, peer, n, env=env, stdout_dir=tmp)
        rows.append({"name": f"{base} as pcapng (editcap -F pcapng), .pyc warm",
                     "ours_s": round(ours[0], 3),
                     "peer": " ".join(a if a != ng else "FILE" for a in peer),
                     "peer_s": round(theirs[0], 3), "ratio": ratio,
                     "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": round(theirs[1], 1),
                     "note": f"ours/{tool} time {1 / ratio:.2f}; DNS packets: ours {dns:,}, "
                             f"{tool} {lines:,}" + ("" if dns == lines else " (DIFFER)")})
    return rows


def _run_size(packets: int) -> list[dict]:
    tmp = tempfile.mkdtemp(prefix="bench-dns-")
    path = os.path.join(tmp, "load.pcap")
    try:
        t0 = time.perf_counter()
        write_capture(path, packets)
        gen_s = time.perf_counter() - t0
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from common import measure, measure_pair, pyc_envs

        n = 3 if packets < 1_000_000 else 5
        ours_argv = [sys.executable, "-c", OURS, path]
        size = os.path.getsize(path) / 2**20
        base = f"dns: {packets:,} packets ({size:.0f} MiB pcap)" if size >= 10 else \
            f"dns: {packets:,} packets ({size:.1f} MiB pcap)"
        name = f"{base}, .pyc warm"
        rows = []
        # ours is the C scanner when it is built, whatever the calling shell exported; its
        # modules are read from .pyc as an installed wheel has them (measure_pair's warm-up
        # run fills the cache), and one row per size shows them compiled on every run
        envs = pyc_envs({k: v for k, v in os.environ.items()
                         if k != "ASCEND_DOCTOR_PCAP_ENGINE"})
        c_env = envs["warm"]
        peers = (("tshark", ["tshark", "-r", path, "-Y", "dns"]),
                 ("tcpdump", ["tcpdump", "-n", "-r", path, "udp", "port", "53"]))
        for tool, argv in peers:
            if not shutil.which(tool):
                continue
            ours, peer, ratio = measure_pair(ours_argv, argv, n, env=c_env, stdout_dir=tmp)
            rows.append({"name": name, "ours_s": round(ours[0], 3), "peer": " ".join(
                a if a != path else "FILE" for a in argv), "peer_s": round(peer[0], 3),
                "ratio": ratio, "ours_rss_mb": round(ours[1], 1),
                "peer_rss_mb": round(peer[1], 1),
                "note": f"capture written in {gen_s:.1f} s; ours/{tool} time {1 / ratio:.2f}"})
        if shutil.which("tshark"):
            argv = peers[0][1]
            ours, peer, ratio = measure_pair(ours_argv, argv, n, env=envs["cold"],
                                             stdout_dir=tmp)
            rows.append({"name": f"{base}, no .pyc (compiled each run)",
                         "ours_s": round(ours[0], 3), "peer": "tshark -r FILE -Y dns",
                         "peer_s": round(peer[0], 3), "ratio": ratio,
                         "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": round(peer[1], 1),
                         "note": f"ours/tshark time {1 / ratio:.2f}"})
        # the same command on the pure-Python engine (no C scanner), so both stay visible
        py_env = {**c_env, "ASCEND_DOCTOR_PCAP_ENGINE": "python"}
        ours, peer, ratio = measure_pair(ours_argv, ours_argv, n, env=c_env, peer_env=py_env,
                                         stdout_dir=tmp)
        rows.append({"name": name, "ours_s": round(ours[0], 3),
                     "peer": "ours, ASCEND_DOCTOR_PCAP_ENGINE=python", "peer_s": round(peer[0], 3),
                     "ratio": ratio, "ours_rss_mb": round(ours[1], 1),
                     "peer_rss_mb": round(peer[1], 1),
                     "note": f"the C scanner (doctor/_dnsscan.c) vs the Python path; C/Python "
                             f"time {1 / ratio:.2f}"})
        rows += _pcapng_rows(path, base, tmp, c_env, n)
        if len(rows) == 1:
            ours = measure(ours_argv, n, env=c_env)
            rows.insert(0, {"name": name, "ours_s": round(ours[0], 3), "peer": None,
                         "peer_s": None, "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": None,
                         "note": "tshark and tcpdump not installed: peers skipped"})
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    os.environ["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    for r in run(quick="--quick" in sys.argv):
        print(r)
