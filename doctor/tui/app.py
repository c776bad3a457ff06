"""DoctorApp: drives the engine in a worker thread and streams results to the dashboard.

The app owns the run state, the actions every key and palette entry maps to, and the fix
flow (through ``fixflow``, never its own fix logic). Workers never block the UI: the engine
runs in a daemon thread that a worker waits on while checking for cancellation, so `q`
quits at once even while a check hangs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.worker import get_current_worker

from ..i18n import tr, tt
from ..model import Status
from . import fixflow
from .commands import DoctorCommands
from .lang import localize_binding, localize_tree
from .livefeed import LiveSeries, Poll, poll_live, probed_url, replay_bundle
from .messages import CheckFinished, LiveUpdate, RunFinished, RunStarted
from .screens.dashboard import DashboardScreen
from .screens.detail import DetailScreen, kb_markdown
from .screens.export import ExportScreen
from .screens.fix import ConfirmScreen, FixPlanScreen, FixResultScreen, FixUnavailableScreen
from .screens.help import HelpScreen, bindings_markdown
from .state import RunState, replace_result

LIVE_INTERVAL = 3.0


class DoctorApp(App):
    TITLE = "ascend-doctor"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {DoctorCommands}
    BINDING_GROUP_TITLE = "ascend-doctor"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave ascend-doctor"),
        Binding("r", "rerun", "Re-run", id="rerun", tooltip="Run every check again"),
        Binding("e", "export", "Export", id="export",
                tooltip="Write the JSON report, a Markdown issue body or a bundle"),
        Binding("l", "language", "zh/en", id="language",
                tooltip="Switch the knowledge base language (zh/en)"),
        Binding("question_mark", "help", "Help", key_display="?", id="help",
                tooltip="Keys, ids and where to start"),
    ]

    def __init__(self, demo: bool = False, options: Any = None, root: str | None = None,
                 bundle: str | None = None, *, registry: Any = None, host: Any = None,
                 only: tuple[str, ...] = (), timeout: float | None = None,
                 live: bool = True, export_dir: str | None = None,
                 host_factory: Callable[[str | None], Any] | None = None) -> None:
        super().__init__()
        from ..options import RunOptions

        self.demo, self.root, self.bundle = demo, root, bundle
        self.options = options or RunOptions()
        self.registry = registry
        self.only = tuple(only)
        self.timeout = timeout
        self.live_enabled = live
        self.export_dir = export_dir or os.getcwd()
        self._given_host = host
        self._host_factory = host_factory
        self.lang = getattr(self.options, "lang", "en") or "en"
        self.state = RunState()
        self.series = LiveSeries()
        self.live_errors: list[str] = []
        # the service the panel polls: the one --service names, else the one the checks
        # found and probed (service.health), known once that check has run
        self.live_url: str | None = (self.options.service_url
                                     if getattr(self.options, "service_url_given", False)
                                     else None)
        self.overlay: str | None = None
        self._own_overlay = False
        self.journal: list[tuple[str, str]] = []  # (journal id, check id), newest last
        self._affects: dict[str, tuple[str, ...]] = {}  # journal id -> checks it re-runs
        self._run_counter = 0
        self._error: str | None = None
        self.last_export: str | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def on_mount(self) -> None:
        localize_tree(self, self.lang)
        self.push_screen(DashboardScreen())
        self.action_rerun()
        if self.live_enabled:
            self.set_timer(0.2, self._live_tick)

    def on_unmount(self) -> None:
        if self._own_overlay and self.overlay:
            shutil.rmtree(self.overlay, ignore_errors=True)

    @property
    def context(self) -> str:
        if self.demo:
            return "demo"
        if self.bundle:
            return "bundle"
        return "sysroot" if self.root and self.root != "/" else "live"

    def make_host(self) -> Any:
        """A fresh Host for a run (bundle replay positions must not leak between runs)."""
        if self._host_factory is not None:
            return self._host_factory(self.overlay)
        if self._given_host is not None:
            return self._given_host
        from ..opening import demo_host, open_host

        if self.demo:
            return demo_host(self.overlay)
        if self.bundle:
            return open_host(None, self.bundle, self.overlay)
        return open_host(self.root, None)

    def get_registry(self) -> Any:
        if self.registry is None:
            from ..registry import Registry

            reg = Registry.discover()
            reg.load_plugins()
            self.registry = reg
        return self.registry

    @property
    def dashboard(self) -> DashboardScreen | None:
        for s in self.screen_stack:
            if isinstance(s, DashboardScreen):
                return s
        return None

    # -- the run -----------------------------------------------------------------------
    def action_rerun(self) -> None:
        self._run_counter += 1
        self.state.finished = False
        self._run_engine(self._run_counter)

    @work(thread=True, exclusive=True, group="checks", exit_on_error=False)
    def _run_engine(self, run_id: int) -> None:
        from ..engine import RunConfig, run

        worker = get_current_worker()
        try:
            host = self.make_host()
            registry = self.get_registry()
            specs = registry.select(self.only, ())
            self.post_message(RunStarted(run_id, specs, host.info(), self.context))
        except Exception as exc:
            self.post_message(RunFinished(run_id, None, f"cannot start the run: {exc}"))
            return
        box: dict[str, Any] = {}
        # an explicit --timeout wins over a check's own budget, as in `check`
        config = RunConfig(self.only, (), self.timeout or 10.0, context=self.context,
                           override=self.timeout is not None)

        def target() -> None:
            try:
                box["report"] = run(host, self.options, registry, config,
                                    on_result=lambda r: self.post_message(CheckFinished(run_id, r)))
            except Exception as exc:  # the engine never should; say so if it does
                box["error"] = f"the run failed: {type(exc).__name__}: {exc}"

        t = threading.Thread(target=target, name=f"doctor-run-{run_id}", daemon=True)
        t.start()
        while t.is_alive():
            t.join(0.1)
            if worker.is_cancelled:
                return
        self.post_message(RunFinished(run_id, box.get("report"), box.get("error")))

    def on_run_started(self, m: RunStarted) -> None:
        if m.run_id != self._run_counter:
            return
        self._error = None
        self.state.start(m.specs, m.run_id)
        self.state.host, self.state.context = m.host, m.context
        self.state.mark_running(self.state.rows)
        self.sub_title = f"{m.host.hostname} · {m.context}"
        self._refresh()

    def on_check_finished(self, m: CheckFinished) -> None:
        if m.run_id != self._run_counter:
            return
        self.state.add(m.result)
        self._learn_live_url([m.result])
        self._refresh()
        self._follow_detail(m.result.check_id)

    def on_run_finished(self, m: RunFinished) -> None:
        if m.run_id != self._run_counter:
            return
        if m.report is not None:
            for r in m.report.results:
                self.state.add(r)
            self.state.report = m.report
            self._learn_live_url(m.report.results)
        self.state.finished = True
        self._error = m.error
        self._refresh()

    def _refresh(self) -> None:
        dash = self.dashboard
        if dash is not None and dash.is_mounted:
            try:
                dash.refresh_state(self._error)
            except NoMatches:  # the app is shutting down
                pass

    @property
    def run_complete(self) -> bool:
        return self.state.finished

    # -- live panel --------------------------------------------------------------------
    def _learn_live_url(self, results) -> None:
        if getattr(self.options, "service_url_given", False):
            return  # named: what the user names wins
        url = probed_url(results)
        if url and url != self.live_url:
            self.live_url = url
            self.series = LiveSeries()  # another service's history is not this one's

    def _panel_url(self) -> str | None:
        """The URL to poll now: the named or probed one; before the checks have probed any,
        None (the panel waits) — after the run, the checks' own fallback (the default)."""
        if self.live_url:
            return self.live_url
        return self.options.service_url if self.state.finished else None

    def _live_tick(self) -> None:
        self._live_poll()

    @work(thread=True, exclusive=True, group="live", exit_on_error=False)
    def _live_poll(self) -> None:
        url = self._panel_url()
        try:
            if url is None:  # the checks have not found the service yet: nothing to ask
                poll = Poll(errors=["waiting for the checks to find the service"],
                            recorded=False, url=None)
            elif self.demo or self.bundle:
                host = self.make_host()
                data = getattr(host, "data", None)
                poll = replay_bundle(data, url) if data is not None else Poll()
            else:
                # the key goes only to a --service the user named (issue 34), never to
                # whatever listens on the default port
                headers = ({"Authorization": f"Bearer {self.options.api_key}"}
                           if getattr(self.options, "api_key", None)
                           and getattr(self.options, "service_url_given", False) else None)
                poll = poll_live(self.make_host(), url, headers)
        except Exception as exc:
            poll = Poll(errors=[f"live panel: {type(exc).__name__}: {exc}"])
        poll.url = url
        self.post_message(LiveUpdate(poll))

    def on_live_update(self, m: LiveUpdate) -> None:
        p = m.poll
        self.live_errors = list(p.errors)  # what the last poll could not read (shown, kept)
        if p.recorded:
            self.series = LiveSeries()
        for s in p.metrics:
            self.series.add_metrics(s)
        for n in p.npus:
            self.series.add_npus(n)
        from ..redact import redact_text
        shown = redact_text(p.url) if p.url else "service not found yet"
        source = (f"{shown}, recorded in the {self.context}, {len(p.metrics)} samples"
                  if p.recorded else f"{shown}, every {LIVE_INTERVAL:g} s")
        dash = self.dashboard
        if dash is not None and dash.is_mounted:
            from .widgets.live import LivePanel
            try:
                dash.query_one("#live", LivePanel).show_series(self.series, source, p.errors)
            except NoMatches:  # the app is shutting down
                return
        if (not p.recorded or p.url is None) and self.live_enabled:
            # re-armed after each poll; a bundle's recording is replayed once its URL is known
            self.set_timer(LIVE_INTERVAL if p.url else 0.5, self._live_tick)

    # -- navigation --------------------------------------------------------------------
    def selected(self):
        """The (row, finding) the user is on: the detail's, else the dashboard's."""
        if isinstance(self.screen, DetailScreen):
            return self.screen.row, self.screen.finding
        dash = self.dashboard
        return dash.selected_finding() if dash is not None else None

    def action_detail(self) -> None:
        if not isinstance(self.screen, DashboardScreen):
            return
        sel = self.selected()
        if sel is None:
            self.notify(tt(self.lang, "no finding selected (the check has not finished)"),
                        severity="warning")
            return
        self.push_screen(DetailScreen(*sel))

    def action_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()

    def action_language(self) -> None:
        """Switch zh/en: key hints, findings, details and the knowledge base re-render."""
        self.lang = "zh" if self.lang == "en" else "en"
        localize_tree(self, self.lang)
        for s in self.screen_stack:
            localize_tree(s, self.lang)
            if isinstance(s, DetailScreen):
                s.refresh(recompose=True)
            elif isinstance(s, DashboardScreen):
                s.refresh_lang()
        self.refresh_bindings()
        self.notify("语言：中文" if self.lang == "zh" else "Language: English", timeout=2)

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any:
        """Every screen's key hints in the app's language (screens and modals alike)."""
        if not isinstance(screen, str):
            localize_tree(screen, self.lang)
        return super().push_screen(screen, *args, **kwargs)

    def goto_check(self, check_id: str) -> None:
        while len(self.screen_stack) > 2:
            self.pop_screen()
        dash = self.dashboard
        if dash is not None:
            dash.user_moved = True
            dash.query_one("#checks").select_check(check_id)  # type: ignore[attr-defined]

    def fix_check(self, check_id: str) -> None:
        """From the palette: select the check, then the usual fix flow on its worst finding."""
        self.goto_check(check_id)
        self.call_later(self.action_fix)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(bindings_markdown(self.binding_groups(), self.lang)))

    def binding_groups(self) -> list[tuple[str, list[Binding]]]:
        from .screens import export as ex, fix as fx
        from .widgets.checklist import CheckList

        classes = [DoctorApp, DashboardScreen, DetailScreen, CheckList, fx.FixPlanScreen,
                   fx.ConfirmScreen, fx.FixResultScreen, fx.FixUnavailableScreen,
                   ex.ExportScreen, HelpScreen]
        return [(getattr(c, "BINDING_GROUP_TITLE", None) or c.__name__,
                 [b for b in c.BINDINGS if isinstance(b, Binding)]) for c in classes]

    # -- palette -----------------------------------------------------------------------
    def palette_actions(self) -> list[tuple[str, str, str]]:
        """(action, text, help) for the command palette: the same actions as the keys."""
        out = []
        for cls in (DoctorApp, DashboardScreen):
            for b in cls.BINDINGS:
                if isinstance(b, Binding) and b.id not in ("clear-filter",) and (
                        b.id != "undo" or self.journal):
                    lb = localize_binding(b, self.lang)
                    out.append((b.action.removeprefix("app."), lb.description, lb.tooltip))
        return out

    def palette_run(self, action: str) -> None:
        dash = self.dashboard
        if action in ("filter", "worst", "undo") and dash is not None:
            self.call_later(dash.run_action, action)
        else:
            self.call_later(self.run_action, action)

    # -- export ------------------------------------------------------------------------
    def current_report(self):
        """The finished report, or one built from the results streamed so far."""
        from .. import __version__
        from ..model import HostInfo, Report

        if self.state.report is not None:
            return self.state.report
        return Report(__version__, self.state.host or HostInfo(), self.context, "", 0.0,
                      tuple(self.state.results()), self.options.public())

    def action_export(self) -> None:
        if not self.state.finished:
            self.notify(tt(self.lang, "the run is still going: exporting what has finished so "
                                      "far"), severity="warning")

        def chosen(choice: "tuple[str, str] | None") -> None:
            if choice:
                self._export(*choice)

        self.push_screen(ExportScreen(self.export_dir), chosen)

    @work(thread=True, group="export", exit_on_error=False)
    def _export(self, fmt: str, directory: str) -> None:
        from . import export as ex

        report = self.current_report()
        try:
            os.makedirs(directory, exist_ok=True)
            if fmt == "json":
                path = ex.export_json(report, directory, self.lang)
            elif fmt == "markdown":
                path = ex.export_markdown(report, directory, self.lang)
            else:
                path = ex.export_bundle(report, directory, demo=self.demo, bundle=self.bundle,
                                        root=self.root, options=self.options,
                                        registry=self.get_registry())
        except Exception as exc:
            self.call_from_thread(self.notify, f"export failed: {exc}", severity="error")
            return
        self.last_export = path
        self.call_from_thread(self.notify, f"wrote {path}", title="export")

    # -- fixes -------------------------------------------------------------------------
    def fix_root(self) -> str:
        """Where a fix writes: the live root, or an overlay over a bundle or the demo."""
        if self.demo or self.bundle:
            if self.overlay is None:
                self.overlay = tempfile.mkdtemp(prefix="ascend-doctor-overlay-")
                self._own_overlay = True
            return self.overlay
        return self.root or "/"

    def action_fix(self) -> None:
        sel = self.selected()
        if sel is None:
            self.notify(tt(self.lang, "no finding selected"), severity="warning")
            return
        row, finding = sel
        ok, reason = fixflow.availability()
        if finding.fix is None or not ok:
            if finding.fix is None:
                reason = (f"{row.id}: this finding has no automatic fix recipe"
                          if finding.status.rank >= Status.WARN.rank
                          else f"{row.id}: nothing to fix ({finding.status.value})")
            self.push_screen(FixUnavailableScreen(reason, kb_markdown(finding, self.lang)))
            return
        self.fix_root()
        self._build_plan(row.id, finding)

    @work(thread=True, group="fix", exit_on_error=False)
    def _build_plan(self, check_id: str, finding: Any) -> None:
        try:
            plan = fixflow.build(finding.fix, check_id, self.make_host(), self.fix_root(),
                                 overlay=self.context in ("demo", "bundle"),
                                 options=self.options, lang=self.lang)
        except Exception as exc:
            self.call_from_thread(self.notify, f"cannot plan {finding.fix.id}: {exc}",
                                  severity="error")
            return
        self.call_from_thread(self._show_plan, check_id, plan)

    def _show_plan(self, check_id: str, plan: fixflow.PlanView) -> None:
        def planned(go: bool | None) -> None:
            if go:
                risk = f" ({', '.join(plan.risks)})" if plan.risks else ""
                where = f" under {self.fix_root()}" if self.context != "live" else ""
                self.push_screen(ConfirmScreen(f"Apply {plan.recipe_id}{risk}{where}? A backup "
                                               "is journaled so it can be undone."),
                                 lambda yes: self._apply(check_id, plan) if yes else None)

        self.push_screen(FixPlanScreen(plan, check_id), planned)

    @work(thread=True, group="fix", exit_on_error=False)
    def _apply(self, check_id: str, plan: fixflow.PlanView) -> None:
        try:
            applied = fixflow.apply(plan, self.make_host)
        except Exception as exc:
            self.call_from_thread(self.notify, f"{plan.recipe_id} failed: {exc}",
                                  severity="error")
            return
        affects = tuple(getattr(plan.raw, "affects", ()) or ())
        if applied.journal_id:
            self.journal.append((applied.journal_id, check_id))
            self._affects[applied.journal_id] = affects
        state, text = self._verify(check_id, affects)
        v = getattr(applied.raw, "verification", None)
        worse = [r["check"] for r in getattr(v, "regressions", None) or []]
        if worse:  # passed before the fix and fail after it (fixes/apply.regressions)
            text += f"; new fails caused by this fix: {', '.join(worse)}"
        blind = list(getattr(v, "unverifiable", None) or [])
        if blind:  # they read what a skipped command (ldconfig in an overlay) would rebuild
            text += f"; not verifiable here: {', '.join(blind)}"
        self.call_from_thread(self._show_result, check_id, applied, state, text, False)

    def _verify(self, check_id: str, affects: tuple[str, ...] = ()) -> tuple[str, str]:
        """Re-run the originating check, and the checks the recipe affects, against the
        changed host; update the dashboard rows of all of them."""
        from ..engine import RunConfig, run

        registry = self.get_registry()
        words = (check_id, *(w for w in affects if registry._matches_any(w)))
        rep = run(self.make_host(), self.options, registry,
                  RunConfig(only=words, timeout=self.timeout or 10.0,
                            override=self.timeout is not None,
                            context=self.context))
        for other in rep.results:
            if other.check_id != check_id:
                self.call_from_thread(self._replace_result, other)
        result = next((r for r in rep.results if r.check_id == check_id), None)
        if result is None:
            return "skip", f"{check_id} did not run"
        self.call_from_thread(self._replace_result, result)
        worst = max(result.findings, key=lambda f: f.status.rank)
        return result.status.value, f"{check_id} is now {result.status.value}: {worst.message}"

    def _replace_result(self, result: Any) -> None:
        self.refresh_bindings()  # "u Undo" appears or goes with the journal
        self.state.add(result)
        self.state.report = replace_result(self.state.report, result)
        self._refresh()
        self._follow_detail(result.check_id)

    def _follow_detail(self, check_id: str) -> None:
        """An open detail of a re-run check (fix, verify, undo, `r`) shows its new finding."""
        row = self.state.rows.get(check_id)
        for s in self.screen_stack:
            if isinstance(s, DetailScreen) and row is not None and s.row.id == check_id:
                self.call_later(s.show_result, row)

    def _show_result(self, check_id: str, applied: fixflow.Applied, state: str, text: str,
                     undone: bool) -> None:
        def after(choice: str | None) -> None:
            if choice == "undo" and applied.journal_id:
                self._undo(applied.journal_id, check_id)

        self.push_screen(FixResultScreen(applied, state, text, undone), after)

    def action_undo(self) -> None:
        if not self.journal:
            self.notify(tt(self.lang, "no fix was applied in this session"), severity="warning")
            return
        jid, check_id = self.journal[-1]
        self._undo(jid, check_id)

    @work(thread=True, group="fix", exit_on_error=False)
    def _undo(self, journal_id: str, check_id: str) -> None:
        try:
            msg = fixflow.undo(journal_id, self.fix_root())
        except Exception as exc:
            self.call_from_thread(self.notify, f"undo {journal_id} failed: {exc}",
                                  severity="error")
            return
        self.journal = [(j, c) for j, c in self.journal if j != journal_id]
        state, text = self._verify(check_id, self._affects.pop(journal_id, ()))
        self.call_from_thread(self._show_result, check_id,
                              fixflow.Applied(journal_id, msg), state, text, True)
