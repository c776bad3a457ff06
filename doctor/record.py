"""``dataclass`` with at most one compile per class: a faster start for the same classes.

Why: ``dataclasses.dataclass`` compiles each generated method (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``) with its own
``exec``; for the ~110 record classes a full run imports, that was 460 compiles and about
a fifth of ``demo --json`` (issue 16). Here the class's own annotations become the same
``dataclasses.Field`` objects in ``__dataclass_fields__`` (so ``fields()``, ``replace()``,
``asdict()`` and ``is_dataclass()`` work as before), the defaults go back on the class as
dataclasses puts them, and only ``__init__`` is compiled (its signature is the fields'),
once per *shape* of class and then renamed (``_init``: the 110 classes have 41 shapes, and
110 compiles were ~18 ms of a run); the other methods are small closures over the field
names, with the same behaviour.

tests/unit/test_record.py compares every method with dataclasses' own on twin classes.
Options outside what the project uses (``order``, ``slots``, ``kw_only``, ``unsafe_hash``...)
and classes with dataclass bases go to ``dataclasses.dataclass`` unchanged; an ``InitVar``
or ``kw_only`` field is refused with a TypeError saying so.
"""

from __future__ import annotations

import builtins
import dataclasses
import keyword
from _thread import get_ident
from operator import attrgetter
from typing import Any, Callable

__all__ = ["dataclass", "field"]

field = dataclasses.field
_MISSING = dataclasses.MISSING
# names the generated __init__ uses next to the fields' own
_INTERNAL = frozenset({"self", "_obj", "_FACTORY"})


