"""Messages from the worker threads to the UI (posted thread-safely; stale runs dropped by id)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from ..model import CheckResult, HostInfo, Report


class RunStarted(Message):
    def __init__(self, run_id: int, specs: list[Any], host: HostInfo, context: str) -> None:
        super().__init__()
        self.run_id, self.specs, self.host, self.context = run_id, specs, host, context


class CheckFinished(Message):
    def __init__(self, run_id: int, result: CheckResult) -> None:
        super().__init__()
        self.run_id, self.result = run_id, result


class RunFinished(Message):
    def __init__(self, run_id: int, report: Report | None, error: str | None = None) -> None:
        super().__init__()
        self.run_id, self.report, self.error = run_id, report, error


class LiveUpdate(Message):
    """A refresh of the live panel (coalesced: only the newest one matters)."""

    def __init__(self, poll: Any) -> None:
        super().__init__()
        self.poll = poll

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LiveUpdate) and not self.poll.recorded
