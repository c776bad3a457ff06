"""The Textual TUI. The only package that imports textual; it holds no check logic."""

from __future__ import annotations


def run_tui(demo: bool, options, root: str | None = None, bundle: str | None = None,
            timeout: float | None = None) -> None:
    """Run the dashboard; ``timeout`` is the per-check timeout of every run (`--timeout`)."""
    from .app import DoctorApp

    DoctorApp(demo=demo, options=options, root=root, bundle=bundle, timeout=timeout).run()
