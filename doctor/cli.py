"""The command line (click). Exit codes: 0 no fail, 1 a fail (or per --fail-on), 2 no verdict.

Heavy modules (textual, scapy, rich, torch) are imported only by the command that needs
them, so ``check --json`` starts fast.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

import click

from . import __version__
from .cli_common import _die, build_options, default_lang, input_options
from .i18n import Msg, T, tr, tt
from .errors import DoctorError, SourceError, SourceMissing, UsageError
from .opening import demo_host, open_host  # noqa: F401  (tests open hosts through the CLI)


def emit(report, *, as_json: bool, junit: str | None, markdown: bool, lang: str,
         verbose: bool = False) -> None:
    """Write the report in the asked formats: JSON or Markdown on stdout, else text."""
    from ascend_doctor.knowledge import load as load_kb

    kb = load_kb()
    if junit:
        from .atomic import atomic_write
        from .report import junit as junit_report
        atomic_write(junit, junit_report.render(report, kb).encode())
    if as_json:
        from .report import jsonreport
        ids = {k for _, f in report.findings() for k in f.kb}
        sys.stdout.write(jsonreport.render(report, kb.titles(ids, lang), kb, lang))
    elif markdown:
        from .report import markdown as md
        sys.stdout.write(md.render(report, kb, lang))
    else:
        from .report import text
        text.render(report, sys.stdout, kb, lang, verbose)


# click parameter name -> RunOptions field, where they differ
_PARAM_FIELD = {"logs": "logs", "elf_paths": "elf_paths"}


def _with_bundle_options(host, options, ctx: click.Context):
    """A bundle's run replays the options it was collected with, unless given again here."""
    manifest = getattr(getattr(host, "data", None), "manifest", None)
    if not isinstance(manifest, dict) or not ctx.params.get("bundle"):
        return options
    from .replay import replay_options, replayed_fields

    explicit = [_PARAM_FIELD.get(n, n) for n in ctx.params
                if ctx.get_parameter_source(n) in (click.core.ParameterSource.COMMANDLINE,
                                                   click.core.ParameterSource.ENVIRONMENT)]
    replayed = replay_options(manifest.get("options"), options, explicit)
    taken = replayed_fields(options, replayed)
    if taken:
        click.echo(tt(options.lang, "ascend-doctor: replaying the bundle's collection options: "
                      "{options}", options=", ".join(taken)), err=True)
    return replayed


def run_report(host, options, only, skip, timeout: float | None, context=None,
               progress: bool = False):
    from .engine import DEFAULT_TIMEOUT, RunConfig, run
    from .registry import Registry

    registry = Registry.discover(only=only, skip=skip)  # with --only: only what it needs
    registry.load_plugins()
    config = RunConfig(tuple(only), tuple(skip), timeout or DEFAULT_TIMEOUT, context=context,
                       override=bool(timeout))
    on_result = None
    if progress and sys.stderr.isatty():
        def on_result(r):  # progress goes to stderr, never into the report
            click.echo(f"\r\033[K{r.status.value:5} {r.check_id}", err=True, nl=False)
    report = run(host, options, registry, config, on_result)
    if on_result is not None:
        click.echo("\r\033[K", err=True, nl=False)
    return report


def _split(values: tuple[str, ...]) -> list[str]:
    return [w for v in values for w in v.split(",") if w]


