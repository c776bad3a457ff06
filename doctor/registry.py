"""Registries of checks and fact providers.

Decorators only attach a spec to the function; nothing is registered at import time.
``Registry.discover()`` scans the built-in ``checks`` package and ``doctor.probes`` for
those specs, so a test can build a fresh Registry with exactly the checks it wants.
"""

from __future__ import annotations

import importlib
import pkgutil
import typing
from typing import Any, Callable, Iterable

from .errors import UsageError
from .model import Category, Severity
from .i18n import T
from dataclasses import dataclass, field

ENTRY_POINT_GROUP = "ascend_doctor.checks"
_CHECK_ATTR = "__ascend_doctor_check__"
_PROVIDER_ATTR = "__ascend_doctor_provider__"


@dataclass(frozen=True, eq=False)
class CheckSpec:
    """A registered check: its id, title, function, category and time budget."""

    id: str
    title: str
    func: Callable[..., Any]
    category: Category
    tags: tuple[str, ...] = ()
    timeout: float | None = None  # overrides the run's per-check timeout
    origin: str = "builtin"  # builtin | entry point name
    severity: Severity | None = None  # used when no KB entry of a finding names one

    @property
    def module(self) -> str:
        return getattr(self.func, "__module__", "")


@dataclass(frozen=True, eq=False)
class ProviderSpec:
    """A registered provider: the fact type it makes and its function."""

    fact: type
    func: Callable[..., Any]


def check(id: str, *, title: str, category: Category | str, tags: Iterable[str] = (),
          timeout: float | None = None, severity: Severity | str | None = None
          ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as a check. Its parameters' type hints name the facts it needs."""

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, _CHECK_ATTR, CheckSpec(id, title, func, Category(category), tuple(tags),
                                             timeout,
                                             severity=Severity(severity) if severity else None))
        return func

    return deco


