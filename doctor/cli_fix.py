"""`fix` (plan → diff → confirm → apply → verify → undo) and `export-root`.

Exit codes of `fix`: 0 plan shown / applied and verified / already applied / undone;
1 applied but the verifying check still fails; 2 error (nothing or a journalled partial
change), an unknown --param, or nothing can be planned on this target (the plan would name
paths that do not exist; the reason is printed); 3 refused: --apply without --yes and without a terminal; 4 refused: needs root;
5 applied and verified, but re-checking what it affects found new fails (named in the output).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

import click

from .cli_common import EXIT_FAIL, EXIT_NEW_FAILS, EXIT_NO_VERDICT, build_options, default_lang
from .errors import DoctorError, UsageError
from .i18n import tr, tt


def _params(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise UsageError(tt(default_lang(), "--param {value}: expected KEY=VALUE",
                                value=repr(v)))
        out[k.strip()] = val
    return out


def demo_overlay() -> str:
    """The overlay `fix --demo` writes into (and journals in): the user's own state
    directory, so pasted `fix … --demo` lines of the demo report plan, apply and undo on
    the demo, never on this machine."""
    from ascend_doctor.fixes.journal import state_dir
    return os.path.join(os.path.dirname(state_dir()), "demo-overlay")


def _context(root: str | None, bundle: str | None, demo_root: str | None, options):
    """(FixContext, host factory for verification) for the chosen target."""
    from ascend_doctor.fixes.context import FixContext

    given = [x for x in (root, bundle, demo_root) if x]
    if len(given) > 1 and not (bundle and demo_root and not root):
        raise UsageError(tt(default_lang(), "choose one of --root, --bundle, --demo-root"))
    if root:
        from .host import LiveHost
        ctx = FixContext.for_root(root, options)
        return ctx, (lambda: LiveHost(ctx.write_root))
    if bundle or demo_root:
        from .bundle import BundleData, BundleHost
        if bundle and not demo_root:
            raise UsageError(tt(default_lang(), "--bundle needs --demo-root DIR: the overlay the "
                                "fix writes into"))
        os.makedirs(demo_root, exist_ok=True)
        if bundle:
            data = BundleData.load(bundle)  # streamed and bounded; replay hosts share it
            factory = lambda: BundleHost(data, demo_root)  # noqa: E731
        else:
            from .demo import demo_bundle_data
            factory = lambda: BundleHost(demo_bundle_data(), demo_root)  # noqa: E731
        return FixContext.for_overlay(factory(), demo_root, options), factory
    from .host import LiveHost
    ctx = FixContext.for_root("/", options)
    return ctx, (lambda: LiveHost("/"))


def checks_for(recipe_id: str, default: str | None) -> list[str]:
    """The installed checks that can point at a recipe: its own, and those the knowledge
    base lists for entries whose fix is this recipe (so only those run before a fix)."""
    from ascend_doctor.knowledge import load

    from .registry import Registry
    installed = set(Registry.discover(plugins=False).checks)
    ids = {default} if default else set()
    ids |= {c for e in load().entries.values() if e.fix == recipe_id for c in e.checks}
    return sorted(i for i in ids if i in installed)


def _fixable(factory, options, only: list[str] | None = None) -> list[dict[str, Any]]:
    from .engine import RunConfig, run
    from .registry import Registry
    if only is not None and not only:
        return []
    report = run(factory(), options, Registry.discover(plugins=False),
                 RunConfig(only=tuple(only or ())))
    from ascend_doctor.knowledge import load

    from . import problems, ranking
    kb = load()
    # worst problem first (doctor/ranking.py), as the text report, the JSON and the TUI order
    # them: the fix of the root cause comes before the fixes of what it explains
    pairs = [(r, f) for p in problems.group(report, kb) for r, f in p.members
             if f.fix is not None]
    return [{"check": r.check_id, "status": f.status.value, "message": f.message,
             "severity": ranking.severity(f, r, kb).value,
             "fix": f.fix.id, "params": dict(f.fix.params), "kb": list(f.kb)}
            for r, f in pairs]


def _blocked(ctx, row: dict[str, Any]) -> list[Any]:
    """Why the row's fix cannot be planned on this target (empty when it can)."""
    from ascend_doctor.fixes import plan_for
    try:
        return list(plan_for(ctx, row["fix"], dict(row["params"]), row["check"]).blocked)
    except DoctorError:
        return []  # the plan itself will say what is wrong when asked for


