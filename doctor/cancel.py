"""Per-check cancellation: how an abandoned check's work on the machine is stopped.

The engine gives every check a ``CancelToken`` and binds it to the check's thread; when the
check runs past its timeout the engine cancels the token. The engine knows nothing about what
the check was doing: whatever holds machine resources (``run_capped``'s subprocess group, a
``LiveHost.sleep``) registers an ``on_cancel`` callback or asks ``current()`` and stops. Code
that runs outside any check (CLI helpers, tests) has no token and is never cancelled.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from .errors import DoctorError


class Cancelled(DoctorError):
    """The check this thread works for was abandoned; its work must stop, not be reported.

    Deliberately not a SourceError: a check that catches missing/unreadable sources to carry
    on must not carry on after its run was abandoned.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"cancelled: {reason}")
        self.reason = reason


class CancelToken:
    """Set once; runs its callbacks exactly once each, on the cancelling thread."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.reason = ""
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str) -> None:
        """Cancel and run every registered callback now (they kill, so this returns after)."""
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for cb in callbacks:
            try:
                cb()
            except Exception:
                pass  # one failing cleanup must not keep the others from running

    def on_cancel(self, cb: Callable[[], None]) -> Callable[[], None]:
        """Register ``cb``; returns the function that unregisters it. Already cancelled: run now."""
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = cb

                def remove() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)
                return remove
        cb()
        return lambda: None

    def check(self) -> None:
        """Raise ``Cancelled`` if cancelled (call before starting new work)."""
        if self._event.is_set():
            raise Cancelled(self.reason)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as the token is cancelled."""
        return self._event.wait(seconds)


_local = threading.local()


def current() -> CancelToken | None:
    """The token bound to this thread, if it works for a check."""
    return getattr(_local, "token", None)


@contextmanager
def bound(token: CancelToken) -> Iterator[CancelToken]:
    """Bind ``token`` to this thread for the duration (the engine wraps each check in it)."""
    previous = current()
    _local.token = token
    try:
        yield token
    finally:
        _local.token = previous
