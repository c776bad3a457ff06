"""doctor/record.py builds the same classes as dataclasses.dataclass (issue 16: one
compile per class instead of one per method); every behaviour a caller can see is
compared on twin classes, one built by each."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import typing
from collections import deque

import pytest

from ascend_doctor import record


def _twins(body: str, **opts):
    """The class ``body`` defines, built once by dataclasses and once by record."""
    out = []
    for deco in (dataclasses.dataclass, record.dataclass):
        ns: dict = {"field": dataclasses.field, "deque": deque, "typing": typing}
        exec(body, ns)
        out.append(deco(**opts)(ns["C"]) if opts else deco(ns["C"]))
    return out


SHAPES = {
    "plain": "class C:\n  a: int\n  b: str = 'x'\n",
    "doc": "class C:\n  '''A record.'''\n  a: int\n",
    "factories": ("class C:\n  a: int\n  items: list = field(default_factory=list)\n"
                  "  seen: dict = field(default_factory=dict)\n"
                  "  q: deque = field(default_factory=lambda: deque(maxlen=3))\n"),
    "hidden": ("class C:\n  a: int\n  secret: str = field(default='s', repr=False, compare=False)\n"
               "  note: object = field(default=None, compare=False)\n"),
    "hashflags": "class C:\n  a: int\n  b: int = field(default=0, hash=False)\n  c: int = field(default=1, compare=False, hash=True)\n",
    "noinit": "class C:\n  a: int\n  b: int = field(default=5, init=False)\n  c: list = field(default_factory=list, init=False)\n",
    "classvar": "class C:\n  K: typing.ClassVar[int] = 3\n  a: int = 1\n",
    # the fallback to dataclasses must see the class untouched (the factory still there)
    "factory_then_classvar": ("class C:\n  a: list = field(default_factory=list)\n"
                              "  K: typing.ClassVar[int] = 3\n"),
    "empty": "class C:\n  pass\n",
    "own_methods": ("class C:\n  a: int\n  def __repr__(self):\n    return 'mine'\n"
                    "  def __eq__(self, other):\n    return True\n"),
    "own_hash": "class C:\n  a: int\n  def __hash__(self):\n    return 7\n",
    "post_init": ("class C:\n  a: int\n  b: int = 0\n"
                  "  def __post_init__(self):\n    object.__setattr__(self, 'b', self.a * 2)\n"),
    "odd_names": "class C:\n  name: str\n  value: int = 0\n  other: int = 1\n  hash: int = 2\n  type: str = 't'\n",
}
OPTIONS = [{}, {"frozen": True}, {"frozen": True, "eq": False}, {"eq": False}]


def _args(cls) -> list:
    return [1 if f.type in ("int", int) else "v" for f in dataclasses.fields(cls)
            if f.init and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING]


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # the same error type and message
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_twins_behave_the_same(shape, opts):
    ref, ours = _twins(SHAPES[shape], **opts)
    a_ref, a_ours = ref(*_args(ref)), ours(*_args(ours))
    b_ref, b_ours = ref(*_args(ref)), ours(*_args(ours))
    assert repr(a_ours).replace(ours.__qualname__, "C") == repr(a_ref).replace(ref.__qualname__, "C")
    assert (a_ours == b_ours) == (a_ref == b_ref)
    assert (a_ours != b_ours) == (a_ref != b_ref)
    assert (a_ours == 3) == (a_ref == 3)
    names = [f.name for f in dataclasses.fields(ref) if f.init]
    if names:  # one field different: equal or not as dataclasses says (compare=False counts)
        for n in names:
            other = {n: 99 if isinstance(getattr(a_ref, n), int) else "other"}
            c_ref, c_ours = dataclasses.replace(a_ref, **other), dataclasses.replace(a_ours, **other)
            assert (a_ours == c_ours) == (a_ref == c_ref), n
    assert (ours.__hash__ is None) == (ref.__hash__ is None)
    if ref.__hash__ is not None and ref.__hash__ is not object.__hash__:
        assert _outcome(lambda: hash(a_ours)) == _outcome(lambda: hash(a_ref))
    assert str(inspect.signature(ours)) == str(inspect.signature(ref))
    def described(cls):
        return [(f.name, f.type, f.default, f.default_factory is dataclasses.MISSING, f.init,
                 f.repr, f.compare, f.hash, f.kw_only, f._field_type is dataclasses._FIELD,
                 repr(getattr(cls, f.name, "<absent>")))
                for f in cls.__dataclass_fields__.values()]
    assert described(ours) == described(ref)
    assert dataclasses.is_dataclass(ours) and ours.__match_args__ == ref.__match_args__
    assert repr(dataclasses.asdict(a_ours)) == repr(dataclasses.asdict(a_ref))
    assert dataclasses.astuple(a_ours) == dataclasses.astuple(a_ref)
    names = [f.name for f in dataclasses.fields(ref) if f.init]
    if names:
        changed = {names[0]: 9 if isinstance(getattr(a_ref, names[0]), int) else "w"}
        assert repr(dataclasses.replace(a_ours, **changed)).replace(ours.__qualname__, "C") == \
            repr(dataclasses.replace(a_ref, **changed)).replace(ref.__qualname__, "C")
        assert _outcome(lambda: setattr(a_ours, names[0], 5)) == \
            _outcome(lambda: setattr(a_ref, names[0], 5))
        assert _outcome(lambda: delattr(b_ours, names[0])) == \
            _outcome(lambda: delattr(b_ref, names[0]))
    assert _outcome(lambda: setattr(a_ours, "extra", 1)) == _outcome(lambda: setattr(a_ref, "extra", 1))
    p = ours.__dataclass_params__, ref.__dataclass_params__
    assert (p[0].init, p[0].repr, p[0].eq, p[0].frozen) == (p[1].init, p[1].repr, p[1].eq, p[1].frozen)
    assert ours.__doc__ == ref.__doc__
    assert repr(copy.deepcopy(a_ours)) == repr(a_ours)
    assert ours.__init__.__qualname__.endswith(".__init__")


def test_factories_give_each_instance_its_own():
    _, ours = _twins(SHAPES["factories"])
    x, y = ours(1), ours(2)
    x.items.append(1)
    assert y.items == [] and x.q.maxlen == 3 and x.q is not y.q


def test_a_record_that_contains_itself_repr_is_bounded():
    for cls in _twins("class C:\n  a: object = None\n"):
        c = cls()
        c.a = c
        assert repr(c).endswith("(a=...)")


def test_a_non_default_after_a_default_is_refused():
    for deco in (dataclasses.dataclass, record.dataclass):
        ns: dict = {}
        exec("class C:\n  a: int = 1\n  b: int\n", ns)
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            deco(ns["C"])


def test_wrong_arguments_fail_as_for_dataclasses():
    ref, ours = _twins(SHAPES["plain"], frozen=True)
    for args, kw in (((), {}), ((1, "x", 3), {}), ((1,), {"c": 2}), ((1,), {"a": 2})):
        assert _outcome(lambda: ours(*args, **kw))[0] == _outcome(lambda: ref(*args, **kw))[0]


def test_project_records_pickle_and_compare():
    from ascend_doctor.model import Finding, Status

    f = Finding.passed("fine")
    assert pickle.loads(pickle.dumps(f)).status is Status.PASS
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.status = Status.FAIL  # type: ignore[misc]


def test_inheritance_and_unusual_options_go_to_dataclasses():
    base = record.dataclass(frozen=True)(type("B", (), {"__annotations__": {"a": "int"}}))
    sub = record.dataclass(frozen=True)(type("S", (base,), {"__annotations__": {"b": "int"}}))
    assert [f.name for f in dataclasses.fields(sub)] == ["a", "b"] and sub(1, 2).b == 2
    ordered = record.dataclass(order=True)(type("O", (), {"__annotations__": {"a": "int"}}))
    assert ordered(1) < ordered(2)
    with pytest.raises(TypeError, match="kw_only"):
        record.dataclass(type("K", (), {"__annotations__": {"a": "int"},
                                        "a": dataclasses.field(kw_only=True)}))


@pytest.mark.parametrize("body, error", [
    ("class C:\n  a: list = []\n", ValueError),
    ("class C:\n  a: int = 1\n  b = field(default=2)\n", TypeError),
])
def test_what_dataclasses_refuses_is_refused(body, error):
    for deco in (dataclasses.dataclass, record.dataclass):
        ns: dict = {"field": dataclasses.field}
        exec(body, ns)
        with pytest.raises(error):
            deco(ns["C"])


def test_a_subclass_of_a_record_sees_its_fields_as_dataclasses_does():
    base = record.dataclass(type("B", (), {"__annotations__": {"a": "int"}, "a": 1}))
    sub = dataclasses.dataclass(type("S", (base,), {"__annotations__": {"b": "int"}, "b": 2}))
    assert sub().a == 1 and sub(5, 6).b == 6 and repr(sub()).endswith("S(a=1, b=2)")


def test_project_records_use_the_fast_decorator():
    """A new module written with ``from dataclasses import dataclass`` would bring back the
    per-method compiles at start-up (docs/HACKING.md, "Start-up cost")."""
    import pathlib
    import re

    root = pathlib.Path(record.__file__).resolve().parent.parent
    slow = re.compile(r"^from dataclasses import .*\bdataclass\b|^@dataclasses\.dataclass", re.M)
    offenders = [str(p.relative_to(root)) for top in ("doctor", "checks", "fixes", "knowledge")
                 for p in (root / top).rglob("*.py")
                 if p.name != "record.py" and slow.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