@click.command("fix", epilog="""\b
Examples:
  ascend-doctor fix                                  # what can be fixed here
  ascend-doctor fix ldconf.ascend-conf               # the plan (a dry run)
  sudo ascend-doctor fix ldconf.ascend-conf --apply  # asks, then applies and verifies
  ascend-doctor fix dns.hosts-pin --param hostname=api.example.com --param address=10.0.0.7
  ascend-doctor fix ldconf.ascend-conf --demo --apply --yes   # on the demo, not here
  ascend-doctor fix ldconf.ascend-conf --demo-root /tmp/overlay --apply --yes
  ascend-doctor fix --undo                           # restore the latest fix
  ascend-doctor fix --demo --undo                    # restore the latest demo fix

\b
Exit codes: 0 done (or plan shown), 1 applied but its check still fails, 2 error
(or nothing can be planned here: the plan says why; or an unknown --param),
3 refused (no terminal, no --yes), 4 refused (needs root), 5 applied and verified
but the change left new fails elsewhere (listed; often a problem the old state hid).""")
@click.argument("recipe_id", required=False)
@click.option("--root", type=click.Path(exists=True, file_okay=False),
              help="Plan and apply inside this sysroot (ldconfig -r ROOT, no live commands).")
@click.option("--bundle", type=click.Path(dir_okay=False, exists=True),
              help="Plan against a bundle; writes go to --demo-root.")
@click.option("--demo-root", type=click.Path(file_okay=False),
              help="Overlay directory: plan against the demo (or --bundle) and write here.")
@click.option("--demo", "demo", is_flag=True,
              help="Plan against the demo scenario; writes and the journal go to the demo's "
                   "overlay in the user's state directory, never to this machine.")
