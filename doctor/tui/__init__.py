"""The Textual TUI. The only package that imports textual; it holds no check logic."""

from __future__ import annotations


def run_tui(demo: bool, options, root: str | None = None, bundle: str | None = None) -> None:
    from .app import DoctorApp

    DoctorApp(demo=demo, options=options, root=root, bundle=bundle).run()
