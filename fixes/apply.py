"""Apply a Plan: preflight, journal + backups, atomic writes, commands, verify; and undo.

Order matters for safety: every target is checked writable before anything changes; the
journal and every backup are on disk (fsync'd) before the first rename; so a crash at any
point leaves either the old files or a journal that restores them byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import subprocess
from typing import Any, Callable

from ascend_doctor import confine
from ascend_doctor.errors import DoctorError, describe
from ascend_doctor.host import norm
from ascend_doctor.i18n import T, join

from dataclasses import dataclass, field
from .context import FixContext
from .journal import Journal, JournalError, base_for, overlay_dir
from .plan import Plan

EXIT_REFUSED = 3  # no confirmation (no terminal and no --yes)
EXIT_NEEDS_ROOT = 4
EXIT_BLOCKED = 2  # the plan cannot be made on this target (it would name missing paths)


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
    # the other checks the recipe affects: {check, before, after}, and those the change made
    # worse (a higher status, or fail/error findings that were not there): + messages
    affected: list[dict[str, Any]] = field(default_factory=list)
    regressions: list[dict[str, Any]] = field(default_factory=list)
    # checks whose answer depends on a command not run on this target (ldconfig in an
    # overlay): reported as "not verifiable here", never as new fails
    unverifiable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool | None:
        if self.after is None:
            return None
        return self.after in ("pass", "info")

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "before": self.before, "after": self.after,
                "ok": self.ok, "messages": self.messages, "note": self.note,
                "affected": self.affected, "regressions": self.regressions,
                "unverifiable": self.unverifiable}


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


# checks that judge logs: a line written before the fix keeps matching forever, so when one
# verifies a fix only the lines that were not there before the fix count
LOG_CHECKS = ("logs.signatures",)


def _log_lines(f: Any) -> set[tuple[str, str, str]]:
    """(path, entry, line text) of a log-signature finding's matched lines."""
    ev = f.evidence if isinstance(getattr(f, "evidence", None), dict) else {}
    lines = ev.get("lines")
    if not isinstance(lines, list):
        return set()
    return {(str(ev.get("path")), str(ev.get("entry")), str(x.get("text")))
            for x in lines if isinstance(x, dict)}


def run_check_findings(host_factory: Callable[[], Any] | None, options: Any,
                       check_id: str | None) -> tuple[Any, str]:
    """(the check's result, note) on a fresh host; (None, why) when not possible."""
    if not check_id:
        return None, T("no check verifies this recipe")
    if host_factory is None:
        return None, T("no host to verify on")
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.registry import Registry
    reg = Registry.discover(plugins=False)
    if check_id not in reg.checks:
        return None, T("cannot verify: check {check} is not installed", check=check_id)
    report = run(host_factory(), options, reg, RunConfig(only=(check_id,)))
    (res,) = report.results
    return res, ""


def _state(res: Any, old: Any = None) -> tuple[str | None, list[str], str]:
    """(worst status, "status: message" lines, note) of a result. For a log check with the
    result from before the fix (``old``), findings made only of lines that were already
    there do not count: only lines written since the fix can say it did not work."""
    from ascend_doctor.model import Status
    if res is None:
        return None, [], ""
    findings, note = list(res.findings), ""
    if old is not None and res.check_id in LOG_CHECKS:
        seen = set().union(*(_log_lines(f) for f in old.findings)) if old.findings else set()
        # the same lines, or the very same finding (the last stats line, unchanged)
        same = {(f.status.value, str(f.message)) for f in old.findings}
        kept = [f for f in findings if not (_log_lines(f) and _log_lines(f) <= seen)
                and (f.status.value, str(f.message)) not in same]
        past = len(findings) - len(kept)
        if past:
            note = T("{n} log finding(s) match only lines written before the fix: not counted "
                     "(only new lines can show the fix did not work)", n=past)
        findings = kept
        worst = max((f.status for f in findings), key=lambda s: s.rank, default=Status.PASS)
        status = worst.value
    else:
        status = res.status.value
    return status, [T("{status}: {message}", status=f.status.value, message=f.message)
                    for f in findings], note


