"""Parse /proc/net/{tcp,tcp6,udp,udp6}: a pure function, used by sysroots and bundles."""

from __future__ import annotations

import struct

# the C module alone: socket.py's enum set-up costs ~4 ms of a run that only needs this
from _socket import AF_INET, AF_INET6, inet_ntop

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Connection:
    """One inet socket, as /proc/net/tcp or psutil.net_connections sees it (defined here, not
    in host.py, so the parser imports nothing of the Host: host.py imports this module)."""

    family: str  # inet | inet6
    type: str  # tcp | udp
    laddr: tuple[str, int]
    raddr: tuple[str, int] | None
    status: str  # LISTEN, ESTABLISHED, TIME_WAIT, ...
    pid: int | None = None


_TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
               "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
               "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def _addr(hexaddr: str, v6: bool) -> tuple[str, int]:
    """``0100007F:1F90`` -> ("127.0.0.1", 8080); ValueError on any other shape."""
    ip_hex, port_hex = hexaddr.split(":")
    if len(ip_hex) != (32 if v6 else 8) or not 1 <= len(port_hex) <= 4:
        raise ValueError(f"address {hexaddr!r} has the wrong length")
    raw = bytes.fromhex(ip_hex)  # ValueError on non-hex
    if v6:  # four host-order (little-endian) 32-bit words
        raw = b"".join(struct.pack("<I", w) for w in struct.unpack(">4I", raw))
        ip = inet_ntop(AF_INET6, raw)
    else:
        ip = inet_ntop(AF_INET, raw[::-1])
    if not all(c in "0123456789abcdefABCDEF" for c in port_hex):
        raise ValueError(f"port {port_hex!r} is not hex")
    return ip, int(port_hex, 16)


def parse_proc_net(text: str, proto: str) -> list[Connection]:
    """Rows of one /proc/net table; malformed rows are skipped, not fatal."""
    v6 = proto.endswith("6")
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 4:
            continue
        try:
            laddr, raddr = _addr(f[1], v6), _addr(f[2], v6)
        except (ValueError, OSError):
            continue
        state = _TCP_STATES.get(f[3].upper(), "NONE") if proto.startswith("tcp") else "NONE"
        out.append(Connection("inet6" if v6 else "inet", proto.rstrip("6"), laddr,
                              None if raddr[1] == 0 else raddr, state))
    return out
