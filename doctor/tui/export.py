"""Export from the TUI: the same JSON and Markdown the CLI prints, and a bundle.

A bundle is the demo scenario's bytes in the demo, the opened bundle's bytes for a bundle,
and a fresh recording (the `collect` path: RecordingHost around the live host) otherwise.
No textual here.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..atomic import atomic_write
from ..model import Report


def _name(report: Report, suffix: str) -> str:
    host = re.sub(r"[^A-Za-z0-9_.-]+", "_", report.host.hostname or "host")
    return f"ascend-doctor-{host}{suffix}"


def export_json(report: Report, directory: str, lang: str) -> str:
    from ascend_doctor.knowledge import load
    from ..report import jsonreport

    kb = load()
    ids = {k for _, f in report.findings() for k in f.kb}
    path = os.path.join(directory, _name(report, ".json"))
    atomic_write(path, jsonreport.render(report, kb.titles(ids, lang), kb, lang).encode(),
                 mode=0o644)
    return path


def export_markdown(report: Report, directory: str, lang: str) -> str:
    from ascend_doctor.knowledge import load
    from ..report import markdown

    path = os.path.join(directory, _name(report, ".md"))
    atomic_write(path, markdown.render(report, load(), lang).encode(), mode=0o644)
    return path


def export_bundle(report: Report, directory: str, *, demo: bool, bundle: str | None,
                  root: str | None, options: Any, registry: Any = None) -> str:
    path = os.path.join(directory, _name(report, "-bundle.tar.gz"))
    if demo:
        from ..demo import demo_bundle_bytes
        atomic_write(path, demo_bundle_bytes(), mode=0o644)
        return path
    if bundle:
        with open(bundle, "rb") as fh:
            atomic_write(path, fh.read(), mode=0o644)
        return path
    from ..bundle import RecordingHost
    from ..engine import RunConfig, run
    from ..host import LiveHost

    inner = LiveHost(root or "/")
    rec = RecordingHost(inner)
    rep = run(rec, options, registry, RunConfig())
    data = rec.finish(inner.kind, options.public(), rep)
    data.write(path)
    return path