def run_check_status(host_factory: Callable[[], Any] | None, options: Any, check_id: str | None
                     ) -> tuple[str | None, list[str], str]:
    """(worst status, messages, note) of one check on a fresh host; None when not possible."""
    res, note = run_check_findings(host_factory, options, check_id)
    st, msgs, _ = _state(res)
    return st, msgs, note


CheckState = tuple[str, list[str]]  # (worst status, "status: message" of fail/error findings)


def affected_states(host_factory: Callable[[], Any] | None, options: Any,
                    words: list[str]) -> dict[str, CheckState]:
    """The checks ``words`` select (ids, prefixes, tags), run once on a fresh host."""
    if host_factory is None or not words:
        return {}
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.registry import Registry
    reg = Registry.discover(plugins=False)
    known = [w for w in words if reg._matches_any(w)]
    if not known:
        return {}
    report = run(host_factory(), options, reg, RunConfig(only=tuple(known)))
    return {r.check_id: (r.status.value, [T("{status}: {message}", status=f.status.value, message=f.message)
                                            for f in r.findings
                                          if f.status.value in ("fail", "error")])
            for r in report.results}


# a check "passed" before the fix when it had no problem to show: pass, info, or a skip
_WAS_FINE = ("pass", "info", "skip")
_FAILS = ("fail", "error")


def regressions(before: dict[str, CheckState], after: dict[str, CheckState],
                skip: str | None = None, unverifiable: tuple[str, ...] = ()
                ) -> list[dict[str, Any]]:
    """New fails caused by the change: checks that passed (or were skipped) before and fail
    now. A check that was already failing is not a new fail, whatever its messages; a check
    the target cannot model (``unverifiable``: its answer depends on a command that was not
    run here) is never counted."""
    out = []
    for cid, (st, bad) in sorted(after.items()):
        if cid == skip or cid in unverifiable:
            continue
        old_st = before.get(cid, (None, []))[0]
        if old_st in _WAS_FINE and st in _FAILS:
            out.append({"check": cid, "before": old_st, "after": st, "messages": bad})
    return out


def unmodelled(plan: Plan, ran: list[dict[str, Any]], checks: list[str]) -> tuple[str, ...]:
    """The checks among ``checks`` whose answer depends on a command of the plan that was
    not run on this target (ldconfig in a bundle's overlay): not verifiable here."""
    words = [w for c, r in zip(plan.commands, ran) if r.get("skipped") or r.get("rc") is None
             for w in getattr(c, "models", ())]
    return tuple(c for c in checks if any(c == w or c.startswith(w + ".") for w in words))


def preflight(plan: Plan, ctx: FixContext) -> None:
    """Refuse before any change: root where root is needed, and every target writable."""
    if ctx.write_root == "/" and plan.needs_root and os.geteuid() != 0:
        raise FixRefused(T("this fix needs root for: {what} (run it with sudo, or use --root on "
                           "a copy)", what=join("; ", plan.needs_root)), EXIT_NEEDS_ROOT)
    root = ctx.write_root
    for e in plan.changes:
        res = ctx.resolved(e.path)
        try:
            st = confine.lstat(root, res)
            missing = confine.missing_dirs(root, res)
        except DoctorError as exc:
            raise FixFailed(T("cannot write {path}: {reason}; nothing was changed", path=e.path,
                              reason=exc)) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise FixFailed(T("cannot write {path}: it is a directory", path=e.path))
        probe = posixpath.dirname(missing[-1] if missing else res)
        pst = confine.lstat(root, probe)
        if pst is None or not stat.S_ISDIR(pst.st_mode):
            raise FixFailed(T("cannot write {path}: {dir} is not a directory", path=e.path,
                              dir=probe))
        try:  # a temp file in the deepest existing directory, through the same walk
            with confine.parent(root, posixpath.join(probe, "x")) as (fd, _):
                tmp = f".ascend-doctor-probe.{os.getpid()}"
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 0o600, dir_fd=fd))
                os.unlink(tmp, dir_fd=fd)
        except OSError as exc:
            raise FixFailed(T("cannot write {path} ({dir}): {reason}; nothing was changed",
                              path=e.path, dir=probe, reason=exc.strerror or exc)) from None


