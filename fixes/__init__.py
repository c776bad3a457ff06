"""Fix recipes: a finding becomes a plan (diffs, modes, argv commands, manual steps).

Like checks, a recipe is a function carrying a spec (``@recipe``); nothing registers at
import time. ``FixRegistry.discover()`` scans this package's modules for specs. A recipe
only *plans* (reads through the Host, returns a ``Plan``); ``fixes.apply`` writes.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

from ascend_doctor.i18n import T, tr
from dataclasses import dataclass, field

_RECIPE_ATTR = "__ascend_doctor_recipe__"
# Chinese titles of recipes whose plan title is not a catalog message yet (the others'
# plan titles are T() templates, translated from the catalog)
TITLES_ZH = {
    "ldconf.ascend-conf": "Ascend 库写入 ascend.conf，驱动 lib64 优先",
}
# modules of the machinery, not recipes (scanning them is harmless but slower)
_INFRA = {"plan", "apply", "journal", "context", "export"}


@dataclass(frozen=True)
class RecipeSpec:
    id: str
    title: str
    func: Callable[..., Any]
    check: str | None = None  # the check whose re-run verifies the fix
    params: tuple[str, ...] = ()  # parameter names it understands (for --param help)
    # host paths (fnmatch patterns) the recipe may write: undo restores nothing else
    writes: tuple[str, ...] = ()
    # commands undo runs after restoring (the recipe's own argv, never the journal's)
    undo_commands: tuple[Any, ...] = ()
    # checks its change can move (ids, id prefixes, tags): re-run around apply, so a fix
    # that turns another check from pass to fail says so
    affects: tuple[str, ...] = ()
    # host files its commands rewrite (ldconfig: /etc/ld.so.cache): backed up before the
    # commands run, restored by undo
    snapshots: tuple[str, ...] = ()
    # every other --param key is meaningful to it (launch flags: any flag name)
    open_params: bool = False

    def may_write(self, path: str) -> bool:
        """Component by component, so "*" never spans a "/" (and ".." never matches)."""
        import fnmatch
        comps = path.split("/")
        if ".." in comps:
            return False
        return any(len(comps) == len(pat.split("/")) and
                   all(fnmatch.fnmatchcase(c, p) for c, p in zip(comps, pat.split("/")))
                   for pat in (*self.writes, *self.snapshots))

    def unknown_params(self, names: Any) -> list[str]:
        """The names it would ignore: refused, never echoed in the plan and dropped."""
        if self.open_params:
            return []
        return sorted(n for n in names if n not in self.params)

    def plan(self, ctx: Any, params: dict[str, Any] | None = None):
        return self.func(ctx, dict(params or {}))


def recipe(id: str, *, title: str, check: str | None = None,
           params: tuple[str, ...] = (), writes: tuple[str, ...] = (),
           undo_commands: tuple[Any, ...] = (), affects: tuple[str, ...] = (),
           snapshots: tuple[str, ...] = (), open_params: bool = False
           ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark ``func(ctx: FixContext, params: dict) -> Plan`` as the recipe ``id``."""

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, _RECIPE_ATTR, RecipeSpec(id, title, func, check, tuple(params),
                                                 tuple(writes), tuple(undo_commands),
                                                 tuple(affects), tuple(snapshots),
                                                 open_params))
        return func

    return deco


@dataclass
class FixRegistry:
    recipes: dict[str, RecipeSpec] = field(default_factory=dict)

    def add_module(self, module: Any) -> None:
        for value in vars(module).values():
            spec = getattr(value, _RECIPE_ATTR, None)
            if isinstance(spec, RecipeSpec) and getattr(value, "__module__", "") == module.__name__:
                if spec.id in self.recipes and self.recipes[spec.id].func is not spec.func:
                    raise ValueError(f"duplicate fix recipe id {spec.id!r}")
                self.recipes[spec.id] = spec

    @classmethod
    def discover(cls) -> "FixRegistry":
        reg = cls()
        pkg = importlib.import_module(__name__)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.name.startswith("_") or info.name in _INFRA:
                continue
            reg.add_module(importlib.import_module(f"{__name__}.{info.name}"))
        return reg

    def get(self, id: str) -> RecipeSpec:
        from ascend_doctor.errors import UsageError
        try:
            return self.recipes[id]
        except KeyError:
            raise UsageError(T("unknown fix recipe {id} (known: {known})", id=repr(id),
                               known=", ".join(sorted(self.recipes)))) from None


def plan_for(ctx: Any, fix: Any, params: dict[str, Any] | None = None,
             check: str | None = None, registry: FixRegistry | None = None):
    """The plan for a finding's fix (a ``FixRef`` or a recipe id), verified by ``check``
    (the finding's check) or the recipe's own. What the TUI and the CLI both call."""
    rid = getattr(fix, "id", fix)
    merged = {**dict(getattr(fix, "params", {}) or {}), **dict(params or {})}
    spec = (registry or FixRegistry.discover()).get(rid)
    merged["_verify"] = check or spec.check
    plan = spec.plan(ctx, merged)
    plan.params.pop("_verify", None)
    plan.title_zh = plan.title_zh or TITLES_ZH.get(rid) or tr(plan.title, "zh")
    plan.verify = plan.verify or check or spec.check
    plan.affects = list(dict.fromkeys([*plan.affects, *spec.affects]))
    plan.snapshots = list(dict.fromkeys([*plan.snapshots, *spec.snapshots]))
    _refuse_missing_names(ctx, plan)
    return plan


def _refuse_missing_names(ctx: Any, plan: Any) -> None:
    """No fix writes configuration naming paths that do not exist: a plan whose edits name
    a missing path is blocked, with the paths named (recipes that can leave such a path out
    do so themselves and say so in a note)."""
    missing = sorted({p for e in plan.changes for p in e.names if not ctx.exists(p)})
    if missing:
        plan.blocked.append(T("it would write configuration naming {paths}, which do(es) not "
                              "exist on this host", paths=", ".join(missing)))
