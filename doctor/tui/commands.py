"""The command palette lists the same actions as the keys, plus "go to check …"."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class DoctorCommands(Provider):
    def _commands(self) -> list[tuple[str, str, object]]:
        app = self.app
        out: list[tuple[str, str, object]] = []
        for action, text, help_ in app.palette_actions():  # type: ignore[attr-defined]
            out.append((text, help_, partial(app.palette_run, action)))  # type: ignore
        for cid, row in sorted(app.state.rows.items()):  # type: ignore[attr-defined]
            fixable = [f for f in row.findings if f.fix is not None and f.status.rank >= 3]
            if fixable:
                out.append((f"Try to fix {cid} ({fixable[0].fix.id})",
                            "plan first, then confirm; undo with u",
                            partial(app.fix_check, cid)))  # type: ignore[attr-defined]
        for cid in sorted(app.state.rows):  # type: ignore[attr-defined]
            out.append((f"Go to check {cid}", app.state.rows[cid].title,  # type: ignore
                        partial(app.goto_check, cid)))  # type: ignore[attr-defined]
        return out

    async def discover(self) -> Hits:
        for text, help_, cb in self._commands():
            yield DiscoveryHit(text, cb, help=help_)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_, cb in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, help=help_)  # type: ignore