def apply_plan(plan: Plan, ctx: FixContext, host_factory: Callable[[], Any] | None = None
               ) -> ApplyResult:
    """Apply ``plan`` inside ``ctx.write_root``; idempotent (no changes -> no-op)."""
    before_res, note = run_check_findings(host_factory, ctx.options, plan.verify)
    before = _state(before_res)[0]
    if plan.blocked:
        raise FixRefused(T("nothing to apply: {why}", why=join("; ", plan.blocked)),
                         EXIT_BLOCKED)
    if plan.manual_only:
        return ApplyResult("manual", verification=Verification(plan.verify, before, before,
                                                               note=note or T("manual steps only")))
    if plan.already_applied:
        return ApplyResult("already-applied", verification=Verification(
            plan.verify, before, before, note=note))
    preflight(plan, ctx)
    others = [w for w in plan.affects if w != plan.verify]
    affected_before = affected_states(host_factory, ctx.options, others)
    root = ctx.write_root
    resolved = [ctx.resolved(e.path) for e in plan.changes]
    expects = []
    try:
        for e, res in zip(plan.changes, resolved):
            expects.append(_expect(ctx, e, res))
    except DoctorError as exc:
        raise FixFailed(f"{exc}; nothing was changed") from None
    journal = Journal.create(plan.recipe, {"recipe": plan.recipe, "params": plan.params,
                                           "write_root": root, "kind": ctx.kind,
                                           "plan": plan.to_dict()},
                             base=journal_base(ctx))
    written: list[str] = []
    try:
        for e, res in zip(plan.changes, resolved):
            journal.backup(e.path, res, root, confine.missing_dirs(root, res))
        if plan.commands:  # files the commands rewrite (ld.so.cache): restored by undo
            for path in plan.snapshots:
                res = ctx.resolved(path)
                journal.backup(path, res, root, [])
                journal.data["targets"][-1]["snapshot"] = True
        journal.set_state("backed-up")
        _fault("after-backup")
        for i, (e, res, exp, t) in enumerate(zip(plan.changes, resolved, expects,
                                                  journal.data["targets"])):
            owner = ((t["uid"], t["gid"]) if t.get("existed") and os.geteuid() == 0 else None)
            # the walk and the "before" comparison happen now, at write time (plan→apply race)
            if exp is _NO_EXPECT:
                confine.write_file(root, res, e.after, e.mode, owner=owner)
            else:
                confine.write_file(root, res, e.after, e.mode, expect=exp, owner=owner)
            written.append(e.path)
            if i == 0:
                _fault("after-first-rename")
    except (OSError, DoctorError) as exc:
        journal.set_state("failed", error=str(exc))
        msg = exc.strerror if isinstance(exc, OSError) and exc.strerror else describe(exc)
        raise FixFailed(T("writing failed: {reason}; undo with `{cmd}`", reason=msg,
                          cmd=f"ascend-doctor fix --undo {journal.id}"), bool(written),
                        journal.id) from None
    journal.set_state("written", written=written)
    ran = [_run(c, ctx) for c in plan.commands]
    snap_after = {}
    for t in journal.data["targets"]:
        if t.get("snapshot"):  # what the commands made of it: undo compares against this
            cur = confine.read_file(root, t["resolved"])
            snap_after[t["path"]] = None if cur is None else hashlib.sha256(cur).hexdigest()
    after_res, note = run_check_findings(host_factory, ctx.options, plan.verify)
    after, msgs, log_note = _state(after_res, before_res)
    affected_after = affected_states(host_factory, ctx.options, others)
    blind = unmodelled(plan, ran, [plan.verify or "", *affected_after])
    v = Verification(plan.verify, before, after, msgs, note or log_note,
                     [{"check": c, "before": affected_before.get(c, (None,))[0], "after": st,
                       **({"unverifiable": True} if c in blind else {})}
                      for c, (st, _) in sorted(affected_after.items()) if c != plan.verify],
                     regressions(affected_before, affected_after, plan.verify, blind),
                     [c for c in blind if c])
    if plan.verify in blind:
        v.note = T("not verifiable here: {check} depends on a command that was not run on "
                   "this target", check=plan.verify)
        v.after = None
    journal.set_state("applied", commands=ran, verification=v.to_dict(), snapshots_after=snap_after)
    return ApplyResult("applied", journal.id, written, ran, v)


