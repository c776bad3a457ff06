"""The dataclass code cache (doctor/dccache.py): classes built from saved code behave as
the ones ``dataclasses`` compiles itself; a foreign or corrupt table is never loaded."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import pytest

from ascend_doctor import dccache
from ascend_doctor import usercache as cache


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    base = tmp_path / "xdg"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    monkeypatch.delenv("ASCEND_DOCTOR_CACHE", raising=False)
    return base / "ascend-doctor"


def _make():
    @dataclass(frozen=True)
    class Fact:
        name: str
        size: int = 0
        tags: tuple[str, ...] = ()
        extra: dict = field(default_factory=dict, hash=False, compare=True)

    @dataclass(order=True)
    class Row:
        key: str
        value: float | None = None

    return Fact, Row


def _behaviour(Fact, Row):
    f = Fact("libhccl.so", 3, ("x",), {"a": 1})
    g = Fact("libhccl.so", 3, ("x",), {"a": 1})
    try:
        f.size = 4
        frozen = False
    except dataclasses.FrozenInstanceError:
        frozen = True
    return (repr(f), f == g, hash(Fact("a")) == hash(Fact("a")), frozen, Fact("d").extra,
            Fact("d").extra is not Fact("d").extra,
            [repr(r) for r in sorted([Row("b", 1.0), Row("a")])],
            {k: str(v) for k, v in Fact.__init__.__annotations__.items()},
            Fact.__init__.__qualname__, Row.__lt__(Row("a"), Row("b")), Fact.__match_args__)


def test_classes_from_saved_code_behave_as_compiled_ones(xdg, monkeypatch):
    want = _behaviour(*_make())
    with dccache.cached_dataclass_code():
        first = _behaviour(*_make())
    assert "exec" not in vars(dataclasses)  # the hook is gone after the block
    (table,) = [p for p in xdg.iterdir() if p.name.startswith("dc-")]
    assert (table.stat().st_mode & 0o777) == 0o600

    def no_compile(*a, **k):
        raise AssertionError("compiled again: the saved code was not used")

    monkeypatch.setattr(dccache, "compile", no_compile, raising=False)
    with dccache.cached_dataclass_code():
        again = _behaviour(*_make())
    assert first == want and again == want


def test_the_future_annotations_flag_does_not_leak_into_the_methods(xdg):
    # this test module has ``from __future__ import annotations``; dataclasses does not:
    # the saved __init__ keeps real annotation objects, as dataclasses' own exec gives
    @dataclass
    class Plain:
        n: int

    with dccache.cached_dataclass_code():
        @dataclass
        class Cached:
            n: int
    with dccache.cached_dataclass_code():
        @dataclass
        class Hit:
            n: int
    assert Plain.__init__.__annotations__ == Cached.__init__.__annotations__ \
        == Hit.__init__.__annotations__


@pytest.mark.parametrize("damage", ["garbage", "not-a-table", "group-writable", "symlink"])
def test_a_bad_table_is_never_loaded(xdg, damage, tmp_path):
    with dccache.cached_dataclass_code():
        _make()
    (table,) = [p for p in xdg.iterdir() if p.name.startswith("dc-")]
    if damage == "garbage":
        table.write_bytes(b"\x00\xff not marshal")
    elif damage == "not-a-table":
        import marshal
        table.write_bytes(marshal.dumps(["print('x')"]))
    elif damage == "group-writable":
        os.chmod(table, 0o664)
    else:
        target = tmp_path / "elsewhere.marshal"
        table.rename(target)
        os.symlink(target, table)
    assert dccache._load(table.name) == {}
    with dccache.cached_dataclass_code():
        assert _behaviour(*_make()) == _behaviour(*_make())


def test_switched_off_it_neither_hooks_nor_writes(xdg, monkeypatch):
    monkeypatch.setenv("ASCEND_DOCTOR_CACHE", "0")
    with dccache.cached_dataclass_code():
        assert "exec" not in vars(dataclasses)
        _make()
    assert not xdg.exists()
    assert cache.read_private(dccache._file_name()) is None


def test_a_discovery_through_the_cache_registers_the_same_checks(xdg):
    from ascend_doctor.registry import Registry

    a = Registry.discover(plugins=False)  # modules already imported here: no new classes
    b = Registry.discover(plugins=False)
    assert sorted(a.checks) == sorted(b.checks) and len(a.checks) >= 50
    assert set(a.providers) == set(b.providers)


def test_overlapping_blocks_in_threads_leave_no_hook_behind(xdg):
    import threading

    inside = threading.Barrier(2)
    leave = threading.Event()
    seen = []

    def worker():
        with dccache.cached_dataclass_code():
            inside.wait(timeout=10)
            seen.append("exec" in vars(dataclasses))
            leave.wait(timeout=10)
            _make()

    t = threading.Thread(target=worker)
    t.start()
    with dccache.cached_dataclass_code():  # the outer one of the CLI, a discover inside
        with dccache.cached_dataclass_code():
            inside.wait(timeout=10)
            _make()
    assert "exec" in vars(dataclasses)  # the worker's block is still open: hook kept
    leave.set()
    t.join(timeout=10)
    assert seen == [True] and "exec" not in vars(dataclasses)
    assert [p.name for p in xdg.iterdir() if p.name.startswith("dc-")]
