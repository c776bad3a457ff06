"""Words a user can act on (issue 14 item 5): what the checks say on the demo and on a few
sysroots carries no Python reprs (``None``, tuples, lists, dicts, ``True``), no unformatted
``{placeholder}``, and cites no internal design files (``seed:``, ``facts:``)."""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.host import LiveHost
from ascend_doctor.opening import demo_host
from ascend_doctor.options import RunOptions
from ascend_doctor.registry import Registry

REPRS = [
    (re.compile(r"\bNone\b"), "None"),
    (re.compile(r"\(-?\d+(?:\.\d+)?, -?\d+(?:\.\d+)?\)"), "a tuple repr"),
    (re.compile(r"[\[({]'[^']*'[,:\])}]"), "a list/tuple/dict repr"),
    (re.compile(r"\b(?:True|False)\b"), "a bool repr"),
    (re.compile(r"(?<![{$])\{[a-z_][a-z0-9_]*\}(?!\})"), "an unformatted placeholder"),
    (re.compile(r"\b(?:seed|facts):"), "an internal design-file citation"),
    (re.compile(r"\bseeds?\b|\bseed's\b", re.I), "an internal design-file citation"),
]
# evidence strings copied verbatim from the machine (a metric label, a file line) may hold
# any text; what the doctor writes itself (messages, subjects) must read as words
MACHINE_VALUES = {"effective", "line", "lines", "cmdline", "argv", "raw", "text", "stdout",
                  "stderr", "value", "match", "excerpt", "labels"}


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            if str(k) not in MACHINE_VALUES:
                yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def offences(report) -> list[str]:
    out = []
    for r, f in report.findings():
        texts = [("message", f.message), ("subject", f.subject or "")]
        texts += list(_strings(f.evidence, "evidence"))
        for where, text in texts:
            for rx, what in REPRS:
                m = rx.search(text)
                if m:
                    out.append(f"{r.check_id} {f.status.value} {where}: {what} "
                               f"{m.group(0)!r} in {text[:160]!r}")
    return out


OPTIONS = RunOptions(service_url="http://127.0.0.1:9", sample_seconds=0.05)


def _run(host, context: str):
    return run(host, OPTIONS, Registry.discover(plugins=False),
               RunConfig(timeout=20.0, context=context))


def test_the_demo_speaks_words():
    report = _run(demo_host(), "demo")
    assert sum(1 for _ in report.findings()) > 40
    assert offences(report) == []


def _bare(sr) -> None:
    """A host with an OS and nothing of the Ascend stack."""
    sr.write("/etc/os-release", 'NAME="Ubuntu"\nVERSION_ID="22.04"\n')
    sr.write("/etc/hostname", "bare-01\n")
    sr.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    sr.mkdir("/etc/ld.so.conf.d")
    sr.write("/proc/sys/net/ipv4/ip_local_port_range", "50000\t51999\n")
    sr.write("/proc/sys/net/ipv4/tcp_fin_timeout", "60\n")


def _half_ascend(sr) -> None:
    """Ascend directories configured but unreadable and half installed."""
    _bare(sr)
    sr.write("/etc/ld.so.conf.d/ascend.conf", "/usr/local/Ascend/driver/lib64\n", mode=0o600)
    sr.write("/usr/local/Ascend/driver/version.info", "Version=24.1.rc3\n")
    sr.mkdir("/dev")
    sr.write("/etc/resolv.conf", "nameserver 10.0.0.2\noptions ndots:5\n")


@pytest.mark.parametrize("build", [_bare, _half_ascend], ids=["bare", "half-ascend"])
def test_sysroots_speak_words(sysroot, build):
    build(sysroot)
    report = _run(LiveHost(str(sysroot.root)), "sysroot")
    assert offences(report) == []


def test_the_demo_as_a_sysroot_speaks_words(tmp_path):
    from ascend_doctor.demo import demo_bundle_data
    from ascend_doctor.fixes.export import export_root

    export_root(demo_bundle_data(), str(tmp_path / "root"))
    report = _run(LiveHost(str(tmp_path / "root")), "sysroot")
    assert offences(report) == []


def test_the_detector_catches_what_it_must():
    """The patterns themselves, on the reprs issue 14 quoted."""
    from ascend_doctor.model import Finding

    for text in ("ip_local_port_range (50000, 51999), TIME_WAIT None",
                 "ldconfig -r {root}", "skips it (seed: mode 600)", "['a', 'b'] missing"):
        class R:  # a one-finding report
            check_id = "x.y"

        class Rep:
            def findings(self, _f=Finding.fail(text)):
                return [(R, _f)]
        assert offences(Rep()), text
    class Ok:
        check_id = "x.y"

    class Clean:
        def findings(self):
            return [(Ok, Finding.passed("50000-51999 (2000 ports); ${HOME} stays as written"))]
    assert offences(Clean()) == []


def test_every_fix_plan_reads_as_words(tmp_path):
    """Each recipe's plan on the demo exported as a sysroot, as `fix RECIPE --root` prints
    it, with the parameters the demo's findings pass: no reprs, no ``{root}``."""
    from ascend_doctor.demo import demo_bundle_data
    from ascend_doctor.fixes import FixRegistry, plan_for
    from ascend_doctor.fixes.context import FixContext
    from ascend_doctor.fixes.export import export_root

    root = str(tmp_path / "root")
    export_root(demo_bundle_data(), root)
    report = _run(LiveHost(root), "sysroot")
    params: dict[str, dict] = {"dns.hosts-pin": {"hostname": "api.example.com",
                                                 "address": "10.0.0.7"}}
    for r, f in report.findings():
        if f.fix is not None:
            params.setdefault(f.fix.id, dict(f.fix.params))
    for rid in FixRegistry.discover().recipes:
        ctx = FixContext.for_root(root, OPTIONS)
        text = plan_for(ctx, rid, params.get(rid)).render("en", root)
        for rx, what in REPRS[:5]:  # KB-free text: reprs and placeholders
            m = rx.search(text)
            assert m is None, f"{rid}: {what} {m.group(0)!r} in\n{text}"
