"""Apply a Plan: preflight, journal + backups, atomic writes, commands, verify; and undo.

Order matters for safety: every target is checked writable before anything changes; the
journal and every backup are on disk (fsync'd) before the first rename; so a crash at any
point leaves either the old files or a journal that restores them byte for byte.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

from doctor.atomic import atomic_write
from doctor.errors import DoctorError

from .context import FixContext
from .journal import Journal
from .plan import Plan

EXIT_REFUSED = 3  # no confirmation (no terminal and no --yes)
EXIT_NEEDS_ROOT = 4


class FixRefused(DoctorError):
    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code


class FixFailed(DoctorError):
    """Preflight or apply failed; ``changed`` says whether anything on disk was touched."""

    def __init__(self, message: str, changed: bool = False, journal: str | None = None) -> None:
        super().__init__(message)
        self.changed = changed
        self.journal = journal


def _fault(point: str) -> None:
    """Crash injection for tests: ASCEND_DOCTOR_INJECT_CRASH=<point> kills the process."""
    if os.environ.get("ASCEND_DOCTOR_INJECT_CRASH") == point:
        os._exit(70)


@dataclass
class Verification:
    check: str | None
    before: str | None = None
    after: str | None = None
    messages: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def ok(self) -> bool | None:
        if self.after is None:
            return None
        return self.after in ("pass", "info")

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "before": self.before, "after": self.after,
                "ok": self.ok, "messages": self.messages, "note": self.note}


@dataclass
class ApplyResult:
    status: str  # applied | already-applied | manual | failed
    journal: str | None = None
    written: list[str] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    verification: Verification | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "journal": self.journal, "written": self.written,
                "commands": self.commands,
                "verification": self.verification.to_dict() if self.verification else None}


def run_check_status(host_factory: Callable[[], Any] | None, options: Any, check_id: str | None
                     ) -> tuple[str | None, list[str], str]:
    """(worst status, messages, note) of one check on a fresh host; None when not possible."""
    if not check_id:
        return None, [], "no check verifies this recipe"
    if host_factory is None:
        return None, [], "no host to verify on"
    from doctor.engine import RunConfig, run
    from doctor.registry import Registry
    reg = Registry.discover(plugins=False)
    if check_id not in reg.checks:
        return None, [], f"cannot verify: check {check_id} is not installed"
    report = run(host_factory(), options, reg, RunConfig(only=(check_id,)))
    (res,) = report.results
    return res.status.value, [f"{f.status.value}: {f.message}" for f in res.findings], ""


def preflight(plan: Plan, ctx: FixContext) -> None:
    """Refuse before any change: root where root is needed, and every target writable."""
    if ctx.write_root == "/" and plan.needs_root and os.geteuid() != 0:
        raise FixRefused("this fix needs root for: " + "; ".join(plan.needs_root)
                         + " (run it with sudo, or use --root on a copy)", EXIT_NEEDS_ROOT)
    for e in plan.changes:
        real = ctx.real_path(e.path)
        if os.path.isdir(real):
            raise FixFailed(f"cannot write {e.path}: it is a directory")
        probe_dir = os.path.dirname(real)
        while not os.path.exists(probe_dir):
            probe_dir = os.path.dirname(probe_dir)
        if not os.path.isdir(probe_dir):
            raise FixFailed(f"cannot write {e.path}: {probe_dir} is not a directory")
        try:
            fd, tmp = tempfile.mkstemp(prefix=".ascend-doctor-probe.", dir=probe_dir)
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise FixFailed(f"cannot write {e.path} ({probe_dir}): "
                            f"{exc.strerror or exc}; nothing was changed") from None


def apply_plan(plan: Plan, ctx: FixContext, host_factory: Callable[[], Any] | None = None
               ) -> ApplyResult:
    """Apply ``plan`` inside ``ctx.write_root``; idempotent (no changes -> no-op)."""
    before, _, note = run_check_status(host_factory, ctx.options, plan.verify)
    if plan.manual_only:
        return ApplyResult("manual", verification=Verification(plan.verify, before, before,
                                                               note=note or "manual steps only"))
    if plan.already_applied:
        return ApplyResult("already-applied", verification=Verification(
            plan.verify, before, before, note=note))
    preflight(plan, ctx)
    journal = Journal.create(plan.recipe, {"recipe": plan.recipe, "params": plan.params,
                                           "write_root": ctx.write_root, "kind": ctx.kind,
                                           "plan": plan.to_dict()})
    written: list[str] = []
    try:
        for e in plan.changes:
            real = ctx.real_path(e.path)
            created = _missing_dirs(os.path.dirname(real))
            journal.backup(e.path, real, created)
        journal.set_state("backed-up")
        _fault("after-backup")
        for i, e in enumerate(plan.changes):
            real = ctx.real_path(e.path)
            os.makedirs(os.path.dirname(real), exist_ok=True)
            atomic_write(real, e.after, mode=e.mode)
            os.chmod(real, e.mode)  # atomic_write honours the umask-free mode; be explicit
            written.append(e.path)
            if i == 0:
                _fault("after-first-rename")
    except OSError as exc:
        journal.set_state("failed", error=str(exc))
        raise FixFailed(f"writing failed: {exc.strerror or exc}; undo with "
                        f"`ascend-doctor fix --undo {journal.id}`", bool(written),
                        journal.id) from None
    journal.set_state("written", written=written)
    ran = [_run(c, ctx) for c in plan.commands]
    after, msgs, note = run_check_status(host_factory, ctx.options, plan.verify)
    v = Verification(plan.verify, before, after, msgs, note)
    journal.set_state("applied", commands=ran, verification=v.to_dict())
    return ApplyResult("applied", journal.id, written, ran, v)


def _missing_dirs(d: str) -> list[str]:
    out = []
    while not os.path.exists(d):
        out.append(d)
        d = os.path.dirname(d)
    return out


def _run(c, ctx: FixContext) -> dict[str, Any]:
    if ctx.kind == "overlay":
        return {"argv": list(c.argv), "skipped": "a bundle is not a machine: not run"}
    argv = c.for_root(ctx.write_root)
    if argv is None:
        return {"argv": list(c.argv), "skipped": c.sysroot_skip or "not run in a sysroot"}
    try:
        r = subprocess.run(list(argv), capture_output=True, timeout=120)
    except FileNotFoundError:
        return {"argv": list(argv), "rc": None, "error": f"{argv[0]}: command not found"}
    except subprocess.TimeoutExpired:
        return {"argv": list(argv), "rc": None, "error": "timed out after 120 s"}
    return {"argv": list(argv), "rc": r.returncode,
            "stderr": r.stderr.decode("utf-8", "replace")[-2000:]}


def drift(j: Journal) -> list[str]:
    """Targets changed since the fix wrote them (neither the backup nor the fix's bytes)."""
    import hashlib
    after = {e["path"]: e.get("after_sha256") for e in j.data.get("plan", {}).get("edits", [])}
    out = []
    for t in j.data.get("targets", []):
        try:
            with open(t["real"], "rb") as fh:
                cur = hashlib.sha256(fh.read()).hexdigest()
        except FileNotFoundError:
            cur = None
        old = (hashlib.sha256(j.backup_bytes(t["backup"])).hexdigest()
               if t.get("existed") else None)
        if cur not in (old, after.get(t["path"])):
            out.append(t["path"])
    return out


def undo(jid: str | None = None, force: bool = False) -> dict[str, Any]:
    """Restore every target of a journal (content, mode, owner); remove created files.

    Refuses (unless ``force``) when a target was edited since: undo would destroy that edit.
    """
    j = Journal.load(jid)
    if j.data.get("state") == "undone":
        raise DoctorError(f"fix {j.id} was already undone")
    changed = drift(j)
    if changed and not force:
        raise DoctorError(f"{', '.join(changed)} changed after fix {j.id} wrote it; undo "
                          "would discard that change (pass --force to restore anyway)")
    restored, removed = [], []
    for t in reversed(j.data.get("targets", [])):
        real = t["real"]
        if t.get("existed"):
            data = j.backup_bytes(t["backup"])
            cur = None
            try:
                with open(real, "rb") as fh:
                    cur = fh.read()
            except OSError:
                pass
            if cur != data or (os.path.exists(real) and
                               (os.lstat(real).st_mode & 0o7777) != t["mode"]):
                os.makedirs(os.path.dirname(real), exist_ok=True)
                atomic_write(real, data, mode=t["mode"])
            os.chmod(real, t["mode"])
            if os.geteuid() == 0:
                os.chown(real, t.get("uid", 0), t.get("gid", 0))
            restored.append(t["path"])
        else:
            if os.path.lexists(real):
                os.unlink(real)
                removed.append(t["path"])
            for d in t.get("created_dirs", []):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
    # the plan's commands reload what the files say (ldconfig, sysctl --system, systemctl)
    from .plan import Command
    rerun_ctx = FixContext(host=None, write_root=j.data.get("write_root", "/"),  # type: ignore
                           kind=j.data.get("kind", "live"))
    ran = [_run(Command(tuple(c["argv"]), c.get("why", ""),
                        tuple(c["sysroot_argv"]) if c.get("sysroot_argv") else None,
                        c.get("sysroot_skip")), rerun_ctx)
           for c in j.data.get("plan", {}).get("commands", [])
           if j.data.get("state") in ("written", "applied")]
    j.set_state("undone", restored=restored, removed=removed, undo_commands=ran)
    return {"journal": j.id, "recipe": j.data.get("recipe"), "restored": restored,
            "removed": removed, "write_root": j.data.get("write_root"), "commands": ran}
