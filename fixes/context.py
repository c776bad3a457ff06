"""What a recipe sees: a Host to read through, where writes land, and the run's facts."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from ascend_doctor.errors import SourceError, SourceMissing
from ascend_doctor.host import Host, norm
from ascend_doctor.options import RunOptions
from dataclasses import dataclass, field


@dataclass
class FixContext:
    """``write_root`` is "/" (this machine), a sysroot, or a bundle's overlay directory."""

    host: Host
    write_root: str
    kind: str = "live"  # live | sysroot | overlay
    options: RunOptions = field(default_factory=RunOptions)
    finding: Any = None  # the Finding that pointed at the recipe, when there is one
    _store: Any = None

    @classmethod
    def for_root(cls, root: str, options: RunOptions | None = None) -> "FixContext":
        from ascend_doctor.host import LiveHost
        root = os.path.abspath(root)
        return cls(LiveHost(root), root, "live" if root == "/" else "sysroot",
                   options or RunOptions())

    @classmethod
    def for_overlay(cls, host: Host, overlay: str, options: RunOptions | None = None
                    ) -> "FixContext":
        return cls(host, os.path.abspath(overlay), "overlay", options or RunOptions())

    # -- reading -----------------------------------------------------------------------
    def read(self, path: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        try:
            return self.host.read_bytes(path)
        except SourceMissing:
            return None

    def mode(self, path: str) -> int | None:
        try:
            return self.host.stat(path).perm
        except (SourceMissing, SourceError):
            return None

    def exists(self, path: str) -> bool:
        return self.host.exists(path)

    def glob(self, pattern: str) -> list[str]:
        return self.host.glob(pattern)

    def fact(self, fact_type: type) -> Any:
        """A fact of this host, computed by its provider (as a check would get it)."""
        if self._store is None:
            from ascend_doctor.facts import FactStore
            from ascend_doctor.registry import Registry
            self._store = FactStore(self.host, self.options, Registry.discover(plugins=False))
        return self._store.get(fact_type)

    # -- writing -----------------------------------------------------------------------
    def resolved(self, path: str) -> str:
        """The host path a write of ``path`` lands on (the host's symlinks resolved).

        The answer is only a name: the write itself walks it component by component under
        ``write_root`` (doctor.confine), so a realpath answer cannot lead out of the target.
        """
        p = norm(path)
        try:
            p = norm(self.host.realpath(p))
        except (SourceMissing, SourceError):
            pass
        return p

    def real_path(self, path: str) -> str:
        """Where a host path is written: symlinks followed inside the root."""
        p = self.resolved(path)
        if self.write_root == "/":
            return p
        return os.path.join(self.write_root, p.lstrip("/"))

    def edit(self, path: str, after: bytes | str, mode: int | None = None, why: str = "",
             names: tuple[str, ...] = ()):
        """A FileEdit from the current content to ``after`` (mode kept unless given);
        ``names``: the host paths the new content names (each must exist, see plan_for)."""
        from .plan import FileEdit
        data = after.encode() if isinstance(after, str) else after
        before = self.read(path)
        before_mode = self.mode(path) if before is not None else None
        want = mode if mode is not None else (before_mode if before_mode is not None else 0o644)
        return FileEdit(norm(path), before, data, before_mode, want, why, tuple(names))


def join_host(*parts: str) -> str:
    return norm(posixpath.join(*parts))
