"""Checks are pure rules over facts (docs/HACKING.md "Flow"): no check module touches the
Host or loads the knowledge base itself, and the checks whose reading moved into providers
(logs.signatures, libacl.resolve, npu.smi, torch_npu.import, versions.matrix) rule on
hand-built facts alone."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import ascend_doctor.checks as checks_pkg
from ascend_doctor.checks.libacl import resolve
from ascend_doctor.checks.logs import signatures
from ascend_doctor.checks.npu import smi_runs
from ascend_doctor.facts import requirements
from ascend_doctor.host import CommandResult, Host
from ascend_doctor.knowledge import KnowledgeBase, parse_file
from ascend_doctor.model import Severity, Status
from ascend_doctor.probes.ascendfiles import AscendLibIndex
from ascend_doctor.probes.kbfact import Knowledge
from ascend_doctor.probes.libresolve import Closure, LibResolution, Resolution
from ascend_doctor.probes.libsearch import LibSearchContext
from ascend_doctor.probes.logmatch import LogFileMatches, LogMatches, _Acc
from ascend_doctor.probes.logs import LogFile, StatsLine
from ascend_doctor.probes.npusmi import NpuSmi
from ascend_doctor.probes.procs import ServiceEnv
from ascend_doctor.ranking import severity, status_for
from ascend_doctor.registry import Registry

CHECKS_DIR = Path(inspect.getfile(checks_pkg)).parent
HOST_METHODS = {n for n in dir(Host) if not n.startswith("_")}


def _violations(path: Path) -> list[str]:
    """Host imports/parameters, ``host.<method>(…)`` calls, knowledge.load()/compat()."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {a.name for a in node.names}
            if node.module.endswith(".host") or node.module == "ascend_doctor.host":
                out.append(f"{where} imports {node.module}")
            if node.module.endswith("knowledge") and names & {"load", "compat"}:
                out.append(f"{where} imports knowledge.{'/'.join(sorted(names))}")
        elif isinstance(node, ast.Import):
            out += [f"{where} imports {a.name}" for a in node.names
                    if a.name.endswith(".host") or a.name.endswith(".knowledge")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            obj = node.func.value
            name = obj.id if isinstance(obj, ast.Name) else ""
            if name == "knowledge" and node.func.attr in ("load", "compat"):
                out.append(f"{where} calls knowledge.{node.func.attr}()")
            if name in ("host", "h", "user") and node.func.attr in HOST_METHODS:
                out.append(f"{where} calls {name}.{node.func.attr}()")
        elif isinstance(node, ast.arg) and node.annotation is not None:
            if "Host" in ast.unparse(node.annotation):
                out.append(f"{where} takes a Host ({node.arg})")
    return out


def test_no_check_module_reads_the_machine_or_loads_the_kb():
    files = sorted(CHECKS_DIR.glob("*.py"))
    assert len(files) > 10
    bad = [v for p in files for v in _violations(p)]
    assert bad == []


def test_the_scan_catches_what_it_forbids(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("from ascend_doctor.host import Host\nfrom ascend_doctor import knowledge\n"
                 "def rule(host: Host):\n    host.exists('/x')\n    knowledge.load()\n")
    got = _violations(p)
    assert len(got) == 4 and any("host.exists" in g for g in got)


def test_no_registered_check_asks_for_the_host():
    reg = Registry.discover(plugins=False)
    for spec in reg.checks.values():
        for name, (tp, _) in requirements(spec.func).items():
            assert not (isinstance(tp, type) and issubclass(tp, Host)), (spec.id, name)


# -- rules on hand-built facts -------------------------------------------------------------
KB_TOML = b'''
[[entry]]
id = "ASC-LOG-901"
title = { en = "NPU out of memory", zh = "x" }
cause = { en = "c", zh = "c" }
signatures = ['NPU out of memory\\. Tried to allocate']
severity = "high"

[[entry]]
id = "ASC-LOG-902"
title = { en = "allocator knob", zh = "x" }
cause = { en = "c", zh = "c" }
signatures = ['expandable_segments']
severity = "medium"

[[entry]]
id = "ASC-LOG-903"
title = { en = "a note", zh = "x" }
cause = { en = "c", zh = "c" }
signatures = ['deprecated flag']
severity = "low"
'''
KNOW = Knowledge(KnowledgeBase(parse_file("logs.toml", KB_TOML)))
LOG = LogFile("/var/log/vllm/server.log", "stdout of pid 4711", 4096)


def _acc(entry_id: str, line_no: int, text: str) -> _Acc:
    return _Acc(KNOW.kb.entries[entry_id], 1, [(line_no, text)], {})


def test_log_status_and_severity_come_from_one_rule():
    fm = LogFileMatches(LOG, None, (
        _acc("ASC-LOG-901", 7, "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"),
        _acc("ASC-LOG-902", 9, "set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"),
        _acc("ASC-LOG-903", 3, "WARNING deprecated flag --foo")), 40,
        StatsLine(12, 1.0, 2.0, 49, 142, 61.5))
    fs = list(signatures(LogMatches((fm,))))
    by = {f.kb[0]: f for f in fs}
    assert [by[k].status for k in ("ASC-LOG-901", "ASC-LOG-902", "ASC-LOG-903")] == [
        Status.FAIL, Status.WARN, Status.INFO]
    for k, sev in (("ASC-LOG-901", Severity.HIGH), ("ASC-LOG-902", Severity.MEDIUM),
                   ("ASC-LOG-903", Severity.LOW)):
        assert by[k].severity is sev and severity(by[k], None, KNOW.kb) is sev
    assert "first at line 7" in by["ASC-LOG-901"].message
    assert by["ASC-LOG-901"].cause == "logs.line:/var/log/vllm/server.log:7"
    assert by["ASC-SVC-008"].status == Status.FAIL and "142 waiting" in by["ASC-SVC-008"].message


def test_status_for_is_the_inverse_of_the_ranking_caps():
    for sev in Severity:
        st = status_for(sev)
        from ascend_doctor.model import Finding
        f = Finding.make(st, "x", severity=sev)
        assert severity(f) is sev, (sev, st)


def test_log_unreadable_and_clean_files():
    fs = list(signatures(LogMatches((
        LogFileMatches(LogFile("/var/log/gone.log", "--log"), "not found"),
        LogFileMatches(LOG, None, (), 1200, None)))))
    assert [f.status for f in fs] == [Status.ERROR, Status.PASS]
    assert "cannot read log /var/log/gone.log (--log): not found" == fs[0].message
    assert "1200 lines, no known signature" in fs[1].message


def _driver_lib_missing(in_container: bool):
    r = Resolution("libascend_hal.so", "/usr/local/Ascend/ascend-toolkit/8.3.RC2/lib64/libruntime.so",
                   None, "", ("/usr/local/Ascend/driver/lib64 (LD_LIBRARY_PATH)",))
    lr = LibResolution((Closure("/site/torch_npu/lib/libtorch_npu.so", (), (r,)),),
                       "/proc/4711/environ", ("/usr/local/Ascend/driver/lib64",), ("/usr/lib",),
                       "/etc/ld.so.cache", "torch's libs provided", 4711)
    env = ServiceEnv({"LD_LIBRARY_PATH": "/usr/local/Ascend/driver/lib64"}, "/proc/4711/environ", 4711)
    index = AscendLibIndex(("/usr/local/Ascend",), {})
    ctx = LibSearchContext((), in_container, {})
    return [f for f in resolve(lr, env, index, ctx, None) if f.status == Status.FAIL]


def test_libacl_resolve_rules_on_the_context_fact():
    (inside,) = _driver_lib_missing(True)
    assert "inside a container" in inside.message and inside.kb == ("ASC-CTR-004",)
    (bare,) = _driver_lib_missing(False)
    assert "Ascend driver (HDK) is not installed" in bare.message
    assert bare.cause == "libs.missing:libascend_hal.so"


def test_npu_smi_failure_names_the_kb_entry_from_the_fact():
    out = b"dcmi module initialize failed. ret is -8005\n"
    smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi", "info"), 1, out, b"", 0.2), None)
    toml = (b'[[entry]]\nid = "ASC-NPU-901"\ntitle = { en = "t", zh = "t" }\n'
            b'cause = { en = "c", zh = "c" }\nsignatures = [\'ret is -8005\']\n')
    (f,) = smi_runs(smi, Knowledge(KnowledgeBase(parse_file("npu.toml", toml))))
    assert f.status == Status.FAIL and f.kb == ("ASC-NPU-901",) and "exited 1" in f.message
    (g,) = smi_runs(smi, Knowledge(KnowledgeBase([])))
    assert g.kb == ("ASC-NPU-004",)


@pytest.mark.parametrize("module", ["logs", "libacl", "npu", "torch_import", "versions"])
def test_moved_checks_are_clean(module):
    assert _violations(CHECKS_DIR / f"{module}.py") == []
