"""Fixtures the unit tests of the user caches share."""

from __future__ import annotations

import pytest


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    """A private (0700) ``XDG_CACHE_HOME`` for this test, the caches switched on."""
    base = tmp_path / "xdg"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    monkeypatch.delenv("ASCEND_DOCTOR_CACHE", raising=False)
    return base