class _Factory:
    """The default shown for a field with a default_factory (dataclasses' own is private)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _guard(fn: Callable[[Any], str]) -> Callable[[Any], str]:
    """``...`` instead of endless recursion for a record that contains itself (as dataclasses)."""
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = (id(self), get_ident())
        if key in running:
            return "..."
        running.add(key)
        try:
            return fn(self)
        finally:
            running.discard(key)

    return __repr__


def dataclass(cls: type | None = None, /, *, frozen: bool = False, eq: bool = True,
              init: bool = True, repr: bool = True, **other: Any) -> Any:
    """``dataclasses.dataclass(cls, frozen=..., eq=...)``, built faster (see the module doc)."""
    def wrap(c: type) -> type:
        if other or not init or not repr:
            return dataclasses.dataclass(c, frozen=frozen, eq=eq, init=init, repr=repr, **other)
        return _build(c, frozen, eq)

    return wrap if cls is None else wrap(cls)


def _build(cls: type, frozen: bool, eq: bool) -> type:
    if any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:]):
        return dataclasses.dataclass(cls, frozen=frozen, eq=eq)  # inherited fields
    own = dict(cls.__dict__)
    doc = own.get("__doc__")
    flds = _collect(cls, own)
    if flds is None:  # a ClassVar, InitVar or KW_ONLY: dataclasses reads the class
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
        flds = [f for f in cls.__dataclass_fields__.values()  # type: ignore[attr-defined]
                if f._field_type is not dataclasses._FIELD_CLASSVAR]  # type: ignore[attr-defined]
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        params.init = params.repr = True
        params.eq, params.frozen = eq, frozen
    else:
        cls.__dataclass_fields__ = {f.name: f for f in flds}  # type: ignore[attr-defined]
        cls.__dataclass_params__ = _params(eq, frozen)  # type: ignore[attr-defined]
        if "__match_args__" not in own:
            cls.__match_args__ = tuple(f.name for f in flds if f.init)  # type: ignore[attr-defined]
    for f in flds:
        if (f._field_type is not dataclasses._FIELD or f.kw_only is True  # type: ignore[attr-defined]
                or f.name in _INTERNAL or f.name.startswith("_dflt_")):
            raise TypeError(f"{cls.__qualname__}.{f.name}: use dataclasses.dataclass for an "
                            "InitVar, a kw_only field or this name")

    def put(method: str, fn: Callable) -> None:
        if method not in own:  # a method the class body defines stays
            fn.__name__, fn.__qualname__ = method, f"{cls.__qualname__}.{method}"
            setattr(cls, method, fn)

    if "__init__" not in own:
        put("__init__", _init(cls, flds, frozen))
    put("__repr__", _repr([f.name for f in flds if f.repr]))
    if eq:
        put("__eq__", _eq(_values([f.name for f in flds if f.compare])))
    if frozen:
        put("__setattr__", _frozen_setattr(cls, tuple(f.name for f in flds)))
        put("__delattr__", _frozen_delattr(cls, tuple(f.name for f in flds)))
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if eq and not explicit_hash:
        if frozen:
            values = _values([f.name for f in flds if (f.compare if f.hash is None else f.hash)])
            fn = lambda self: hash(values(self))  # noqa: E731
            fn.__name__, fn.__qualname__ = "__hash__", f"{cls.__qualname__}.__hash__"
            cls.__hash__ = fn  # type: ignore[assignment]
        else:
            cls.__hash__ = None  # type: ignore[assignment]
    if doc is None:  # dataclasses' class doc: the name and inspect's form of the signature
        cls.__doc__ = cls.__name__ + "(" + ", ".join(
            _param(f) for f in flds if f.init) + ")"
    return cls


def _param(f: dataclasses.Field) -> str:
    """One parameter as ``str(inspect.signature(cls))`` writes it (inspect costs an import)."""
    t = f.type
    if isinstance(t, type):
        ann = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    else:
        ann = builtins.repr(t)
        if getattr(t, "__module__", None) == "typing":
            ann = ann.replace("typing.", "")
    if f.default_factory is not _MISSING:
        return f"{f.name}: {ann} = <factory>"
    if f.default is not _MISSING:
        return f"{f.name}: {ann} = {builtins.repr(f.default)}"
    return f"{f.name}: {ann}"


def _init(cls: type, flds: list[dataclasses.Field], frozen: bool) -> Callable:
    """``__init__``, the one method compiled: its signature is the fields'.

    Why a template: up to names, the code of ``__init__`` depends only on the class's
    *shape* (frozen, ``__post_init__``, each field's kind); default values are in
    ``__defaults__`` and the globals, not in the code. Each shape is compiled once with
    placeholder names (``_template``) and renamed here with ``CodeType.replace``: the code
    ``_init_exec`` compiles, but for the columns in ``co_positions()`` (tests/unit/
    test_record.py). What the renaming cannot vouch for goes to ``_init_exec``."""
    names: dict[str, Any] = {"_obj": object, "_FACTORY": _FACTORY}
    kinds, real, defaults = [], [], []
    for f in flds:
        name = f.name
        if (name in _NOT_PARAM or not name.isascii() or not name.isidentifier()
                or name.startswith("_dflt_")):
            return _init_exec(cls, flds, frozen)  # its SyntaxError (or NFKC name), not ours
        d = "_dflt_" + name
        if f.default_factory is not _MISSING:
            names[d] = f.default_factory
            if f.init:
                kinds.append("f")
                defaults.append(_FACTORY)
            else:
                kinds.append("n")
        elif f.init:
            if f.default is not _MISSING:
                names[d] = f.default
                defaults.append(f.default)
            elif defaults:  # _init_exec raises the error
                return _init_exec(cls, flds, frozen)
            kinds.append("v")
        else:
            continue  # init=False with a plain default: the class attribute serves
        real.append(name)
    post = hasattr(cls, "__post_init__")
    key = (frozen, post, "".join(kinds))
    template = _TEMPLATES.get(key, _MISSING)
    if template is _MISSING:
        template = _TEMPLATES[key] = _template(frozen, post, key[2])
    if template is None:
        return _init_exec(cls, flds, frozen)
    code, placeholders, globals_ = template
    # placeholder i -> field i, in every role: parameter, attribute, its name as a constant
    # (frozen); "_dflt_" + placeholder i -> its global. Only the template's own strings are
    # looked up, so a field named like a placeholder is renamed like any other.
    ren = dict(zip(placeholders, real))
    ren.update(zip(globals_, ["_dflt_" + r for r in real]))
    co_names = tuple([ren.get(x, x) for x in code.co_names])
    if len(set(co_names)) != len(co_names):  # a field named like a name the code uses
        return _init_exec(cls, flds, frozen)  # (__post_init__): compile would share it
    code = code.replace(co_names=co_names,
                        co_varnames=tuple([ren.get(x, x) for x in code.co_varnames]),
                        co_consts=tuple([ren.get(x, x) if x.__class__ is str else x
                                         for x in code.co_consts]))
    names["__builtins__"] = builtins.__dict__  # what exec adds
    fn = _FunctionType(code, names, None, tuple(defaults) or None)
    fn.__annotations__ = {f.name: f.type for f in flds if f.init} | {"return": None}
    return fn


_FunctionType = type(_init)
# compile refuses these as parameters (_init_exec raises its SyntaxError), or a parameter
# of that name would hide a name the code uses
_NOT_PARAM = frozenset(keyword.kwlist) | {"__debug__"} | _INTERNAL
# (frozen, __post_init__, kinds) -> (code, placeholders, their globals), or None: the
# compiled template was not as expected, use _init_exec
_TEMPLATES: dict[tuple[bool, bool, str], Any] = {}


def _template(frozen: bool, post: bool, kinds: str) -> tuple[Any, list, list] | None:
    """The ``__init__`` code of one shape, placeholder names for the fields (what
    ``_init_exec`` writes for such fields, the defaults left out: they are not in the code).
    Kinds: ``v`` a parameter (required or plain default), ``f`` a parameter with a
    default_factory, ``n`` a default_factory without a parameter. None if the compiled code
    holds the placeholders anywhere other than where the renaming expects them, or anything
    else it does not expect (a compiler that does something new)."""
    placeholders = [f"_f{i}" for i in range(len(kinds))]
    globals_ = ["_dflt_" + p for p in placeholders]
    args, body = ["self"], []
    for p, g, k in zip(placeholders, globals_, kinds):
        if k == "v":
            args.append(p)
            value = p
        elif k == "f":
            args.append(p)
            value = f"{g}() if {p} is _FACTORY else {p}"
        else:
            value = f"{g}()"
        body.append(f" _obj.__setattr__(self, {p!r}, {value})" if frozen
                    else f" self.{p} = {value}")
    if post:
        body.append(" self.__post_init__()")
    ns: dict[str, Any] = {}
    exec(f"def __init__({', '.join(args)}):\n" + ("\n".join(body) or " pass"), {}, ns)
    code = ns["__init__"].__code__
    expected = ({"_obj", "__setattr__"} if frozen and kinds else set(placeholders)) | {
        g for g, k in zip(globals_, kinds) if k != "v"} | (
        {"_FACTORY"} if "f" in kinds else set()) | ({"__post_init__"} if post else set())
    strings = [c for c in code.co_consts if c.__class__ is str]
    if (code.co_varnames != tuple(args) or code.co_cellvars or code.co_freevars
            or len(code.co_names) != len(expected) or set(code.co_names) != expected
            or any(c is not None and c.__class__ is not str for c in code.co_consts)
            or sorted(strings) != (sorted(placeholders) if frozen else [])):
        return None
    return code, placeholders, globals_


def _init_exec(cls: type, flds: list[dataclasses.Field], frozen: bool) -> Callable:
    """``__init__`` compiled for this class (what ``_init`` renames a template to be)."""
    names: dict[str, Any] = {"_obj": object, "_FACTORY": _FACTORY}
    args, body, defaulted = ["self"], [], False
    for f in flds:
        d = f"_dflt_{f.name}"
        if f.default_factory is not _MISSING:
            names[d] = f.default_factory
            if f.init:
                args.append(f"{f.name}=_FACTORY")
                defaulted = True
                value = f"{d}() if {f.name} is _FACTORY else {f.name}"
            else:
                value = f"{d}()"
        elif f.init:
            if f.default is not _MISSING:
                names[d] = f.default
                args.append(f"{f.name}={d}")
                defaulted = True
            elif defaulted:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            else:
                args.append(f.name)
            value = f.name
        else:
            continue  # init=False with a plain default: the class attribute serves
        body.append(f" _obj.__setattr__(self, {f.name!r}, {value})" if frozen
                    else f" self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    ns: dict[str, Any] = {}
    exec(f"def __init__({', '.join(args)}):\n" + ("\n".join(body) or " pass"), names, ns)
    fn = ns["__init__"]
    fn.__annotations__ = {f.name: f.type for f in flds if f.init} | {"return": None}
    return fn


def _values(names: list[str]) -> Callable[[Any], tuple]:
    """The tuple of these attributes of an object (what dataclasses compare and hash)."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _repr(names: list[str]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        return self.__class__.__qualname__ + "(" + ", ".join(
            [f"{n}={getattr(self, n)!r}" for n in names]) + ")"

    return _guard(__repr__)


def _eq(values: Callable[[Any], tuple]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _frozen_setattr(cls: type, fieldnames: tuple[str, ...]) -> Callable:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in fieldnames:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: type, fieldnames: tuple[str, ...]) -> Callable:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fieldnames:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


_PARAMS: dict[tuple[bool, bool], Any] = {}


def _params(eq: bool, frozen: bool) -> Any:
    """The ``__dataclass_params__`` dataclasses gives a class with these options (shared)."""
    p = _PARAMS.get((eq, frozen))
    if p is None:
        p = _PARAMS[(eq, frozen)] = dataclasses.dataclass(
            type("_Params", (), {}), eq=eq, frozen=frozen).__dataclass_params__
    return p


def _collect(cls: type, own: dict[str, Any]) -> list[dataclasses.Field] | None:
    """The class's fields as dataclasses collects them (its own annotations, no bases), the
    defaults put back on the class as it does; None for a ClassVar, InitVar or KW_ONLY
    annotation, whose rules are left to dataclasses."""
    annotations = own.get("__annotations__", {})
    for tp in annotations.values():  # all looked at before the class is touched
        text = tp if isinstance(tp, str) else tp.__name__ if isinstance(tp, type) else None
        if text is None or "ClassVar" in text or "InitVar" in text or "KW_ONLY" in text:
            return None
    out = []
    for name, tp in annotations.items():
        default = own.get(name, _MISSING)
        if isinstance(default, dataclasses.Field):
            f = default
            if f.default is _MISSING:  # a factory or no default: no class attribute
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        else:
            f = dataclasses.field(default=default)
        if f.default is not _MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not "
                             "allowed: use default_factory")
        if f.kw_only is _MISSING:  # the class's default, as dataclasses resolves it
            f.kw_only = False  # type: ignore[assignment]
        f.name, f.type = name, tp
        f._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
        out.append(f)
    for name, value in own.items():  # a Field without an annotation is an error there too
        if isinstance(value, dataclasses.Field) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    return out
