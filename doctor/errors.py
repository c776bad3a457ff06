"""Exceptions that carry meaning for the engine (skip vs error) and the CLI (exit 2)."""

from __future__ import annotations

from .i18n import T


class DoctorError(Exception):
    """Base class for errors the doctor reports in words, never as a traceback."""


class SourceMissing(DoctorError):
    """A source (file, command, endpoint, process) is absent: the check is skipped.

    ``source`` names what was looked for, ``reason`` says why it is not there.
    """

    def __init__(self, source: str, reason: str = "not found") -> None:
        super().__init__(T("{source}: {reason}", source=source, reason=reason))
        self.source = source
        self.reason = reason


class SourceError(DoctorError):
    """A source exists but could not be read (permission denied, I/O error, timeout)."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(T("{source}: {reason}", source=source, reason=reason))
        self.source = source
        self.reason = reason


class ParseError(SourceError):
    """A source was read but its content is not in the expected format."""


class UsageError(DoctorError):
    """The user asked for something that cannot be done (unknown check id, bad flag)."""


class BundleError(DoctorError):
    """A bundle cannot be opened: corrupt, truncated or not a bundle at all."""


def describe(exc: BaseException) -> str:
    """The exception's message, kept translatable when it was built with T() (``str(exc)``
    is always the English text)."""
    arg = exc.args[0] if len(exc.args) == 1 else None
    return arg if isinstance(arg, str) and arg else (str(exc) or type(exc).__name__)
