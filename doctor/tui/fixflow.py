"""The TUI's door to the fix engine (``fixes/``), which it never reimplements.

Two spellings of the API are understood, tried in this order:

1. the kbfix API: ``fixes.plan_for(ctx, fix, params=None, check=None) -> Plan`` with
   ``fixes.context.FixContext.for_root(root, options)`` / ``.for_overlay(host, overlay,
   options)``, ``fixes.apply.apply_plan(plan, ctx, host_factory) -> ApplyResult`` (with
   ``journal``) and ``fixes.apply.undo(journal_id)``;
2. a flat API: ``fixes.build_plan(recipe_id, host, params) -> Plan``,
   ``fixes.apply(plan, *, root, journal_dir, ...) -> Applied`` (with ``journal_id``) and
   ``fixes.undo(journal_id, *, root, journal_dir)`` (keyword arguments are passed only
   when the function accepts them).

Plans are normalised into ``PlanView`` (diffs, argv commands, manual steps, risks) for the
plan modal. When neither API is there the TUI says "fixes are not installed" and shows
the KB steps. Verification is the TUI re-running the originating check through the
engine (the dashboard then shows the new status). No textual here.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

FLAT = ("build_plan", "apply", "undo")


class FixesUnavailable(RuntimeError):
    """The fixes package (or the part of its API the TUI needs) is not installed."""


@dataclass(frozen=True)
class FileDiff:
    path: str
    diff: str


@dataclass(frozen=True)
class PlanView:
    recipe_id: str
    title: str
    diffs: tuple[FileDiff, ...] = ()
    commands: tuple[tuple[str, ...], ...] = ()
    manual: tuple[str, ...] = ()
    risks: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    raw: Any = field(default=None, compare=False)
    ctx: Any = field(default=None, compare=False)  # the engine's context, reused by apply

    @property
    def automatic(self) -> bool:
        return bool(self.diffs or self.commands)


@dataclass(frozen=True)
class Applied:
    journal_id: str | None
    message: str
    raw: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class _Api:
    kind: str  # kbfix | flat
    mod: Any
    apply_mod: Any = None
    context_mod: Any = None


def _module() -> _Api:
    try:
        fixes = importlib.import_module("fixes")
    except ImportError as exc:
        raise FixesUnavailable(f"the fixes package cannot be imported ({exc})") from None
    if callable(getattr(fixes, "plan_for", None)):
        try:
            apply_mod = importlib.import_module("fixes.apply")
            context_mod = importlib.import_module("fixes.context")
        except ImportError as exc:
            raise FixesUnavailable(f"fixes is incomplete ({exc})") from None
        if callable(getattr(apply_mod, "apply_plan", None)) and callable(
                getattr(apply_mod, "undo", None)) and hasattr(context_mod, "FixContext"):
            return _Api("kbfix", fixes, apply_mod, context_mod)
    missing = [n for n in FLAT if not callable(getattr(fixes, n, None))]
    if missing:
        raise FixesUnavailable("fixes are not installed in this build (fixes.plan_for or fixes."
                               + ", fixes.".join(missing) + " missing)")
    return _Api("flat", fixes)


def availability() -> tuple[bool, str]:
    """(True, "") when a fix API is there, else (False, the reason shown to the user)."""
    try:
        _module()
    except FixesUnavailable as exc:
        return False, str(exc)
    return True, ""


def _field(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, Mapping) and n in obj:
            return obj[n]
        if not isinstance(obj, Mapping) and hasattr(obj, n):
            return getattr(obj, n)
    return default


def _text(value: Any, lang: str) -> str:
    if callable(value):
        try:
            return str(value(lang))
        except TypeError:
            return str(value())
    return str(value)


def _kwargs(func: Any, offered: Mapping[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(offered)
    return {k: v for k, v in offered.items() if k in params}


def _strings(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def view(plan: Any, recipe_id: str, lang: str = "en", ctx: Any = None) -> PlanView:
    """Normalise whatever the recipe returned into what the plan modal draws."""
    diffs: list[FileDiff] = []
    edits = _field(plan, "changes", "edits", "diffs", "files", default=()) or ()
    for e in edits:
        if isinstance(e, str):
            text, path = e, ""
        else:
            text = _field(e, "diff", "unified_diff", "patch", default="")
            text = _text(text, lang) if callable(text) else str(text or "")
            path = str(_field(e, "path", "file", default=""))
        if text.strip():
            diffs.append(FileDiff(path, text))
    single = _field(plan, "diff", default=None)
    if not diffs and single is not None:
        text = _text(single, lang) if callable(single) else str(single)
        if text.strip():
            diffs.append(FileDiff("", text))
    commands = tuple(tuple(str(a) for a in (_field(c, "argv", default=c) or ()))
                     for c in (_field(plan, "commands", default=()) or ()))
    manual = tuple(_text(_field(m, "text", default=None) or _field(m, lang, "en", default=m),
                         lang) for m in (_field(plan, "manual", "manual_steps", default=()) or ()))
    risks = _strings(_field(plan, "risks", "risk", default=()))
    root = _field(plan, "needs_root", "requires_root", default=False)
    if root:
        risks.append("needs root" + (": " + "; ".join(_strings(root)) if _strings(root) else ""))
    restarts = _field(plan, "restarts", "restarts_service", default=False)
    if restarts:
        names = _strings(restarts)
        risks.append("restarts " + (", ".join(names) if names else "the service"))
    notes = tuple(_strings(_field(plan, "notes", default=())))
    if _field(plan, "already_applied", default=False) is True:
        notes += ("already applied: nothing to change",)
    title = str(_field(plan, "title", "summary", "description", default=recipe_id) or recipe_id)
    return PlanView(str(_field(plan, "recipe", "recipe_id", "id", default=recipe_id)), title,
                    tuple(diffs), commands, manual, tuple(dict.fromkeys(risks)), notes, plan,
                    ctx)


def build(fix: Any, check_id: str, host: Any, write_root: str, overlay: bool, options: Any,
          lang: str = "en") -> PlanView:
    """The plan for a finding's fix (``fix`` is its FixRef), reading through ``host``."""
    api = _module()
    if api.kind == "kbfix":
        FixContext = api.context_mod.FixContext
        ctx = (FixContext.for_overlay(host, write_root, options) if overlay
               else FixContext.for_root(write_root, options))
        plan = api.mod.plan_for(ctx, fix, None, check_id)
        return view(plan, fix.id, lang, ctx)
    return view(api.mod.build_plan(fix.id, host, dict(fix.params)), fix.id, lang)


