"""Two real stand-in vLLM servers on one host (127.0.0.1, each on its own random port, pinned
to different NPUs with ASCEND_RT_VISIBLE_DEVICES): with no --service each is probed on its
own API port, findings name the server, and they are not "one NPU shared by 2 servers".
One of them is dead (503 on /health): only that one may fail (issue 13.5)."""

from __future__ import annotations

from contextlib import ExitStack

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.host import LiveHost
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.registry import Registry
from tests.integration.test_live_service import fake_vllm


def test_each_server_is_probed_on_its_own_port_and_named(tmp_path):
    with ExitStack() as stack:
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        a, a_port, _ = stack.enter_context(fake_vllm(
            a_dir, "ok", ("--gpu-memory-utilization", "0.9"),
            env={"ASCEND_RT_VISIBLE_DEVICES": "0,1"}))
        b, b_port, _ = stack.enter_context(fake_vllm(
            b_dir, "dead", ("--gpu-memory-utilization", "0.9"),
            env={"ASCEND_RT_VISIBLE_DEVICES": "2,3"}))
        report = run(LiveHost("/"), RunOptions(), Registry.discover(plugins=False),
                     RunConfig(only=("service.health", "config.gpu-memory"), timeout=40))
    by_id = {r.check_id: r for r in report.results}
    health = by_id["service.health"].findings
    subjects: dict[str, list] = {}
    for f in health:
        subjects.setdefault(f.subject, []).append(f)
    ok = f"pid {a.pid} at http://127.0.0.1:{a_port}"
    dead = f"pid {b.pid} at http://127.0.0.1:{b_port}"
    # other stand-ins may run on a shared test machine: they are probed too, each named
    assert {ok, dead} <= set(subjects), [f.subject for f in health]
    assert all(f.status == Status.PASS for f in subjects[ok])
    assert any("answered 200" in f.message for f in subjects[ok])
    fails = [f for f in subjects[dead] if f.status == Status.FAIL]
    assert len(fails) == 1 and "503" in fails[0].message
    mem = by_id["config.gpu-memory"].findings
    shared = [f for f in mem if "shared by" in f.message and (
        str(a.pid) in str(f.evidence) or str(b.pid) in str(f.evidence))]
    assert not shared, [f.message for f in shared]
    assert {f.subject for f in mem} >= {f"pid {a.pid}", f"pid {b.pid}"}


def test_with_service_only_that_url_is_asked(tmp_path):
    with ExitStack() as stack:
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        _a, a_port, _ = stack.enter_context(fake_vllm(a_dir, "ok"))
        _b, _b_port, _ = stack.enter_context(fake_vllm(b_dir, "dead"))
        url = f"http://127.0.0.1:{a_port}"
        report = run(LiveHost("/"), RunOptions(service_url=url, service_url_given=True),
                     Registry.discover(plugins=False),
                     RunConfig(only=("service.health",), timeout=40))
    (res,) = report.results
    assert {f.subject for f in res.findings} == {f"{url} (named: --service)"}  # issue 31
    assert all(f.status == Status.PASS for f in res.findings)
