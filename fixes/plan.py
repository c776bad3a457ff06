"""What a recipe proposes: file edits (shown as unified diffs), commands as argv, manual
steps, and the risks (root, service restarts). Plain data: printed, journalled, applied."""

from __future__ import annotations

import difflib
import hashlib
from typing import Any

from ascend_doctor.i18n import T, tr, tt
from dataclasses import dataclass, field


def _words(value: Any) -> str:
    """A parameter as a user reads (and types) it, never a Python repr: flags as
    ``--flag value``, lists comma-separated, an absent value as "(none)"."""
    import shlex
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return " ".join(shlex.join([str(k)] + ([] if v is None else [str(v)]))
                        for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if all(isinstance(x, (list, tuple)) for x in value):
            return " ".join(shlex.join([str(y) for y in x]) for x in value)
        return ", ".join(_words(x) for x in value)
    return str(value)


@dataclass(frozen=True)
class FileEdit:
    """Make ``path`` (a host path) hold ``after`` with permission bits ``mode``."""

    path: str
    before: bytes | None  # None: the file does not exist yet
    after: bytes
    before_mode: int | None
    mode: int = 0o644
    why: str = ""
    # host paths the new content names (directories in ld.so.conf, set_env.sh's dirs): a fix
    # never writes configuration that names a path that does not exist (plan_for checks)
    names: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.before != self.after or self.before_mode != self.mode

    @property
    def mode_only(self) -> bool:
        return self.before == self.after and self.before_mode != self.mode

    def diff(self) -> str:
        """A unified diff (``--- a/path``/``+++ b/path``), with a mode line when it changes."""
        head = []
        if self.before_mode != self.mode:
            old = "new file" if self.before_mode is None else f"mode {self.before_mode:04o}"
            head.append(f"# {self.path}: {old} -> mode {self.mode:04o}\n")
        if self.before == self.after:
            return "".join(head)
        a = (self.before or b"").decode("utf-8", "replace").splitlines(keepends=True)
        b = self.after.decode("utf-8", "replace").splitlines(keepends=True)
        lines = difflib.unified_diff(a, b, "/dev/null" if self.before is None else
                                     f"a{self.path}", f"b{self.path}")
        return "".join(head) + "".join(x if x.endswith("\n") else x + "\n\\ No newline at end "
                                       "of file\n" for x in lines)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "exists": self.before is not None,
                "before_mode": None if self.before_mode is None else f"{self.before_mode:04o}",
                "mode": f"{self.mode:04o}", "changed": self.changed, "why": self.why,
                "after_sha256": hashlib.sha256(self.after).hexdigest(), "diff": self.diff()}


@dataclass(frozen=True)
class Command:
    """A command run after the edits; in a sysroot ``sysroot_argv`` (``{root}`` filled) runs
    instead, or it is skipped with ``sysroot_skip`` as the reason."""

    argv: tuple[str, ...]
    why: str = ""
    sysroot_argv: tuple[str, ...] | None = None
    sysroot_skip: str | None = None
    # checks (ids or prefixes) whose answer depends on this command having run (ldconfig:
    # the cache): where it is not run (an overlay), they are "not verifiable here"
    models: tuple[str, ...] = ()

    def for_root(self, root: str) -> tuple[str, ...] | None:
        if root == "/":
            return self.argv
        if self.sysroot_argv is None:
            return None
        return tuple(a.replace("{root}", root) for a in self.sysroot_argv)

    def to_dict(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "why": self.why,
                "sysroot_argv": list(self.sysroot_argv) if self.sysroot_argv else None,
                "sysroot_skip": self.sysroot_skip}


@dataclass(frozen=True)
class Manual:
    """A step the doctor will not do itself (package installs, reboots, kernel cmdline)."""

    en: str
    zh: str
    cmd: str | None = None

    def text(self, lang: str = "en") -> str:
        t = self.zh if lang == "zh" else self.en
        return f"{t} `{self.cmd}`" if self.cmd else t