def _one_line(exc: BaseException, lang: str | None = None) -> str:
    """The error as one line in ``lang`` (tarfile/OSError messages may span several): a
    message built with T() is translated, a source's name and reason each on their own."""
    arg = exc.args[0] if exc.args else None
    if isinstance(arg, Msg):
        text = tr(arg, lang)
    elif isinstance(exc, (SourceMissing, SourceError)):
        text = f"{tr(exc.source, lang)}: {tr(exc.reason, lang)}"
    else:
        text = str(exc)
    text = " ".join(text.split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _arg_lang(args: list[str]) -> str:
    """The --lang a command line asks for (its errors speak it), else LANG's."""
    for i, a in enumerate(args):
        v = a[7:] if a.startswith("--lang=") else (args[i + 1] if a == "--lang" and
                                                  i + 1 < len(args) else None)
        if v in ("en", "zh"):
            return v
    return default_lang()


# Subcommands that live in their own modules (each module's COMMANDS), by name: a module is
# imported when one of its commands runs or help lists them, not by `check` or `demo`
# (importing all four took ~4 ms). They import cli_common, never this module.
_ELSEWHERE = {"explain": "cli_kb", "kb": "cli_kb", "triage": "cli_kb", "fix": "cli_fix",
              "export-root": "cli_fix", "exporter": "cli_exporter", "diff": "cli_fleet",
              "fleet": "cli_fleet"}


EXIT_INTERRUPTED = 128 + 2  # SIGINT, as a shell reports a program Ctrl-C stopped


def _pipe_closed() -> None:
    """The reader of stdout went away (``… | head``): end as other Unix tools do, killed by
    SIGPIPE, with no message; the unwritten rest of the report goes nowhere."""
    import signal

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush writes nowhere
    except (OSError, ValueError):
        pass
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + 13)  # pragma: no cover (where there is no SIGPIPE)


def _interrupted(lang: str) -> None:
    """Ctrl-C: one line and 130, never "at least one fail" (1) or a traceback. The checks'
    commands were killed by the engine; their daemon threads do not hold the exit."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    click.echo(f"\nascend-doctor: {tt(lang, 'interrupted')}", err=True)
    sys.exit(EXIT_INTERRUPTED)


class _Group(click.Group):
    """Every command's errors end as one line on stderr and exit 2, never a traceback:
    bad inputs (DoctorError, OSError, ValueError) say what was wrong; anything else is an
    internal error. ``ASCEND_DOCTOR_DEBUG=1`` lets the exception (and traceback) through.
    The commands of _ELSEWHERE are loaded on first use."""

    def list_commands(self, ctx: click.Context | None) -> list[str]:
        return sorted({*self.commands, *_ELSEWHERE})

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _ELSEWHERE:
            self._load(_ELSEWHERE[cmd_name])
        return self.commands.get(cmd_name)

    def all_commands(self) -> dict[str, click.Command]:
        """Every command by name, the ones of _ELSEWHERE loaded."""
        for module in sorted(set(_ELSEWHERE.values())):
            self._load(module)
        return self.commands

    def _load(self, module: str) -> None:
        import importlib

        for cmd in importlib.import_module(f"{__package__}.{module}").COMMANDS:
            if cmd.name not in self.commands:
                self.add_command(cmd)

    def invoke(self, ctx: click.Context) -> Any:
        # read before click hands the arguments to the subcommand (it empties these)
        lang = _arg_lang([*getattr(ctx, "_protected_args", ()), *ctx.args])
        try:
            try:
                return super().invoke(ctx)
            finally:  # the report is written before the exit code: a closed pipe shows here
                sys.stdout.flush()
        except BrokenPipeError:
            _pipe_closed()
        except KeyboardInterrupt:
            _interrupted(lang)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except DoctorError as exc:
            if os.environ.get("ASCEND_DOCTOR_DEBUG"):
                raise
            _die(_one_line(exc, lang))
        except OSError as exc:
            if os.environ.get("ASCEND_DOCTOR_DEBUG"):
                raise
            where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
            _die(tt(lang, "cannot use{where}: {reason}", where=where,
                    reason=exc.strerror or _one_line(exc, lang)))
        except ValueError as exc:
            if os.environ.get("ASCEND_DOCTOR_DEBUG"):
                raise
            _die(tt(lang, "bad input: {reason}", reason=_one_line(exc, lang)))
        except Exception as exc:  # a bug: one line, the traceback on request
            if os.environ.get("ASCEND_DOCTOR_DEBUG"):
                raise
            _die(tt(lang, "internal error ({kind}: {reason}); rerun with "
                    "ASCEND_DOCTOR_DEBUG=1 for the traceback", kind=type(exc).__name__,
                    reason=_one_line(exc, lang)))


@click.group(cls=_Group, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]},
             epilog="""\b