@click.option("--from-check", "from_check", default=None, metavar="CHECK_ID",
              help="Plan with what this check's finding knows (the fix list names it).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="Recipe parameter (e.g. hostname=api.example.com, block-size=128).")
@click.option("--apply", "do_apply", is_flag=True, help="Apply the plan (asks first).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (non-interactive use).")
@click.option("--undo", "undo_id", is_flag=False, flag_value="latest", default=None,
              metavar="[JOURNAL-ID]", help="Restore what a fix changed (the latest by default).")
@click.option("--force", is_flag=True, help="With --undo: restore even files edited since.")
@click.option("--journal", "show_journal", is_flag=True,
              help="List the applied fixes (newest last) and exit.")
@click.option("--json", "as_json", is_flag=True, help="Plan, result or list as JSON.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language of the output [default: from LANG].")
def fix_cmd(recipe_id, root, bundle, demo_root, demo, from_check, params, do_apply, yes,
            undo_id, force, show_journal, as_json, lang) -> None:
    """Show the plan of a fix (dry run), apply it with --apply, undo with --undo.

    Without RECIPE_ID: the fixable findings of a run on the chosen target.
    """
    from ascend_doctor.fixes import FixRegistry, plan_for
    from ascend_doctor.fixes.apply import FixFailed, FixRefused, apply_plan, undo

    lang = lang or default_lang()
    out = (lambda d: click.echo(json.dumps(d, indent=2, ensure_ascii=False))) if as_json else None
    if demo:
        if root or bundle or demo_root:
            raise UsageError(tt(lang, "--demo chooses the demo's own overlay: drop --root, "
                                "--bundle and --demo-root"))
        demo_root = demo_overlay()
        os.makedirs(demo_root, mode=0o700, exist_ok=True)
    if show_journal:
        from ascend_doctor.fixes.journal import (Journal, base_for, list_ids, overlay_dir,
                                                 state_dir)
        base = base_for(demo_root) if demo_root else None
        shown_dir = overlay_dir(demo_root) if demo_root else state_dir()
        rows = []
        for jid in (list_ids(base) if base or not demo_root else []):
            d = Journal.load(jid, base=base).data
            rows.append({"id": jid, "recipe": d.get("recipe"), "state": d.get("state"),
                         "write_root": d.get("write_root"),
                         "files": [t["path"] for t in d.get("targets", [])]})
        if out:
            out({"journal": rows, "dir": shown_dir})
        else:
            for r in rows:
                click.echo(f"{r['id']}  {r['state']:<10} {r['write_root']}  "
                           f"{', '.join(r['files'])}")
            if not rows:
                click.echo(tt(lang, "no fix applied yet ({dir})", dir=shown_dir))
        return
    if undo_id is not None:
        target = root or demo_root
        res = undo(None if undo_id == "latest" else undo_id, force=force,
                   root=os.path.abspath(target) if target else None)
        if out:
            out({"undo": res})
        else:
            click.echo(tt(lang, "undid {journal} ({recipe}) on {root}: restored {restored}",
                          journal=res["journal"], recipe=res["recipe"], root=res["write_root"],
                          restored=", ".join(res["restored"]) or tt(lang, "nothing"))
                       + (tt(lang, "; removed {removed}", removed=", ".join(res["removed"]))
                          if res["removed"] else "")
                       + (tt(lang, " (inside the overlay {root}; this machine was not touched)",
                             root=res["write_root"]) if res.get("kind") == "overlay" else ""))
        return
    options = build_options({"lang": lang})
    ctx, factory = _context(root, bundle, demo_root, options)
    if not recipe_id:
        from .suggest import fix_command
        # the target the list was made on, so the suggested command plans on it too
        where = ([f"--root={os.path.abspath(root)}"] if root else
                 ([f"--bundle={os.path.abspath(bundle)}"] if bundle else [])
                 + ([f"--demo-root={os.path.abspath(demo_root)}"] if demo_root else []))
        if demo:
            where = ["--demo"]
        rows = _fixable(factory, options)
        if out:
            out({"fixable": rows})
        elif not rows:
            click.echo(tt(lang, "nothing to fix: no failing finding points at a recipe"))
        else:
            shown = set()
            for r in rows:
                key = (r["check"], r["fix"])
                if key in shown:  # one line per check and recipe: the plan covers them all
                    continue
                shown.add(key)
                blocked = _blocked(ctx, r)
                if blocked:  # never offer a fix that cannot be planned here: say why
                    click.echo(f"{r['status']:5} {r['check']}: {tr(r['message'], lang)}\n      "
                               + tt(lang, "no fix here ({recipe}): {why}", recipe=r["fix"],
                                    why="; ".join(tr(b, lang) for b in blocked)))
                    continue
                # --from-check: the plan takes this finding's parameters (also the
                # structured ones a command line cannot spell), not another check's
                click.echo(f"{r['status']:5} {r['check']}: {tr(r['message'], lang)}\n      "
                           + fix_command(r["fix"], r["params"],
                                         [*where, f"--from-check={r['check']}"]))
        return
    spec = FixRegistry.discover().get(recipe_id)
    merged: dict[str, Any] = {}
    verify = spec.check
    candidates = checks_for(recipe_id, spec.check)
    if from_check:
        if from_check not in candidates:
            raise UsageError(tt(lang, "--from-check {check}: not a check that points at "
                                "{recipe} (those are: {candidates})", check=from_check,
                                recipe=recipe_id,
                                candidates=", ".join(candidates) or tt(lang, "none")))
        candidates = [from_check]
    given = _params(params)
    rows = [r for r in _fixable(factory, options, candidates) if r["fix"] == recipe_id]
    # the finding the user's parameters describe (var=PYTORCH_NPU_ALLOC_CONF: the OOM
    # line's, not a library finding's), else the worst one
    row = next((r for r in rows if given and all(str(r["params"].get(k)) == v
                                                 for k, v in given.items())),
               # parameters that describe no finding here: plan with them alone, never
               # mixed with another finding's (a config check's flags under relieve=…)
               rows[0] if rows and (not given or from_check) else None)
    if row is not None:  # what the check knows, then the user's overrides
        merged.update(row["params"])
        verify = row["check"]
    unknown = spec.unknown_params(given)
    if unknown:  # never echoed in the plan and then ignored
        raise UsageError(tt(lang, "{recipe} does not take --param {names} (it takes: {known})",
                            recipe=recipe_id, names=", ".join(unknown),
                            known=", ".join(spec.params) or tt(lang, "none")))
    merged.update(given)
    try:
        plan = plan_for(ctx, recipe_id, merged, verify)
    except UsageError as exc:  # a recipe's refusal of its parameters, in the reader's language
        raise UsageError(tr(exc.args[0], lang) if exc.args else str(exc)) from None
    if plan.blocked:  # nothing can be planned here: said why, exit 2 (no fix to give)
        if out:
            out({"plan": plan.to_dict(lang), "target": ctx.write_root, "applied": False})
        else:
            click.echo(plan.render(lang, ctx.write_root, ctx.kind == "overlay"), nl=False)
        sys.exit(EXIT_NO_VERDICT)
    if not do_apply:
        if out:
            out({"plan": plan.to_dict(lang), "target": ctx.write_root, "applied": False})
        else:
            click.echo(plan.render(lang, ctx.write_root, ctx.kind == "overlay"), nl=False)
            if not plan.already_applied and not plan.manual_only:
                click.echo("\n" + tt(lang, "(dry run: nothing changed; add --apply to apply it)"))
        return
    if not yes and not plan.already_applied and not plan.manual_only:
        if not sys.stdin.isatty():
            if not out:
                click.echo(plan.render(lang, ctx.write_root, ctx.kind == "overlay"), nl=False)
            click.echo(tt(lang, "ascend-doctor: refusing to apply without confirmation: no "
                          "terminal to ask on; pass --yes to apply non-interactively"), err=True)
            sys.exit(3)
        click.echo(plan.render(lang, ctx.write_root, ctx.kind == "overlay"), nl=False)
        if not click.confirm(tt(lang, "Apply this plan?"), default=False):
            click.echo(tt(lang, "not applied"))
            sys.exit(3)
    try:
        res = apply_plan(plan, ctx, factory)
    except FixRefused as exc:
        click.echo(f"ascend-doctor: {tr(exc.args[0], lang)}", err=True)
        sys.exit(exc.code)
    except FixFailed as exc:
        click.echo(f"ascend-doctor: {tr(exc.args[0], lang)}", err=True)
        sys.exit(EXIT_NO_VERDICT)
    v = res.verification
    if out:
        out({"plan": plan.to_dict(lang), "target": ctx.write_root, "result": res.to_dict()})
    else:
        if res.status == "applied":
            click.echo(plan.render(lang, ctx.write_root, ctx.kind == "overlay"), nl=False)
        click.echo({"applied": tt(lang, "applied (journal {journal}; undo with "
                                  "`ascend-doctor fix --undo {journal}`)", journal=res.journal),
                    "already-applied": tt(lang, "already applied: nothing changed"),
                    }[res.status] if res.status != "manual" else
                   plan.render(lang, ctx.write_root, ctx.kind == "overlay")
                   + tt(lang, "nothing to apply automatically: do the manual steps"))
        for c in res.commands:
            if c.get("skipped"):
                click.echo("  " + tt(lang, "skipped {cmd}: {reason}", cmd=shlex.join(c["argv"]),
                                     reason=tr(c["skipped"], lang)))
            else:
                click.echo("  " + tt(lang, "ran {cmd}: {result}", cmd=shlex.join(c["argv"]),
                                     result=(tt(lang, "exit {rc}", rc=c["rc"])
                                             if c.get("rc") is not None
                                             else tt(lang, "did not run")))
                           + (f" ({tr(c['error'], lang)})" if c.get("error") else ""))
        if v is not None:
            if v.note:
                click.echo("  " + tt(lang, "verify: {note}", note=tr(v.note, lang)))
            else:
                click.echo("  " + tt(lang, "verify {check}: before {before}, after {after}",
                                     check=v.check, before=v.before, after=v.after))
                for m in v.messages:
                    click.echo(f"    {tr(m, lang)}")
            _echo_affected(v, lang)
    if res.status == "applied" and v is not None and v.ok is False:
        sys.exit(EXIT_FAIL)
    if res.status == "applied" and v is not None and v.regressions:
        # the fix did its job but the host now fails elsewhere (often a problem the old state
        # hid): a pipeline that runs `fix --yes` must not read that as "healthy"
        sys.exit(EXIT_NEW_FAILS)


def _echo_affected(v, lang: str = "en") -> None:
    """The other checks the change touched, and every new fail it caused, named."""
    if getattr(v, "unverifiable", None):
        click.echo("  " + tt(lang, "not verifiable here (they depend on a command that was not "
                             "run on this target): {checks}", checks=", ".join(v.unverifiable)))
    if not v.affected:
        return
    worse = {r["check"] for r in v.regressions}
    better = [a for a in v.affected if a["before"] and a["check"] not in worse
              and a["before"] != a["after"] and a["after"] in ("pass", "info")]
    click.echo("  " + tt(lang, "re-checked {n} affected checks: {better} now pass, {worse} worse",
                         n=len(v.affected), better=len(better), worse=len(worse))
               + (" (" + ", ".join(f"{a['check']} {a['before']} -> {a['after']}"
                                   for a in better) + ")" if better else ""))
    for r in v.regressions:
        was = (r["after"] if r["before"] in (None, r["after"]) else
               f"{r['before']} -> {r['after']}")
        click.echo("  " + tt(lang, "new {status} caused by this fix: {check} ({was})",
                             status=r["after"], check=r["check"], was=was))
        for m in r["messages"][:5]:
            click.echo(f"    {tr(m, lang)}")
        if len(r["messages"]) > 5:
            click.echo("    " + tt(lang, "… and {n} more (ascend-doctor check --only {check})",
                                   n=len(r["messages"]) - 5, check=r["check"]))


@click.command("export-root", epilog="""\b
Examples:
  ascend-doctor export-root /tmp/demo-root && ascend-doctor fix --root /tmp/demo-root
  ascend-doctor export-root --bundle host.tar.gz /tmp/host-root""")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--bundle", type=click.Path(dir_okay=False, exists=True),
              help="Export this bundle instead of the demo scenario.")
def export_root_cmd(directory: str, bundle: str | None) -> None:
    """Write the demo scenario (or a bundle) as a sysroot directory, for `fix --root`."""
    from ascend_doctor.fixes.export import export_root

    from .bundle import BundleData
    if bundle:
        data = BundleData.load(bundle)
    else:
        from .demo import demo_bundle_data
        data = demo_bundle_data()
    if os.path.exists(directory) and os.listdir(directory):
        raise UsageError(tt(default_lang(), "{dir} is not empty", dir=directory))
    try:
        res = export_root(data, directory)
    except OSError as exc:
        raise DoctorError(tt(default_lang(), "cannot export into {dir}: {reason}", dir=directory,
                             reason=exc.strerror or exc)) from None
    lang = default_lang()
    click.echo(tt(lang, "wrote {files} files, {dirs} directories, {links} links, {proc} /proc "
                  "files, {dist_infos} dist-infos under {root}", files=res["files"],
                  dirs=res["dirs"], links=res["links"], proc=res["proc"],
                  dist_infos=res["dist_infos"], root=res["root"]), err=True)
    for s in res["skipped"]:
        click.echo("  " + tt(lang, "skipped {what}", what=s), err=True)


COMMANDS = (fix_cmd, export_root_cmd)