def provider(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a function as the producer of the fact type named by its return annotation."""
    fact = _return_type(func)
    if fact is _NO_RETURN:
        raise TypeError(f"provider {func.__qualname__} needs a return annotation")
    setattr(func, _PROVIDER_ATTR, ProviderSpec(fact, func))
    return func


_NO_RETURN = object()


def hint_globals(func: Callable[..., Any]) -> Any:
    """The namespace ``get_type_hints`` resolves ``func``'s string annotations in: the
    globals of the innermost function under any ``__wrapped__`` chain (None if it has none)."""
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    return getattr(func, "__globals__", None)


def _return_type(func: Callable[..., Any]) -> Any:
    """What ``get_type_hints(func)["return"]`` gives. A plain name (every provider of ours:
    ``-> "LdSoConf"``) is looked up where get_type_hints would find it, the innermost
    function's globals, instead of compiling and evaluating the string with every other
    annotation (~1.5 ms for the ~35 providers at import)."""
    ann = getattr(func, "__annotations__", {}).get("return", _NO_RETURN)
    ns = hint_globals(func)
    if isinstance(ann, str) and ann.isidentifier() and isinstance(ns, dict) and ann in ns:
        return ns[ann]
    return typing.get_type_hints(func).get("return", _NO_RETURN)


@dataclass(eq=False)
class PluginRef:
    """A third-party check module, listed without importing it."""

    name: str
    value: str
    loaded: bool = False
    error: str | None = None


@dataclass(eq=False)
class Registry:
    """The checks and fact providers of a run, and the plugins listed for it."""

    checks: dict[str, CheckSpec] = field(default_factory=dict)
    providers: dict[type, ProviderSpec] = field(default_factory=dict)
    plugins: list[PluginRef] = field(default_factory=list)

    # -- building ----------------------------------------------------------------------
    def add_check(self, spec: CheckSpec) -> None:
        if spec.id in self.checks and self.checks[spec.id].func is not spec.func:
            raise ValueError(f"duplicate check id {spec.id!r}")
        self.checks[spec.id] = spec

    def add_provider(self, spec: ProviderSpec) -> None:
        self.providers[spec.fact] = spec

    def add_module(self, module: Any, origin: str = "builtin") -> None:
        for value in vars(module).values():
            cspec = getattr(value, _CHECK_ATTR, None)
            if isinstance(cspec, CheckSpec) and getattr(value, "__module__", "") == module.__name__:
                if origin != "builtin":
                    cspec = CheckSpec(cspec.id, cspec.title, cspec.func, cspec.category,
                                      cspec.tags, cspec.timeout, origin, cspec.severity)
                self.add_check(cspec)
            pspec = getattr(value, _PROVIDER_ATTR, None)
            if isinstance(pspec, ProviderSpec):
                self.add_provider(pspec)

    def add_package(self, package_name: str) -> None:
        pkg = importlib.import_module(package_name)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            self.add_module(importlib.import_module(f"{package_name}.{info.name}"))

    @classmethod
    def discover(cls, plugins: bool = True, only: Iterable[str] = (),
                 skip: Iterable[str] = ()) -> "Registry":
        """Every built-in check and provider (``only`` and ``skip`` are applied by ``select``;
        accepted here for the callers that pass them)."""
        reg = cls()
        found = list_plugins() if plugins else []
        reg.add_package("ascend_doctor.probes")
        reg.add_package("ascend_doctor.checks")
        reg.plugins = found
        return reg

    def load_plugins(self) -> None:
        """Import third-party check modules; a broken plugin is recorded, never fatal."""
        if all(ref.loaded for ref in self.plugins):
            return  # nothing to load: no second scan of every installed distribution
        from importlib.metadata import entry_points

        eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
        for ref in self.plugins:
            if ref.loaded:
                continue
            try:
                self.add_module(eps[ref.name].load(), origin=ref.name)
                ref.loaded = True
            except Exception as exc:  # a plugin must never take the run down
                ref.error = f"{type(exc).__name__}: {exc}"

    # -- selecting ---------------------------------------------------------------------
    def select(self, only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[CheckSpec]:
        """Checks chosen by id, id prefix (``ldconf`` = ``ldconf.*``) or tag."""
        only, skip = list(only), list(skip)
        for word in only + skip:
            if not self._matches_any(word):
                import difflib  # noqa: PLC0415 (only on this error path)
                words = sorted({*self.checks, *(c.split(".")[0] for c in self.checks),
                                *(t for s in self.checks.values() for t in s.tags)})
                near = difflib.get_close_matches(word, words, n=3, cutoff=0.6)
                if near:
                    raise UsageError(T("unknown check id or tag {word}; did you mean {near}? "
                                       "(`ascend-doctor list` shows them all)", word=repr(word),
                                       near=", ".join(near)))
                raise UsageError(T("unknown check id or tag {word} (`ascend-doctor list` shows "
                                   "the ids and tags)", word=repr(word)))
        chosen = [s for s in self.checks.values()
                  if (not only or any(self._match(s, w) for w in only))
                  and not any(self._match(s, w) for w in skip)]
        return sorted(chosen, key=lambda s: s.id)

    @staticmethod
    def _match(spec: CheckSpec, word: str) -> bool:
        return (spec.id == word or spec.id.startswith(word + ".") or word in spec.tags
                or spec.category.value == word)

    def _matches_any(self, word: str) -> bool:
        return any(self._match(s, word) for s in self.checks.values())


def list_plugins() -> list[PluginRef]:
    """Check plugins declared by installed distributions (entry point group
    ``ascend_doctor.checks``), listed without importing them."""
    if not _may_declare_plugins():
        return []
    from importlib.metadata import entry_points

    return [PluginRef(ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)]


def _may_declare_plugins() -> bool:
    """False only when no distribution importlib.metadata would find can declare a plugin:
    every ``*.dist-info``/``*.egg-info`` directory on ``sys.path`` read for the group's
    name in its ``entry_points.txt``. Importing importlib.metadata and parsing every
    distribution costs ~40 ms of each run; this costs a few ``listdir``. Anything it cannot
    read for sure (a zip or egg on the path, another distribution finder) says True, and
    importlib.metadata gives the answer."""
    import os
    import sys
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return True
    needle = ENTRY_POINT_GROUP.encode()
    for entry in sys.path:
        base = entry or "."
        if not isinstance(base, str):
            return True
        try:
            names = os.listdir(base)
        except NotADirectoryError:
            return True  # a zip: importlib.metadata reads inside it
        except OSError:
            continue  # absent: importlib.metadata skips it too
        for name in names:
            low = name.lower()
            if low.endswith(".egg"):
                return True
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(base, name, "entry_points.txt"), "rb") as fh:
                    if needle in fh.read():
                        return True
            except (FileNotFoundError, NotADirectoryError):
                continue  # no entry points (an egg-info file holds none either)
            except OSError:
                return True  # unreadable: let importlib.metadata decide
    return False
