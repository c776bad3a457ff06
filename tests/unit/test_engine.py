"""The engine turns crashes, timeouts and missing sources into results, never exceptions."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import ParseError, SourceMissing
from ascend_doctor.host import Host, LiveHost
from ascend_doctor.model import Category, Finding, Status
from ascend_doctor.registry import Registry, check, provider
from tests.timing import budget

calls = {"n": 0}
lock = threading.Lock()


@dataclass(frozen=True)
class Thing:
    value: int


@dataclass(frozen=True)
class Absent:
    pass


@dataclass(frozen=True)
class Garbled:
    pass


@provider
def make_thing(host: Host) -> Thing:
    with lock:
        calls["n"] += 1
    time.sleep(0.05)
    return Thing(42)


@provider
def make_absent(host: Host) -> Absent:
    raise SourceMissing("/etc/absent.conf")


@provider
def make_garbled(host: Host) -> Garbled:
    raise ParseError("/var/log/x.csv", "row 3 has 2 columns, header has 5")


@check("t.ok", title="uses thing", category=Category.HOST)
def uses_thing(t: Thing):
    yield Finding.passed(f"value {t.value}")


@check("t.ok2", title="uses thing too", category=Category.HOST)
def uses_thing_too(t: Thing):
    if t.value == 42:
        yield Finding.warn("it is 42")


@check("t.crash", title="crashes", category=Category.HOST)
def crashes(t: Thing):
    raise ZeroDivisionError("boom")


@check("t.hang", title="hangs", category=Category.HOST, timeout=0.3)
def hangs(t: Thing):
    time.sleep(30)


@check("t.missing", title="needs absent", category=Category.HOST)
def needs_absent(a: Absent):
    yield Finding.passed("unreachable")


@check("t.optional", title="optional absent", category=Category.HOST)
def optional_absent(a: Absent | None):
    yield Finding.info(f"absent is {a}")


@check("t.garbled", title="needs garbled", category=Category.HOST)
def needs_garbled(g: Garbled):
    yield Finding.passed("unreachable")


def registry() -> Registry:
    import sys
    reg = Registry()
    reg.add_module(sys.modules[__name__])
    return reg


def test_run_turns_every_outcome_into_a_result(tmp_path):
    calls["n"] = 0
    t0 = time.monotonic()
    report = run(LiveHost(str(tmp_path)), registry=registry(), config=RunConfig(timeout=5))
    elapsed = time.monotonic() - t0
    by = {r.check_id: r for r in report.results}
    assert [r.check_id for r in report.results] == sorted(by)
    assert by["t.ok"].status == Status.PASS
    assert by["t.ok2"].status == Status.WARN
    assert by["t.crash"].status == Status.ERROR
    assert "ZeroDivisionError: boom" in by["t.crash"].findings[0].message
    assert by["t.hang"].status == Status.ERROR
    assert "timed out after 0.3 s" in by["t.hang"].findings[0].message
    assert by["t.missing"].status == Status.SKIP
    assert "/etc/absent.conf" in by["t.missing"].findings[0].message
    assert by["t.optional"].findings[0].message == "absent is None"
    assert by["t.garbled"].status == Status.ERROR
    assert "/var/log/x.csv" in by["t.garbled"].findings[0].message
    assert calls["n"] == 1, "a fact is computed once per run, whoever asks"
    assert elapsed < budget(5, cap=25), "a hanging check must not hold the run"  # it sleeps 30 s
    assert report.exit_code() == 0 and report.exit_code("warn") == 1


def test_select_by_id_prefix_tag_and_unknown():
    import pytest
    from ascend_doctor.errors import UsageError
    reg = registry()
    assert [s.id for s in reg.select(["t.ok"])] == ["t.ok"]
    assert len(reg.select(["t"])) == 7
    assert "t.hang" not in [s.id for s in reg.select([], ["t.hang"])]
    with pytest.raises(UsageError):
        reg.select(["nope"])


def test_builtin_registry_discovers_checks_and_providers():
    reg = Registry.discover(plugins=False)
    assert "ldconf.order" in reg.checks and "versions.pins" in reg.checks
    from ascend_doctor.probes.ldconf import LdSoConf
    assert LdSoConf in reg.providers


def test_requirements_read_without_get_type_hints_equal_its_result():
    """facts._simple_hints (names looked up, no string compiled) gives what get_type_hints
    and _unwrap_optional give, for every built-in check and provider."""
    import typing

    from ascend_doctor import facts

    reg = Registry.discover()
    funcs = [s.func for s in reg.select((), ())] + [p.func for p in reg.providers.values()]
    assert len(funcs) > 50
    for func in funcs:
        hints = typing.get_type_hints(func)
        hints.pop("return", None)
        want = {n: facts._unwrap_optional(tp) for n, tp in hints.items()}
        assert facts._simple_hints(func) == want, func

    def odd(x: "list[int]", y: "Host | None") -> None: ...
    assert facts._simple_hints(odd) is None  # anything else: get_type_hints decides


def test_more_hung_checks_than_workers_still_end_the_run(tmp_path):
    """Checks blocked where no cancel reaches (a read on a hung NFS mount) keep their worker
    threads; with more of them than workers the run must still end, each one a timeout,
    and the checks queued behind them must still run."""
    from ascend_doctor.model import Category
    from ascend_doctor.registry import CheckSpec

    release = threading.Event()
    reg = Registry()

    def hung():
        release.wait(30)

    def fine():
        return Finding.passed("ran")

    for i in range(12):
        reg.add_check(CheckSpec(f"t.hung{i:02d}", "hung", hung, Category.HOST))
    reg.add_check(CheckSpec("z.after", "queued behind the hung ones", fine, Category.HOST))
    out = []
    runner = threading.Thread(target=lambda: out.append(
        run(LiveHost(str(tmp_path)), None, reg, RunConfig(timeout=0.2, jobs=4))), daemon=True)
    t0 = time.monotonic()
    runner.start()
    runner.join(budget(10, cap=28))  # a hang fails here instead of holding the suite
    took = time.monotonic() - t0
    release.set()
    assert out, f"the run had not ended after {took:.1f} s"
    by_id = {r.check_id: r for r in out[0].results}
    assert all(by_id[f"t.hung{i:02d}"].status is Status.ERROR for i in range(12))
    assert by_id["z.after"].status is Status.PASS
    assert took < budget(5, cap=25), took  # 12 / 4 rounds of 0.2 s and the grace, not forever
