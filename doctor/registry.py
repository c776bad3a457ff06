"""Registries of checks and fact providers.

Decorators only attach a spec to the function; nothing is registered at import time.
``Registry.discover()`` scans the built-in ``checks`` package and ``doctor.probes`` for
those specs, so a test can build a fresh Registry with exactly the checks it wants.
"""

from __future__ import annotations

import importlib
import pkgutil
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .errors import UsageError
from .model import Category, Severity

ENTRY_POINT_GROUP = "ascend_doctor.checks"
_CHECK_ATTR = "__ascend_doctor_check__"
_PROVIDER_ATTR = "__ascend_doctor_provider__"


@dataclass(frozen=True)
class CheckSpec:
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


@dataclass(frozen=True)
class ProviderSpec:
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
    hints = typing.get_type_hints(func)
    if "return" not in hints:
        raise TypeError(f"provider {func.__qualname__} needs a return annotation")
    setattr(func, _PROVIDER_ATTR, ProviderSpec(hints["return"], func))
    return func


@dataclass
class PluginRef:
    """A third-party check module, listed without importing it."""

    name: str
    value: str
    loaded: bool = False
    error: str | None = None


@dataclass
class Registry:
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
    def discover(cls, plugins: bool = True) -> "Registry":
        reg = cls()
        reg.add_package("doctor.probes")
        reg.add_package("checks")
        if plugins:
            reg.plugins = list_plugins()
        return reg

    def load_plugins(self) -> None:
        """Import third-party check modules; a broken plugin is recorded, never fatal."""
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
                known = ", ".join(sorted(self.checks))
                raise UsageError(f"unknown check id or tag {word!r} (known: {known})")
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
    from importlib.metadata import entry_points

    return [PluginRef(ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)]
