"""The live panel (k9s-style): sparklines of the service's load and the NPUs' state."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Label, Sparkline

from ..livefeed import LiveSeries, describe, hbm_percent

CELLS = (("running", "running"), ("waiting", "waiting"), ("kv", "KV cache"),
         ("preempt", "preemptions"), ("p99", "P99 e2e"), ("temp", "NPU max"),
         ("hbm", "HBM"))


class LiveCell(Vertical):
    def __init__(self, key: str, label: str) -> None:
        super().__init__(id=f"live-{key}", classes="live-cell")
        self.key, self.label = key, label

    def compose(self) -> ComposeResult:
        yield Label(f"{self.label} –", classes="live-label")
        yield Sparkline([], classes="live-spark")

    def show(self, value: str, data: list[float]) -> None:
        self.query_one(Label).update(f"{self.label} {value}")
        self.query_one(Sparkline).data = data


class LivePanel(Vertical):
    """Shows a LiveSeries; the title says where the numbers come from."""

    def compose(self) -> ComposeResult:
        yield Label("", id="live-status")
        with Grid(id="live-grid"):
            for key, label in CELLS:
                yield LiveCell(key, label)

    def on_mount(self) -> None:
        self.border_title = "Live"
        self.query_one("#live-status", Label).update("waiting for the first sample…")
        self.query_one("#live-grid").display = False

    def show_series(self, series: LiveSeries, source: str, errors: list[str]) -> None:
        self.border_title = f"Live — {source}"
        status = self.query_one("#live-status", Label)
        if series.empty:
            status.update("no service metrics: " + ("; ".join(errors) or "nothing read yet"))
            status.display = True
            self.query_one("#live-grid").display = False
            return
        status.display = bool(errors)
        status.update("; ".join(errors))
        self.query_one("#live-grid").display = True
        text = describe(series)
        per_npu_temp = [r.temp_c or 0.0 for r in series.npus]
        data = {"running": list(series.running), "waiting": list(series.waiting),
                "kv": list(series.kv), "preempt": list(series.preempt), "p99": list(series.p99),
                "temp": per_npu_temp, "hbm": hbm_percent(series.npus)}
        for key, _ in CELLS:
            self.query_one(f"#live-{key}", LiveCell).show(text[key], data[key])
