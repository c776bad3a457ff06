"""The TUI's door to the fix engine (``fixes/``), which it never reimplements.

Expected API of ``fixes`` (the adapter tolerates a few spellings, see ``_field``):

* ``fixes.build_plan(recipe_id: str, host: Host, params: Mapping[str, Any]) -> Plan``
  where Plan has ``recipe_id``, ``title``/``summary``, file edits (``edits``/``diffs``:
  items with ``path`` and ``diff`` unified-diff text, or a ``diff`` str), ``commands``
  (argv lists), ``manual`` (manual steps as text), and risk flags (``needs_root``,
  ``restarts_service``, or a ``risks`` list of strings).
* ``fixes.apply(plan, *, root: str, ...) -> Applied`` with ``journal_id`` (keyword
  arguments are passed only when the function accepts them: ``host``, ``root``,
  ``journal_dir``, ``yes``, ``run_commands``).
* ``fixes.undo(journal_id: str, *, root=..., journal_dir=...) -> Any``.

When any of these is missing the TUI says "fixes are not installed" and shows the KB steps.
Verification is the TUI re-running the originating check through the engine.
No textual here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Mapping

REQUIRED = ("build_plan", "apply", "undo")


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
    raw: Any = field(default=None, compare=False)

    @property
    def automatic(self) -> bool:
        return bool(self.diffs or self.commands)


@dataclass(frozen=True)
class Applied:
    journal_id: str | None
    message: str
    raw: Any = field(default=None, compare=False)


def _module():
    try:
        import fixes
    except ImportError as exc:
        raise FixesUnavailable(f"the fixes package cannot be imported ({exc})") from None
    missing = [n for n in REQUIRED if not callable(getattr(fixes, n, None))]
    if missing:
        raise FixesUnavailable("fixes are not installed in this build (fixes."
                               + ", fixes.".join(missing) + " missing)")
    return fixes


def availability() -> tuple[bool, str]:
    """(True, "") when the fix API is there, else (False, the reason shown to the user)."""
    try:
        _module()
    except FixesUnavailable as exc:
        return False, str(exc)
    return True, ""


def _field(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, Mapping) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _kwargs(func: Any, offered: Mapping[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(offered)
    return {k: v for k, v in offered.items() if k in params}


def view(plan: Any, recipe_id: str) -> PlanView:
    """Normalise whatever the recipe returned into what the plan modal draws."""
    diffs: list[FileDiff] = []
    for e in _field(plan, "edits", "diffs", "files", default=()) or ():
        if isinstance(e, str):
            diffs.append(FileDiff("", e))
        else:
            text = _field(e, "diff", "unified_diff", "patch", default="")
            if callable(text):
                text = text()
            diffs.append(FileDiff(str(_field(e, "path", "file", default="")), str(text or "")))
    single = _field(plan, "diff", default=None)
    if isinstance(single, str) and single and not diffs:
        diffs.append(FileDiff("", single))
    commands = tuple(tuple(str(a) for a in (_field(c, "argv", default=c) or ()))
                     for c in (_field(plan, "commands", default=()) or ()))
    manual = tuple(str(_field(m, "text", "en", default=m)) for m in
                   (_field(plan, "manual", "manual_steps", default=()) or ()))
    raw_risks = _field(plan, "risks", "risk", default=()) or ()
    risks = [raw_risks] if isinstance(raw_risks, str) else [str(r) for r in raw_risks]
    if _field(plan, "needs_root", "requires_root", default=False):
        risks.append("needs root")
    if _field(plan, "restarts_service", "restart", default=False):
        risks.append("restarts the service")
    title = str(_field(plan, "title", "summary", "description", default=recipe_id) or recipe_id)
    return PlanView(str(_field(plan, "recipe_id", "recipe", "id", default=recipe_id)), title,
                    tuple(diffs), commands, manual, tuple(dict.fromkeys(risks)), plan)


def build(recipe_id: str, host: Any, params: Mapping[str, Any]) -> PlanView:
    fixes = _module()
    return view(fixes.build_plan(recipe_id, host, dict(params)), recipe_id)


def apply(plan: PlanView, host: Any, root: str, journal_dir: str | None = None,
          run_commands: bool = True) -> Applied:
    """Apply a confirmed plan. ``root`` is where files are written (an overlay for a demo)."""
    fixes = _module()
    kw = _kwargs(fixes.apply, {"host": host, "root": root, "journal_dir": journal_dir,
                               "yes": True, "run_commands": run_commands})
    out = fixes.apply(plan.raw, **kw)
    jid = _field(out, "journal_id", "id", default=None)
    if jid is None and isinstance(out, str):
        jid = out
    msg = str(_field(out, "message", "summary", default="") or "applied")
    return Applied(str(jid) if jid is not None else None, msg, out)


def undo(journal_id: str, root: str, journal_dir: str | None = None) -> str:
    fixes = _module()
    kw = _kwargs(fixes.undo, {"root": root, "journal_dir": journal_dir})
    out = fixes.undo(journal_id, **kw)
    return str(_field(out, "message", "summary", default="") or f"restored {journal_id}")