def journal_base(ctx: FixContext) -> str | None:
    """Where a fix on ``ctx`` is journalled: inside the overlay for an overlay (the demo, a
    bundle), whose fixes must never reach the user's own journal; else the user's."""
    return overlay_dir(ctx.write_root) if ctx.kind == "overlay" else None


_NO_EXPECT = object()


def _expect(ctx: FixContext, e: Any, res: str) -> Any:
    """The bytes the file must still hold when written (the plan's "before").

    A file edited since the plan is refused, not overwritten. In an overlay the bundle is
    the "before" until the overlay holds its own copy, so only an existing overlay file is
    compared.
    """
    cur = confine.read_file(ctx.write_root, res)
    if ctx.kind == "overlay" and cur is None:
        return _NO_EXPECT
    if cur != e.before:
        raise confine.ConfinementError(ctx.write_root, e.path,
                                       "changed since the plan was made (re-run the plan)")
    return e.before


def _run(c, ctx: FixContext) -> dict[str, Any]:
    if ctx.kind == "overlay":
        return {"argv": list(c.argv), "skipped": T("a bundle is not a machine: not run")}
    argv = c.for_root(ctx.write_root)
    if argv is None:
        return {"argv": list(c.argv), "skipped": c.sysroot_skip or T("not run in a sysroot")}
    try:
        r = subprocess.run(list(argv), capture_output=True, timeout=120)
    except FileNotFoundError:
        return {"argv": list(argv), "rc": None, "error": T("{cmd}: command not found", cmd=argv[0])}
    except subprocess.TimeoutExpired:
        return {"argv": list(argv), "rc": None, "error": T("timed out after {n} s", n=120)}
    return {"argv": list(argv), "rc": r.returncode,
            "stderr": r.stderr.decode("utf-8", "replace")[-2000:]}


def _check_path(j: Journal, spec: Any, p: Any, what: str) -> str:
    if not isinstance(p, str) or not p.startswith("/") or norm(p) != p:
        raise JournalError(f"fix journal {j.id}: {what} {p!r} is not a clean host path")
    if not spec.may_write(p):
        raise JournalError(f"fix journal {j.id}: {p} is not a path {spec.id} writes; "
                           "refusing to undo")
    return p


def _targets(j: Journal) -> tuple[str, Any, list[dict[str, Any]]]:
    """(write root, recipe spec, targets) of a journal, each checked against the recipe.

    Why: the journal is data, never instructions: it may only name files its recipe is
    allowed to write, under the target it was applied to, with a sane mode and owner.
    """
    from . import FixRegistry
    root = j.data.get("write_root")
    if not isinstance(root, str) or not os.path.isabs(root) or os.path.normpath(root) != root:
        raise JournalError(f"fix journal {j.id}: write root {root!r} is not an absolute path")
    if j.base is not None and overlay_dir(root) != j.base:
        raise JournalError(f"fix journal {j.id}: an overlay's journal names another target "
                           f"({root}); refusing it")
    spec = FixRegistry.discover().recipes.get(j.data.get("recipe"))  # type: ignore[arg-type]
    if spec is None:
        raise JournalError(f"fix journal {j.id}: unknown recipe {j.data.get('recipe')!r}")
    out = []
    targets = j.data.get("targets", [])
    if not isinstance(targets, list):
        raise JournalError(f"fix journal {j.id}: targets is not a list")
    for t in targets:
        if not isinstance(t, dict):
            raise JournalError(f"fix journal {j.id}: a target is not an object")
        _check_path(j, spec, t.get("path"), "path")
        res = _check_path(j, spec, t.get("resolved", t.get("path")), "resolved path")
        t = {**t, "resolved": res}
        if t.get("existed"):
            mode, uid, gid = t.get("mode"), t.get("uid", 0), t.get("gid", 0)
            if not all(isinstance(x, int) and x >= 0 for x in (mode, uid, gid)):
                raise JournalError(f"fix journal {j.id}: {res} has no valid mode/owner")
            if mode & 0o7000 or mode & 0o002:
                raise JournalError(f"fix journal {j.id}: {res} would be restored with mode "
                                   f"{mode:04o} (setuid/world-writable); refusing")
            j.backup_bytes(t.get("backup"))  # validates the backup number
        dirs = t.get("created_dirs", [])
        if not isinstance(dirs, list):
            raise JournalError(f"fix journal {j.id}: created_dirs of {res} is not a list")
        for d in dirs:
            if not isinstance(d, str) or norm(d) != d or not res.startswith(d + "/"):
                raise JournalError(f"fix journal {j.id}: created dir {d!r} is not a parent "
                                   f"of {res}")
        out.append(t)
    return root, spec, out


