"""Load-client network fixes: pin the service name in /etc/hosts (dns.hosts-pin) and widen
the ephemeral ports / recycle TIME_WAIT sooner (sysctl.tcp-ports)."""

from __future__ import annotations

import ipaddress
import re

from ascend_doctor.errors import UsageError
from ascend_doctor.i18n import T

from . import recipe
from .context import FixContext
from .plan import Command, Plan

HOSTS = "/etc/hosts"
SYSCTL_DROPIN = "/etc/sysctl.d/90-ascend-doctor-tcp.conf"
# seed 000 §3.4: port range 1024-65535 and fin_timeout 30 on the jmeter load machines
TCP_DEFAULTS = {"net.ipv4.ip_local_port_range": "1024 65535", "net.ipv4.tcp_tw_reuse": "1",
                "net.ipv4.tcp_fin_timeout": "30"}
_PROC = {"net.ipv4.ip_local_port_range": "/proc/sys/net/ipv4/ip_local_port_range",
         "net.ipv4.tcp_tw_reuse": "/proc/sys/net/ipv4/tcp_tw_reuse",
         "net.ipv4.tcp_fin_timeout": "/proc/sys/net/ipv4/tcp_fin_timeout"}


def pin_hosts(text: str, hostname: str, address: str) -> str:
    """/etc/hosts with ``hostname`` mapped to ``address`` only (other mappings of the name
    removed, comments and other names kept); unchanged when already pinned."""
    lines = text.splitlines(keepends=True)
    out, pinned = [], False
    for ln in lines:
        body, hash_, comment = ln.rstrip("\n").partition("#")
        fields = body.split()
        if len(fields) >= 2 and hostname in fields[1:]:
            if fields[0] == address and not pinned:
                pinned = True
                out.append(ln)
                continue
            rest = [f for f in fields[1:] if f != hostname]
            if rest:
                out.append(" ".join([fields[0], *rest]) + (f" #{comment}" if hash_ else "") + "\n")
            continue
        out.append(ln if ln.endswith("\n") else ln + "\n")
    if not pinned:
        out.append(f"{address}\t{hostname}\t# pinned by ascend-doctor (no DNS per request)\n")
    return "".join(out)


@recipe("dns.hosts-pin", title="Pin the service hostname in /etc/hosts", check="dns.hosts-pin",
        params=("hostname", "address"), writes=(HOSTS,), affects=("dns",))
def hosts_pin(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "dns.hosts-pin"
    host, addr = params.get("hostname"), params.get("address")
    if not host or not addr:
        raise UsageError(T("dns.hosts-pin needs --param hostname=NAME --param address=IP"))
    try:
        ipaddress.ip_address(str(addr))
    except ValueError:
        raise UsageError(T("dns.hosts-pin: {value} is not an IP address",
                           value=repr(addr))) from None
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", str(host)):
        raise UsageError(T("dns.hosts-pin: {value} is not a host name", value=repr(host)))
    plan = Plan("dns.hosts-pin", T("Pin the service hostname in /etc/hosts"), params,
                verify=verify)
    cur = (ctx.read(HOSTS) or b"127.0.0.1\tlocalhost\n").decode("utf-8", "replace")
    plan.edits.append(ctx.edit(HOSTS, pin_hosts(cur, str(host), str(addr)),
                               why=T("resolve {host} without a DNS query per request", host=host)))
    plan.needs_root = [T("writing {path}", path=HOSTS)]
    plan.notes.append(T("run this on the load clients (jmeter machines), not on the NPU host, "
                        "unless they are the same"))
    return plan


@recipe("sysctl.tcp-ports", title="Ephemeral port range and TIME_WAIT recycling (sysctl.d)",
        check="net.tcp-ports", params=tuple(TCP_DEFAULTS), open_params=True,
        writes=(SYSCTL_DROPIN,),
        affects=("net.tcp-ports",),
        undo_commands=(Command(("sysctl", "--system"), T("reload the restored settings"),
                               sysroot_skip=T("a sysroot's kernel settings are not live")),))
def tcp_ports(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "net.tcp-ports"
    values = dict(TCP_DEFAULTS)
    unknown = []
    for k, v in params.items():
        key = k if k.startswith("net.") else f"net.ipv4.{k}"
        if key in values:
            values[key] = str(v)
        else:
            unknown.append(k)
    if unknown:  # never shown in the plan and then ignored
        from ascend_doctor.errors import UsageError
        raise UsageError(T("sysctl.tcp-ports does not set {keys} (it sets: {known})",
                           keys=", ".join(sorted(unknown)), known=", ".join(TCP_DEFAULTS)))
    plan = Plan("sysctl.tcp-ports", T("Ephemeral port range and TIME_WAIT recycling (sysctl.d)"),
                values, verify=verify)
    body = ("# load clients: enough ephemeral ports, TIME_WAIT reused and recycled sooner\n"
            "# (written by `ascend-doctor fix sysctl.tcp-ports`)\n"
            + "".join(f"{k} = {v}\n" for k, v in values.items()))
    plan.edits.append(ctx.edit(SYSCTL_DROPIN, body, 0o644, T("persistent across reboots")))
    for k, path in _PROC.items():
        raw = ctx.read(path)
        if raw is not None:
            plan.notes.append(T("{key} is now {now}, will be {value}", key=k,
                                now=" ".join(raw.decode().split()), value=values[k]))
    plan.commands.append(Command(("sysctl", "--system"), T("load the drop-in now"),
                                 sysroot_skip=T("a sysroot's kernel settings are not live; the "
                                                "drop-in takes effect when it boots")))
    plan.needs_root = [T("writing {path}", path=SYSCTL_DROPIN), "sysctl --system"]
    return plan
