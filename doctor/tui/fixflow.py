"""The TUI's door to the fix engine (``fixes/``), which it never reimplements.

It calls the one fixes API the CLI's `fix` calls: ``fixes.plan_for(ctx, fix, params,
check) -> Plan`` with a ``fixes.context.FixContext`` (``for_root`` on this machine or a
sysroot, ``for_overlay`` over a bundle or the demo), ``fixes.apply.apply_plan(plan, ctx,
host_factory) -> ApplyResult`` and ``fixes.apply.undo(journal_id, root=...)``.

Plans are turned into ``PlanView`` (diffs, argv commands, manual steps, risks) for the plan
modal. When fixes/ cannot be imported the TUI says so and shows the KB steps. No textual.
"""

from __future__ import annotations

import importlib
import shlex
from typing import Any, Callable

from dataclasses import dataclass, field


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
    raw: Any = field(default=None, compare=False)  # the fixes.plan.Plan
    ctx: Any = field(default=None, compare=False)  # its FixContext, reused by apply

    @property
    def automatic(self) -> bool:
        return bool(self.diffs or self.commands)


@dataclass(frozen=True)
class Applied:
    journal_id: str | None
    message: str
    raw: Any = field(default=None, compare=False)  # the fixes.apply.ApplyResult


@dataclass(frozen=True)
class _Api:
    fixes: Any
    apply: Any
    context: Any


def _module() -> _Api:
    """fixes, fixes.apply and fixes.context, or FixesUnavailable saying what is missing."""
    try:
        mods = [importlib.import_module(m) for m in
                ("ascend_doctor.fixes", "ascend_doctor.fixes.apply", "ascend_doctor.fixes.context")]
    except ImportError as exc:
        raise FixesUnavailable("fixes are not installed in this build (cannot import "
                               f"{getattr(exc, 'name', None) or exc})") from None
    return _Api(*mods)


def availability() -> tuple[bool, str]:
    """(True, "") when fixes/ is there, else (False, the reason shown to the user)."""
    try:
        _module()
    except FixesUnavailable as exc:
        return False, str(exc)
    return True, ""


def view(plan: Any, lang: str = "en", ctx: Any = None) -> PlanView:
    """What the plan modal draws from a ``fixes.plan.Plan``."""
    diffs = tuple(FileDiff(e.path, e.diff()) for e in plan.changes if e.diff().strip()
                  and not getattr(plan, "blocked", None))
    sysroot = ctx is not None and getattr(ctx, "kind", "live") == "sysroot"
    commands = []
    if not plan.already_applied and not getattr(plan, "blocked", None):
        for c in plan.commands:
            argv = c.for_root(ctx.write_root) if sysroot else c.argv
            if argv is not None:
                commands.append(tuple(argv))
    risks = []
    if plan.needs_root:
        risks.append("needs root: " + "; ".join(plan.needs_root))
    if plan.restarts:
        risks.append("restarts " + ", ".join(plan.restarts))
    # a plan that cannot be made here (it would name missing paths) says why, first
    notes = [f"nothing to plan here: {b}" for b in getattr(plan, "blocked", ())] + list(plan.notes)
    if ctx is not None and getattr(ctx, "kind", "") == "overlay" and commands:
        notes.append("a bundle is not a machine: the commands are shown, not run")
    if plan.already_applied:
        notes.append("already applied: nothing to change")
    title = (plan.title_zh or plan.title) if lang == "zh" else plan.title
    return PlanView(plan.recipe, title, diffs, tuple(commands),
                    tuple(m.text(lang) for m in plan.manual), tuple(risks), tuple(notes),
                    plan, ctx)


def build(fix: Any, check_id: str, host: Any, write_root: str, overlay: bool, options: Any,
          lang: str = "en") -> PlanView:
    """The plan for a finding's fix (``fix`` is its FixRef), reading through ``host``."""
    api = _module()
    FixContext = api.context.FixContext
    ctx = (FixContext.for_overlay(host, write_root, options) if overlay
           else FixContext.for_root(write_root, options))
    return view(api.fixes.plan_for(ctx, fix, None, check_id), lang, ctx)


def apply(plan: PlanView, host_factory: Callable[[], Any]) -> Applied:
    """Apply a confirmed plan; files land under its context's root (an overlay for a
    bundle); ``host_factory`` gives the fresh hosts the fix is verified on."""
    res = _module().apply.apply_plan(plan.raw, plan.ctx, host_factory)
    if res.status == "applied":
        msg = "wrote " + ", ".join(res.written) if res.written else "applied"
        failed = [c for c in res.commands if c.get("error") or c.get("rc") not in (0, None)]
        msg += "".join(f"; {shlex.join(c['argv'])} failed: "
                       f"{c.get('error') or 'exit ' + str(c.get('rc'))}" for c in failed)
    else:
        msg = res.status
    return Applied(res.journal, msg, res)


def undo(journal_id: str, write_root: str) -> str:
    """Restore what the fix ``journal_id`` wrote under ``write_root``; says what it did,
    and where: in an overlay (the demo's, a bundle's) the paths are the overlay's copies,
    and this machine was never touched."""
    out = _module().apply.undo(journal_id, root=write_root)
    restored, removed = out.get("restored") or [], out.get("removed") or []
    overlay = out.get("kind") == "overlay"
    where = (f" in the overlay {out.get('write_root') or write_root} (this machine's files "
             "were never touched)" if overlay else "")
    if restored or removed:
        return "; ".join(([f"restored {', '.join(restored)}"] if restored else [])
                         + ([f"removed {', '.join(removed)} (" + (
                             "the overlay's copies: the scenario's own files show again"
                             if overlay else "created by the fix") + ")"]
                            if removed else [])) + where
    return f"undid {journal_id}: nothing to restore{where}"