@dataclass
class Plan:
    recipe: str
    title: str
    params: dict[str, Any] = field(default_factory=dict)
    edits: list[FileEdit] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    manual: list[Manual] = field(default_factory=list)
    needs_root: list[str] = field(default_factory=list)  # what needs it, in words
    restarts: list[str] = field(default_factory=list)  # services restarted by the commands
    verify: str | None = None  # check id re-run after applying
    affects: list[str] = field(default_factory=list)  # checks also re-run (see RecipeSpec)
    notes: list[str] = field(default_factory=list)
    title_zh: str = ""
    # why nothing can be planned on this target (e.g. the paths it would name do not exist):
    # a blocked plan is shown, never applied
    blocked: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)  # files the commands rewrite (backed up)

    @property
    def changes(self) -> list[FileEdit]:
        return [e for e in self.edits if e.changed]

    @property
    def already_applied(self) -> bool:
        """Nothing left to change on disk (commands run only with changes)."""
        return not self.blocked and bool(self.edits) and not self.changes

    @property
    def manual_only(self) -> bool:
        return not self.blocked and not self.edits and not self.commands

    def diff(self) -> str:
        return "".join(e.diff() for e in self.changes)

    def to_dict(self, lang: str = "en") -> dict[str, Any]:
        return {"recipe": self.recipe, "title": (self.title_zh or self.title) if lang == "zh"
                else self.title, "params": self.params,
                "edits": [e.to_dict() for e in self.edits],
                "commands": [c.to_dict() for c in self.commands],
                "manual": [{"text": m.text(lang), "cmd": m.cmd} for m in self.manual],
                "needs_root": self.needs_root, "restarts": self.restarts,
                "verify": self.verify, "affects": self.affects, "notes": self.notes,
                "already_applied": self.already_applied, "manual_only": self.manual_only,
                "blocked": self.blocked}

    def render(self, lang: str = "en", root: str | None = None, overlay: bool = False) -> str:
        """The plan as text; commands are shell-quoted (paste-safe) and, for a sysroot
        ``root``, shown as they will run there (``ldconfig -r /the/root``)."""
        import shlex
        zh = lang == "zh"
        sysroot = bool(root) and root != "/"
        out = [tt(lang, "plan {recipe}: {title}", recipe=self.recipe,
                  title=(self.title_zh or self.title) if zh else self.title)]
        if self.params:
            out.append("  " + tt(lang, "params: {params}", params=", ".join(
                f"{k}={_words(v)}" for k, v in self.params.items())))
        if self.already_applied:
            out.append("  " + tt(lang, "already applied: nothing to change"))
        for why in self.blocked:
            out.append("  " + tt(lang, "nothing to plan here: {why}", why=tr(why, lang)))
        for e in ([] if self.blocked else self.changes):
            what = (tt(lang, "mode change") if e.mode_only else tt(lang, "edit")
                    if e.before is not None else tt(lang, "new file"))
            out.append(f"\n  [{what}] {e.path}" + (f" — {tr(e.why, lang)}" if e.why else ""))
            out.extend("    " + ln for ln in e.diff().rstrip("\n").splitlines())
        if self.commands and not self.already_applied and not self.blocked:
            out.append("\n  " + tt(lang, "then run:"))
            for c in self.commands:
                if overlay:  # a bundle's overlay is files only: nothing runs there
                    out.append("    " + tt(lang, "(not run on a bundle's overlay: {cmd} — {why})",
                                           cmd=shlex.join(c.argv), why=tr(c.why, lang)))
                    continue
                argv = c.for_root(root) if sysroot and root else c.argv
                if argv is None:
                    out.append("    " + tt(lang, "(skipped in a sysroot: {cmd} — {reason})",
                                           cmd=shlex.join(c.argv),
                                           reason=tr(c.sysroot_skip, lang) if c.sysroot_skip
                                           else tt(lang, "not run in a sysroot")))
                    continue
                out.append("    $ " + shlex.join(argv)
                           + (f"   # {tr(c.why, lang)}" if c.why else ""))
        if self.manual:
            out.append("\n  " + tt(lang, "manual steps:"))
            out.extend(f"    {i}. {m.text(lang)}" for i, m in enumerate(self.manual, 1))
        sep = "、" if zh else ", "
        risks = ([tt(lang, "needs root: {what}", what=sep.join(tr(x, lang) for x in self.needs_root))]
                 if self.needs_root else [])
        risks += ([tt(lang, "restarts: {what}", what=sep.join(tr(x, lang) for x in self.restarts))]
                  if self.restarts else [])
        if risks:
            out.append("\n  " + tt(lang, "risk: {risks}", risks=("；" if zh else "; ").join(risks)))
        out.extend("  " + tt(lang, "note: {note}", note=tr(n, lang)) for n in self.notes)
        if self.verify:
            out.append("  " + tt(lang, "verified by check: {check}", check=self.verify))
        return "\n".join(out) + "\n"