def apply(plan: PlanView, host: Any, write_root: str, host_factory: Callable[[], Any],
          journal_dir: str | None = None, run_commands: bool = True) -> Applied:
    """Apply a confirmed plan; files land under ``write_root`` (an overlay for a bundle)."""
    api = _module()
    if api.kind == "kbfix":
        res = api.apply_mod.apply_plan(plan.raw, plan.ctx, host_factory)
        status = str(_field(res, "status", default="applied"))
        written = _strings(_field(res, "written", default=()))
        msg = ("wrote " + ", ".join(written)) if status == "applied" and written else status
        jid = _field(res, "journal", "journal_id", default=None)
        return Applied(str(jid) if jid else None, msg, res)
    kw = _kwargs(api.mod.apply, {"host": host, "root": write_root, "journal_dir": journal_dir,
                                 "yes": True, "run_commands": run_commands})
    out = api.mod.apply(plan.raw, **kw)
    jid = _field(out, "journal_id", "journal", "id", default=None)
    if jid is None and isinstance(out, str):
        jid = out
    msg = str(_field(out, "message", "summary", "status", default="") or "applied")
    return Applied(str(jid) if jid is not None else None, msg, out)


def undo(journal_id: str, write_root: str, journal_dir: str | None = None) -> str:
    api = _module()
    if api.kind == "kbfix":
        out = api.apply_mod.undo(journal_id)
    else:
        out = api.mod.undo(journal_id, **_kwargs(api.mod.undo, {"root": write_root,
                                                                "journal_dir": journal_dir}))
    restored = _strings(_field(out, "restored", default=()))
    removed = _strings(_field(out, "removed", default=()))
    if restored or removed:
        return "; ".join(([f"restored {', '.join(restored)}"] if restored else [])
                         + ([f"removed {', '.join(removed)} (created by the fix)"]
                            if removed else []))
    return str(_field(out, "message", "summary", default="") or f"restored {journal_id}")
