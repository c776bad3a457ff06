"""Placeholder dashboard until the TUI issue lands: runs the engine in a worker thread and
lists the results. (Replaced by the full app.)"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Footer, Header


class DoctorApp(App):
    BINDINGS = [("q", "quit", "Quit")]

    def __init__(self, demo: bool, options, root=None, bundle=None) -> None:
        super().__init__()
        self.demo, self.options, self.root, self.bundle = demo, options, root, bundle

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="results")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("status", "check", "message")
        self.run_worker(self._run, thread=True)

    def _run(self) -> None:
        from ..cli import demo_host, open_host
        from ..engine import RunConfig, run

        host = demo_host() if self.demo else open_host(self.root, self.bundle)
        report = run(host, self.options, config=RunConfig(context="demo" if self.demo else None))
        self.call_from_thread(self._show, report)

    def _show(self, report) -> None:
        table = self.query_one(DataTable)
        for r in report.results:
            table.add_row(r.status.value, r.check_id, r.findings[0].message)
