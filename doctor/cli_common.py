"""What every subcommand module shares: exit codes, the input options, RunOptions from them.

It imports no subcommand module, so cli.py can import the subcommand modules (cli_kb, cli_fix,
cli_exporter, cli_fleet) and they can import this without a circle.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import click

EXIT_OK, EXIT_FAIL, EXIT_NO_VERDICT = 0, 1, 2
EXIT_NEW_FAILS = 5  # `fix`: applied and verified, but the change left new fails elsewhere


def _die(message: str, code: int = EXIT_NO_VERDICT) -> None:
    click.echo(f"ascend-doctor: {message}", err=True)
    sys.exit(code)


def default_lang() -> str:
    for var in ("ASCEND_DOCTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        v = os.environ.get(var, "")
        if v:
            return "zh" if v.lower().startswith("zh") else "en"
    return "en"


def input_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The inputs every run takes (check, collect, the TUI)."""
    opts = [
        click.option("--root", type=click.Path(exists=True, file_okay=False),
                     help="Diagnose a sysroot directory instead of this machine."),
        click.option("--bundle", type=click.Path(dir_okay=False),
                     help="Diagnose a bundle written by `collect` (offline)."),
        click.option("--service", "service_url", default=None, metavar="URL",
                     help="vLLM service base URL [default: http://127.0.0.1:8000]."),
        click.option("--npu-exporter", "npu_exporter_url", default=None, metavar="URL",
                     help="Huawei npu-exporter base URL [default: http://127.0.0.1:8082]."),
        click.option("--api-key", envvar="VLLM_API_KEY", default=None, show_envvar=True,
                     help="API key for /v1 endpoints (never printed)."),
        click.option("--pid", type=int, default=None, help="The vLLM server process."),
        click.option("--python", "python", default=None,
                     help="Interpreter whose packages are inspected."),
        click.option("--pcap", type=click.Path(dir_okay=False), default=None,
                     help="Capture (pcap/pcapng) of the load clients' traffic."),
        click.option("--sniff", "sniff_seconds", type=float, default=None, metavar="SECONDS",
                     help="Capture DNS live for SECONDS (root)."),
        click.option("--iface", default=None, help="Interface for --sniff."),
        click.option("--profile", "profile_dir", type=click.Path(file_okay=False), default=None,
                     help="msprof / torch_npu profiler output directory."),
        click.option("--block-audit", type=click.Path(dir_okay=False), default=None,
                     help="Block-table audit log (JSON lines) from the vLLM plugin."),
        click.option("--log", "logs", multiple=True, type=click.Path(dir_okay=False),
                     help="A service log to match against known error signatures."),
        click.option("--elf", "elf_paths", multiple=True,
                     help="An extra ELF file whose libraries must resolve."),
        click.option("--sample-seconds", type=float, default=3.0, show_default=True,
                     help="Sampling window for page-fault rates."),
        click.option("--watch", "watch_seconds", type=float, default=None, metavar="SECONDS",
                     help="Watch NPU memory while idle for SECONDS (leak trend)."),
        click.option("--timeout", type=float, default=None,
                     help="Per-check timeout in seconds; given, it applies to every check, "
                          "also those that declare their own [default: 10, or the check's]."),
        click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
                     help="Language of explanations [default: from LANG]."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _user_path(p: str | None) -> str | None:
    """A file the user named: relative to the current directory, as the shell meant it."""
    return os.path.abspath(p) if p else p


def service_url(text: str | None) -> str | None:
    """``--service`` as the probes use it: an http(s) URL with a host (its path's trailing
    "/" dropped, a query kept for the endpoints). Anything else is a usage error that gives
    the corrected URL in one line: ``127.0.0.1:8000`` would otherwise be asked as a path and
    reported as a service that "does not speak vLLM's HTTP"."""
    from urllib.parse import urlsplit, urlunsplit

    from .errors import UsageError
    from .i18n import T

    if not text:
        return None
    raw = text.strip()
    try:
        parts = urlsplit(raw)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
    except ValueError:
        ok = False
    if not ok:
        scheme = raw.split("://", 1)[0] if "://" in raw else ""
        fixed = "http://" + (raw.split("://", 1)[1] if scheme else raw).lstrip("/")
        raise UsageError(T("--service {url} is not an http(s) URL with a host: write "
                           "--service {fixed}", url=raw, fixed=fixed))
    return urlunsplit((parts.scheme.lower(), parts.netloc, parts.path.rstrip("/"), parts.query,
                       ""))


def build_options(kw: dict[str, Any]):
    from .options import RunOptions

    return RunOptions(
        service_url=service_url(kw.get("service_url")) or "http://127.0.0.1:8000",
        service_url_given=bool(kw.get("service_url")), pid=kw.get("pid"),
        api_key=kw.get("api_key"), pcap=_user_path(kw.get("pcap")),
        sniff_seconds=kw.get("sniff_seconds"),
        iface=kw.get("iface"), profile_dir=_user_path(kw.get("profile_dir")),
        block_audit=_user_path(kw.get("block_audit")),
        logs=tuple(os.path.abspath(p) for p in kw.get("logs") or ()),
        elf_paths=tuple(os.path.abspath(p) for p in kw.get("elf_paths") or ()),
        sample_seconds=kw.get("sample_seconds", 3.0),
        watch_seconds=kw.get("watch_seconds"),
        npu_exporter_url=(kw.get("npu_exporter_url") or "").rstrip("/") or None,
        # a relative interpreter path (.venv/bin/python) means the one under the cwd
        python=(os.path.abspath(kw["python"]) if kw.get("python") and "/" in kw["python"]
                else kw.get("python")),
        lang=kw.get("lang") or default_lang())