Examples:
  ascend-doctor demo --text        # the report of a broken 8x910B host, no setup
  sudo ascend-doctor check         # diagnose this machine
  ascend-doctor check --json | jq '.summary'
  ascend-doctor collect            # a bundle to attach to an issue
  ascend-doctor COMMAND --help     # each command's options and examples""")
@click.version_option(__version__, prog_name="ascend-doctor")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Diagnose Ascend NPU hosts serving LLMs with vllm-ascend.

    Without a command: the TUI on a terminal, the text report otherwise (or with CI=true).
    """
    if ctx.invoked_subcommand is None:
        if sys.stdout.isatty() and sys.stdin.isatty() and not os.environ.get("CI"):
            ctx.invoke(tui_cmd)
        else:
            ctx.invoke(check_cmd)


@main.command("check", epilog="""\b
Examples:
  sudo ascend-doctor check
  ascend-doctor check --only libs,versions -v
  ascend-doctor check --service http://127.0.0.1:8000 --log /var/log/vllm/server.log
  ascend-doctor check --root /mnt/host-image --json > report.json
  ascend-doctor check --bundle host.tar.gz --markdown > issue.md""")
@input_options
@click.option("--only", multiple=True, help="Check ids, id prefixes or tags (comma-separated).")
@click.option("--skip", multiple=True, help="Check ids, id prefixes or tags to leave out.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--text", "as_text", is_flag=True,
              help="The text report on stdout (the default; say it in scripts and aliases).")
@click.option("--junit", type=click.Path(dir_okay=False), default=None,
              help="Also write JUnit XML to this file.")
@click.option("--markdown", is_flag=True, help="An issue body in Markdown on stdout.")
@click.option("--fail-on", type=click.Choice(["fail", "warn"]), default="fail",
              show_default=True, help="Lowest status that makes the exit code 1.")
@click.option("-v", "--verbose", is_flag=True, help="Show passing findings too.")
@click.option("--npd", is_flag=True, help="As a node-problem-detector custom plugin: one "
              "line on stdout, exit 0 OK / 1 problem / 2 unknown (deploy/npd/).")
def check_cmd(only=(), skip=(), as_json=False, as_text=False, junit=None, markdown=False,
              fail_on="fail", verbose=False, npd=False, **kw: Any) -> None:
    """Run the checks and print a report (text unless --json or --markdown)."""
    if sum((as_json, as_text, markdown, npd)) > 1:
        raise UsageError(T("choose one of --json, --text, --markdown, --npd"))
    host = open_host(kw.get("root"), kw.get("bundle"))
    options = _with_bundle_options(host, build_options(kw), click.get_current_context())
    report = run_report(host, options, _split(only), _split(skip), kw.get("timeout"),
                        progress=not (as_json or npd))
    if npd:
        from .npd import npd_result
        code, line = npd_result(report, fail_on)
        click.echo(line)
        sys.exit(code)
    emit(report, as_json=as_json, junit=junit, markdown=markdown, lang=options.lang,
         verbose=verbose)
    sys.exit(max(report.exit_code(fail_on), 1 if unreadable_inputs(report, options) else 0))


def unreadable_inputs(report, options) -> list[str]:
    """The user-named inputs an ``error`` finding says could not be read: the run asked for
    an analysis it did not do, so it must not exit 0."""
    from .model import Status

    named = {f"{flag} {p}" for flag, p in (("--pcap", options.pcap),
                                           ("--profile", options.profile_dir),
                                           ("--block-audit", options.block_audit)) if p}
    logs, elfs = set(options.logs), set(options.elf_paths)
    out = []
    for _r, f in report.findings():
        if f.status != Status.ERROR:
            continue
        ev = f.evidence if isinstance(f.evidence, dict) else {}
        src, path = str(ev.get("source", "")), ev.get("path")
        if src in named or (path in logs):
            out.append(src or str(path))
        elif ev.get("target") in elfs:  # libacl.resolve: an --elf file it could not read
            out.append(f"--elf {ev['target']}")
    return out


@main.command("list", epilog="""\b
Examples:
  ascend-doctor list
  ascend-doctor list --json | jq -r '.checks[].id'""")
@click.option("--json", "as_json", is_flag=True, help="Checks and plugins as one JSON document.")
def list_cmd(as_json: bool) -> None:
    """List the checks: id, category, tags, title (plugins listed without importing them)."""
    from .registry import Registry

    reg = Registry.discover()
    rows = [{"id": s.id, "title": s.title, "category": s.category.value, "tags": list(s.tags),
             "origin": s.origin} for s in sorted(reg.checks.values(), key=lambda s: s.id)]
    plugins = [{"name": p.name, "module": p.value} for p in reg.plugins]
    if as_json:
        import json
        click.echo(json.dumps({"checks": rows, "plugins": plugins}, indent=2))
        return
    lang = default_lang()
    width = max((len(r["id"]) for r in rows), default=10)
    for r in rows:
        click.echo(f"{r['id']:<{width}}  {r['category']:<11} {tr(r['title'], lang)}"
                   + (f"  [{', '.join(r['tags'])}]" if r["tags"] else ""))
    for p in plugins:
        click.echo(tt(lang, "plugin {name} ({module}, loaded when a run starts)",
                      name=p["name"], module=p["module"]))


def default_bundle_name(hostname: str, now: float | None = None) -> str:
    """ascend-doctor-<host>-<UTC time>.tar.gz, as sos names its archives."""
    import re
    import time

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", hostname or "host").strip("-.")[:64] or "host"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"ascend-doctor-{safe}-{stamp}.tar.gz"


@main.command("collect")
@input_options
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Bundle file to write [default: ./ascend-doctor-<host>-<UTC time>.tar.gz].")
@click.option("--only", multiple=True, help="Check ids, id prefixes or tags to collect for.")
@click.option("--skip", multiple=True, help="Check ids, id prefixes or tags to leave out.")
def collect_cmd(output: str | None, only=(), skip=(), **kw: Any) -> None:
    """Record every source the checks read into a bundle (secrets redacted).

    \b
    Examples:
      ascend-doctor collect
      ascend-doctor collect -o host.tar.gz --service http://127.0.0.1:8000 --log server.log
      ascend-doctor check --bundle host.tar.gz      # the same findings, offline
    """
    import hashlib

    from .bundle import RecordingHost

    if kw.get("bundle"):
        raise UsageError(T("collect reads a live host or a sysroot, not a bundle"))
    inner = open_host(kw.get("root"), None)
    rec = RecordingHost(inner)
    options = build_options(kw)
    report = run_report(rec, options, _split(only), _split(skip), kw.get("timeout"))
    data = rec.finish(inner.kind, options.public(), report)
    if output is None:
        output = default_bundle_name(str(data.manifest.get("host", {}).get("hostname", "")
                                         if isinstance(data.manifest.get("host"), dict) else ""))
    try:
        data.write(output)
        sha = hashlib.sha256()
        with open(output, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                sha.update(chunk)
        digest = sha.hexdigest()
        size = os.path.getsize(output)
    except OSError as exc:
        raise DoctorError(T("cannot write bundle {path}: {reason}", path=output,
                              reason=str(exc.strerror or exc))) from None
    n = sum(len(t) for t in data.index.values())
    lang = options.lang
    click.echo(tt(lang, "wrote {output}: {n} answers, {blobs} blobs, {failed} sources that "
                  "could not be read", output=output, n=n, blobs=len(data.blobs),
                  failed=len(rec.failures)), err=True)
    click.echo(tt(lang, "size {size} bytes, sha256 {digest}", size=size, digest=digest),
               err=True)
    click.echo(tt(lang, "secrets in environments, argv and files are redacted; attach the file "
                  "to the issue or ticket, and check it offline with: {command}",
                  command="ascend-doctor check --bundle " + shlex.quote(output)), err=True)
    bad = unreadable_inputs(report, options)
    if bad:  # the bundle lacks an analysis the user asked for: not a success
        named = ", ".join(bad[:4]) + (tt(lang, " and {n} more", n=len(bad) - 4)
                                      if len(bad) > 4 else "")
        click.echo(tt(lang, "ascend-doctor: could not read {inputs} (see the error findings; "
                      "the bundle was written without them)", inputs=named), err=True)
        sys.exit(1)


@main.command("demo", epilog="""\b
Examples:
  ascend-doctor demo               # the TUI on a terminal
  ascend-doctor demo --text --lang zh
  ascend-doctor demo --export demo.tar.gz && ascend-doctor check --bundle demo.tar.gz""")
@click.option("--json", "as_json", is_flag=True, help="The demo report as JSON.")
@click.option("--markdown", is_flag=True, help="The demo report as a Markdown issue body.")
@click.option("--text", "as_text", is_flag=True, help="The text report even on a terminal.")
@click.option("--export", type=click.Path(dir_okay=False), default=None,
              help="Write the demo scenario bundle to FILE (for `check --bundle`).")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
              help="Language of explanations [default: from LANG].")
@click.option("--only", multiple=True, help="Check ids, id prefixes or tags (comma-separated).")
@click.option("--skip", multiple=True, help="Check ids, id prefixes or tags to leave out.")
@click.option("-v", "--verbose", is_flag=True, help="Show every problem in full, passes and skips.")
def demo_cmd(as_json: bool, markdown: bool, as_text: bool, export: str | None, lang: str | None,
             only=(), skip=(), verbose: bool = False) -> None:
    """Diagnose the bundled broken 8x910B host (exits 0: showing failures is its job)."""
    from .demo import demo_bundle_bytes

    if export:
        from .atomic import atomic_write
        atomic_write(export, demo_bundle_bytes(), mode=0o644)
        click.echo(tt(lang or default_lang(), "wrote the demo bundle to {path}", path=export),
                   err=True)
        return
    from .bundle import BundleHost
    from .demo import demo_bundle_data

    data = demo_bundle_data()
    # the scenario names its recorded inputs (capture, profile, audit log) in the manifest
    inputs = data.manifest.get("options", {}).get("demo_inputs", {})
    options = build_options({"lang": lang, "service_url": None,
                             **{k: v for k, v in inputs.items()
                                if k in ("pcap", "profile_dir", "block_audit")}})
    if not (as_json or markdown or as_text) and sys.stdout.isatty() and sys.stdin.isatty():
        _launch_tui(demo=True, options=options)
        return
    report = run_report(BundleHost(data), options, _split(only), _split(skip), None,
                        context="demo")
    emit(report, as_json=as_json, junit=None, markdown=markdown, lang=options.lang,
         verbose=verbose)


@main.command("tui", epilog="""\b
Examples:
  sudo ascend-doctor tui
  ascend-doctor tui --bundle host.tar.gz
  ascend-doctor tui --service http://127.0.0.1:8000 --timeout 30""")
@input_options
def tui_cmd(**kw: Any) -> None:
    """The interactive dashboard."""
    _launch_tui(demo=False, options=build_options(kw), root=kw.get("root"),
                bundle=kw.get("bundle"), timeout=kw.get("timeout"))


def _launch_tui(demo: bool, options, root: str | None = None, bundle: str | None = None,
                timeout: float | None = None) -> None:
    try:
        from .tui import run_tui
    except ImportError as exc:
        _die(tt(options.lang, "the TUI is unavailable ({reason}); use `check` or `demo --text`",
                reason=exc))
    run_tui(demo=demo, options=options, root=root, bundle=bundle, timeout=timeout)


if __name__ == "__main__":  # pragma: no cover
    main()