def drift(j: Journal, root: str | None = None, targets: list[dict[str, Any]] | None = None
          ) -> list[str]:
    """Targets changed since the fix wrote them (neither the backup nor the fix's bytes)."""
    if root is None or targets is None:
        root, _, targets = _targets(j)
    plan = j.data.get("plan")
    edits = plan.get("edits") if isinstance(plan, dict) else None
    after = {e.get("path"): e.get("after_sha256") for e in (edits or [])
             if isinstance(e, dict) and isinstance(edits, list)}
    out = []
    for t in targets:
        if t.get("snapshot"):  # a command's output: see undo (rebuilt, never refused)
            continue
        cur_b = confine.read_file(root, t["resolved"])
        cur = hashlib.sha256(cur_b).hexdigest() if cur_b is not None else None
        old = (hashlib.sha256(j.backup_bytes(t["backup"])).hexdigest()
               if t.get("existed") else None)
        if cur not in (old, after.get(t["path"])):
            out.append(t["path"])
    return out


def undo(jid: str | None = None, force: bool = False, root: str | None = None
         ) -> dict[str, Any]:
    """Restore every target of a journal (content, mode, owner); remove created files.

    With ``root``, only that target's newest fix (or ``jid`` when it belongs to it).
    Refuses (unless ``force``) when a target was edited since: undo would destroy that edit.
    Runs only the recipe's own undo commands, never anything the journal names.
    """
    j = Journal.load(jid, root, base_for(root))
    if j.data.get("state") == "undone":
        raise DoctorError(T("fix {id} was already undone", id=j.id))
    write_root, spec, targets = _targets(j)
    changed = drift(j, write_root, targets)
    if changed and not force:
        raise DoctorError(T("{paths} changed after fix {id} wrote it (target {root}); undo would "
                            "discard that change (pass --force to restore anyway)",
                            paths=", ".join(changed), id=j.id, root=write_root))
    restored, removed = [], []
    rebuild = False  # a snapshot changed by someone else since the fix: rebuild, not restore
    snaps_after = j.data.get("snapshots_after")
    snaps_after = snaps_after if isinstance(snaps_after, dict) else {}
    for t in reversed(targets):
        res = t["resolved"]
        if t.get("snapshot"):
            cur_b = confine.read_file(write_root, res)
            cur = None if cur_b is None else hashlib.sha256(cur_b).hexdigest()
            old = t.get("sha256") if t.get("existed") else None
            if cur == old:
                continue
            if t["path"] in snaps_after and cur != snaps_after[t["path"]]:
                rebuild = True
                continue
        if t.get("existed"):
            data = j.backup_bytes(t["backup"])
            owner = (t.get("uid", 0), t.get("gid", 0)) if os.geteuid() == 0 else None
            confine.write_file(write_root, res, data, t["mode"] & 0o777, owner=owner)
            restored.append(t["path"])
        else:
            if confine.remove(write_root, res):
                removed.append(t["path"])
            for d in t.get("created_dirs", []):
                confine.remove_empty_dir(write_root, d)
    kind = "live" if write_root == "/" else ("overlay" if j.data.get("kind") == "overlay"
                                               else "sysroot")
    rerun_ctx = FixContext(host=None, write_root=write_root, kind=kind)  # type: ignore
    # the recipe's undo commands rebuild what its commands made (ldconfig: ld.so.cache);
    # when that output was snapshotted and restored byte for byte, running them again would
    # only replace the restored bytes
    snapped = any(t.get("snapshot") for t in targets)
    ran = [_run(c, rerun_ctx) for c in spec.undo_commands
           if j.data.get("state") in ("written", "applied", "failed")
           and (not snapped or rebuild)]
    j.set_state("undone", restored=restored, removed=removed, undo_commands=ran)
    return {"journal": j.id, "recipe": j.data.get("recipe"), "restored": restored,
            "removed": removed, "write_root": write_root, "kind": kind, "commands": ran}
