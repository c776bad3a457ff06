"""Below the npu-smi table: the card map, ECC, RoCE ports, PCIe links of the demo host.

The node-level hardware fault: NPU device 5's optical module is not seated, so its RoCE
port is DOWN and its network detection fails — one problem (``hccn.roce``) with three
findings (hccn.optical, hccn.link, hccn.net_health). Everything else is healthy so each
check shows what a pass looks like: every chip's ECC counters are zero, /etc/hccn.conf gives
eight addresses in one /24, PFC is on priority 4 (where HCCL's default DSCP 33 maps),
the RoCE ports run at 200 GE, the PCIe links run x16 at 16 GT/s.
Formats: tests/fixtures/npusmi and tests/fixtures/hccn (captured/ holds the cited real outputs).
"""

from __future__ import annotations

from ...bundle import BundleWriter
from .stack import NPUS

DOWN_DEV = 5
BUSES = ["c1", "c2", "81", "82", "01", "02", "41", "42"]  # parts/stack.py's Bus-Id column
NET = "192.168.100"


def npu_map() -> str:
    head = f"        {'NPU ID':<31}{'Chip ID':<31}{'Chip Logic ID':<31}Chip Name\n"
    rows = [f"        {i:<31}{0:<31}{i:<31}Ascend 910B4\n"
            f"        {i:<31}{1:<31}{'-':<31}Mcu\n" for i in range(NPUS)]
    return head + "".join(rows)


def ecc(i: int) -> str:
    keys = ["DDR Single Bit Error Count", "DDR Double Bit Error Count",
            "HBM Single Bit Error Count", "HBM Double Bit Error Count",
            "HBM Single Bit Aggregate Total Err Cnt", "HBM Double Bit Aggregate Total Err Cnt",
            "HBM Single Bit Isolated Pages Count", "HBM Double Bit Isolated Pages Count"]
    lines = [f"        {'NPU ID':<41}: {i}", f"        {'Chip ID':<41}: 0"]
    lines += [f"        {k:<41}: {'NA' if k.startswith('DDR') else 0}" for k in keys]
    return "\n".join(lines) + "\n"


def hccn_conf() -> str:
    out = []
    for d in range(NPUS):
        out += [f"address_{d}={NET}.{101 + d}", f"netmask_{d}=255.255.255.0",
                f"netdetect_{d}={NET}.1", f"gateway_{d}={NET}.1", f"send_arp_status_{d}=1"]
    return "\n".join(out) + "\n"


OPTICAL = """optical info:
present              : present
temperature          : 43 C
high power enable reg: enabled
vendor name          : HUAWEI
xsfp identifier      : QSFP+ or later
Tx Power0            : 0.9806 mW
Rx Power0            : 1.0823 mW
"""


def dscp_map() -> str:
    """``hccn_tool -dscp_to_tc -g`` (``%4s%8s`` header, ``%4d%8u`` rows): tc = dscp / 8, so
    HCCL's default DSCP 33 lands in TC 4, where PFC is on."""
    return "".join(["%4s%8s\n" % ("dscp", "tc")] + ["%4d%8u\n" % (i, i >> 3) for i in range(64)])


def build(w: BundleWriter) -> None:
    w.command(["npu-smi", "info", "-m"], npu_map())
    for i in range(NPUS):
        w.command(["npu-smi", "info", "-t", "ecc", "-i", str(i), "-c", "0"], ecc(i))
    w.file("/etc/hccn.conf", hccn_conf())
    for d in range(NPUS):
        down = d == DOWN_DEV
        tool = ["hccn_tool", "-i", str(d)]
        w.command(tool + ["-link", "-g"], f"link status: {'DOWN' if down else 'UP'}\n")
        w.command(tool + ["-net_health", "-g"],
                  f"net health status: {'Fault' if down else 'Success'}\n")
        w.command(tool + ["-ip", "-g"], f"ipaddr:{NET}.{101 + d}\nnetmask:255.255.255.0\n")
        w.command(tool + ["-gateway", "-g"], f"default gateway:{NET}.1, Iface:eth{d}\n")
        w.command(tool + ["-optical", "-g"],
                  "optical info:\npresent              : not present\n" if down else OPTICAL)
        w.command(tool + ["-pfc", "-g"], "PFC configuration:\npriority   0 1 2 3 4 5 6 7\n"
                                         "enabled    0 0 0 0 1 0 0 0\n")
        w.command(tool + ["-speed", "-g"], "Speed: Unknown!\n" if down else "Speed: 200000 Mb/s\n")
        w.command(tool + ["-dscp_to_tc", "-g"], dscp_map())
    for i, bus in enumerate(BUSES[:NPUS]):
        base = f"/sys/bus/pci/devices/0000:{bus}:00.0"
        for name, value in (("vendor", "0x19e5"), ("device", "0xd802"), ("class", "0x120000"),
                            ("current_link_width", "16"), ("max_link_width", "16"),
                            ("current_link_speed", "16.0 GT/s PCIe"),
                            ("max_link_speed", "16.0 GT/s PCIe")):
            w.file(f"{base}/{name}", value + "\n", mode=0o444)
