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


# --- __init__ renamed from a per-shape template: the code exec would compile -----------------

KINDS = ("req", "dflt", "fact", "noinit_dflt", "noinit_fact")
TRICKY = ["a", "b", "x", "_f0", "_f1", "_f2", "_f10", "_dflt__f0", "_dflt_a", "self", "_obj",
          "_FACTORY", "__post_init__", "__setattr__", "__init__", "class", "None", "__debug__",
          "match", "type", "_", "__x", "é", "ﬁ", "dflt", "fact", "__class__", "super",
          "__builtins__", "print"]


def _init_class(spec, post=False):
    """A bare class and the fields [(name, kind)] describe, as record collects them (not
    put on the class: _init reads only its __post_init__; "__class__" is a fine field)."""
    flds = []
    for i, (n, k) in enumerate(spec):
        if k == "dflt":
            f = dataclasses.field(default=i if i % 2 else (n, i))
        elif k == "fact":
            f = dataclasses.field(default_factory=lambda n=n: [n])
        elif k == "noinit_dflt":
            f = dataclasses.field(default=-i, init=False)
        elif k == "noinit_fact":
            f = dataclasses.field(default_factory=lambda n=n: {n}, init=False)
        else:
            f = dataclasses.field()
        f.name, f.type, f.kw_only, f._field_type = n, "int", False, dataclasses._FIELD
        flds.append(f)
    ns = {}
    if post:
        ns["__post_init__"] = lambda self: object.__setattr__(self, "posted", sorted(vars(self)))
    return type("C", (), ns), flds


CODE_ATTRS = ("co_code", "co_names", "co_varnames", "co_consts", "co_argcount",
              "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_flags",
              "co_stacksize", "co_firstlineno", "co_name", "co_filename", "co_cellvars",
              "co_freevars")


def _assert_same_init(cls, flds, frozen):
    """record._init (template) gives what record._init_exec (one exec) gives."""
    ref = _outcome(lambda: record._init_exec(cls, flds, frozen))
    got = _outcome(lambda: record._init(cls, flds, frozen))
    if ref[0] != "ok":
        assert got == ref
        return
    r, g = ref[1], got[1]
    for attr in CODE_ATTRS + ("co_qualname", "co_exceptiontable"):  # the last two: 3.11+
        assert getattr(g.__code__, attr, None) == getattr(r.__code__, attr, None), attr
    # the same lines; not the same columns (co_positions, 3.11+): the template's names have
    # other lengths. Nothing shows them: a traceback has no source line for "<string>".
    assert list(g.__code__.co_lines()) == list(r.__code__.co_lines())
    assert (g.__defaults__ is None) == (r.__defaults__ is None)
    assert len(g.__defaults__ or ()) == len(r.__defaults__ or ())
    assert all(x is y for x, y in zip(g.__defaults__ or (), r.__defaults__ or ()))
    assert g.__kwdefaults__ == r.__kwdefaults__ and g.__annotations__ == r.__annotations__
    assert g.__globals__.keys() == r.__globals__.keys()
    assert all(g.__globals__[k] is r.__globals__[k] for k in r.__globals__)
    assert (g.__name__, g.__qualname__, g.__doc__, g.__module__) == \
        (r.__name__, r.__qualname__, r.__doc__, r.__module__)
    assert str(inspect.signature(g)) == str(inspect.signature(r))
    for fn in (r, g):
        fn.__qualname__ = "C.__init__"
    params = [f.name for f in flds if f.init]
    required = [f.name for f in flds if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    calls = [((), {}), (tuple(range(len(required))), {}), (tuple(range(len(params))), {}),
             (tuple(range(len(params) + 1)), {}), (tuple(range(len(required))), {"zz": 1})]
    if params:
        calls += [((), {params[-1]: "kw"}), ((0,) * len(params), {params[0]: "twice"}),
                  ((), {n: n for n in params})]
    for args, kw in calls:
        objs = [object.__new__(cls), object.__new__(cls)]
        outcomes = [_outcome(lambda fn=fn, o=o: fn(o, *args, **kw)) for fn, o in zip((r, g), objs)]
        assert outcomes[1] == outcomes[0], (args, kw)
        assert vars(objs[1]) == vars(objs[0]), (args, kw)


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("post", [False, True])
@pytest.mark.parametrize("spec", [
    [], [("a", "req")], [("a", "dflt")], [("a", "fact")], [("a", "noinit_dflt")],
    [("a", "noinit_fact")], [("a", "req"), ("b", "dflt"), ("c", "fact"), ("d", "noinit_fact")],
    [("a", "dflt"), ("b", "req")],  # refused: non-default after default
    [("a", "fact"), ("b", "req")],
    [("a", "noinit_fact"), ("b", "req"), ("c", "noinit_dflt"), ("d", "req")],
    # placeholders' own names, in other places than theirs
    [("_f1", "req"), ("_f0", "fact"), ("_f2", "noinit_fact")],
    [("b", "req"), ("_f0", "dflt")], [("_f10", "req")] + [(f"f{i}", "dflt") for i in range(11)],
    # names the code uses itself, or compile refuses or changes
    [("__post_init__", "req")], [("__post_init__", "fact")], [("__setattr__", "req")],
    [("self", "req")], [("_obj", "req")], [("_FACTORY", "fact")], [("_dflt_a", "req")],
    [("a", "req"), ("class", "req")], [("__debug__", "req")], [("é", "req")], [("ﬁ", "fact")],
    [("match", "req"), ("type", "dflt"), ("_", "fact"), ("__x", "req")],
    [(f"f{i}", "req") for i in range(300)],
], ids=lambda s: ",".join(f"{n}:{k}" for n, k in s[:4]) if isinstance(s, list) else None)
def test_the_template_init_is_the_exec_init(spec, post, frozen):
    cls, flds = _init_class(spec, post)
    _assert_same_init(cls, flds, frozen)


def test_one_template_per_shape_and_no_exec_for_ordinary_names(monkeypatch):
    monkeypatch.setattr(record, "_TEMPLATES", {})  # a fresh cache, the real one kept
    monkeypatch.setattr(record, "_init_exec", lambda *a: pytest.fail("exec path taken"))
    for names in (("a", "b", "c"), ("x", "_f1", "_f0"), ("long_name", "y", "z")):
        cls, flds = _init_class(list(zip(names, ("req", "dflt", "fact"))))
        init = record._init(cls, flds, True)
        assert init.__code__.co_varnames == ("self",) + names[:2] + (names[2],)
    assert list(record._TEMPLATES) == [(True, False, "vvf")]


def test_an_unexpected_template_falls_back_to_exec(monkeypatch):
    monkeypatch.setattr(record, "_TEMPLATES", {})  # a fresh cache, the real one kept
    asked = []
    monkeypatch.setattr(record, "_template", lambda *a: asked.append(a))  # None
    for name in ("a", "b"):
        cls, flds = _init_class([(name, "req")])
        _assert_same_init(cls, flds, False)
    assert asked == [(False, False, "v")]  # once per shape
    assert record._TEMPLATES == {(False, False, "v"): None}


@pytest.mark.parametrize("line", [
    " self._f0 = ('_f0', _f0)",  # the placeholder as a string where none is expected
    " self._f0 = _f0 or ('_f0', 1)",  # inside a constant tuple
    " self._f0 = _f0\n self._f1 = _f0",  # a name not of the shape
    " _f1 = _f0\n self._f0 = _f1",  # a local not a parameter
])
def test_the_template_check_refuses_code_it_does_not_expect(monkeypatch, line):
    """As if a compiler wrote the placeholders somewhere new: _template gives None."""
    import builtins

    def exec_(src, g, ns):
        assert src.endswith(" self._f0 = _f0")
        builtins.exec(src.replace(" self._f0 = _f0", line), g, ns)

    monkeypatch.setattr(record, "exec", exec_, raising=False)
    assert record._template(False, False, "v") is None
    monkeypatch.undo()
    assert record._template(False, False, "v") is not None


def test_project_records_init_is_the_exec_init():
    """Every record class of the project's modules (~160 of them, a run builds ~110)."""
    import importlib
    import pathlib
    import re

    root = pathlib.Path(record.__file__).resolve().parent.parent
    uses = re.compile(r"^from (\.+|ascend_doctor\.)record import", re.M)
    mods = []
    for top, pkg in (("doctor", "ascend_doctor"), ("checks", "ascend_doctor.checks"),
                     ("fixes", "ascend_doctor.fixes"), ("knowledge", "ascend_doctor.knowledge")):
        for p in sorted((root / top).rglob("*.py")):
            if uses.search(p.read_text(encoding="utf-8")):
                parts = p.relative_to(root / top).with_suffix("").parts
                parts = parts[:-1] if parts[-1] == "__init__" else parts
                mods.append(importlib.import_module(".".join((pkg, *parts))))
    seen = 0
    for mod in mods:
        for cls in list(vars(mod).values()):
            init = getattr(cls, "__init__", None) if isinstance(cls, type) else None
            if getattr(init, "__globals__", {}).get("_FACTORY") is not record._FACTORY:
                continue
            flds = list(cls.__dataclass_fields__.values())
            ref = record._init_exec(cls, flds, cls.__dataclass_params__.frozen)
            for attr in CODE_ATTRS:
                assert getattr(init.__code__, attr) == getattr(ref.__code__, attr), (cls, attr)
            assert init.__defaults__ == ref.__defaults__
            assert init.__annotations__ == ref.__annotations__
            seen += 1
    assert seen >= 100


try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:
    _names = st.one_of(st.sampled_from(TRICKY),
                       st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True))

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(spec=st.lists(st.tuples(_names, st.sampled_from(KINDS)), max_size=12,
                         unique_by=lambda t: t[0]),
           post=st.booleans(), frozen=st.booleans())
    def test_the_template_init_is_the_exec_init_for_generated_fields(spec, post, frozen):
        cls, flds = _init_class(spec, post)
        _assert_same_init(cls, flds, frozen)
