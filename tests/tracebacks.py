"""Traceback frames built from paths, for the tests of knowledge/owner.py and its users."""

from __future__ import annotations

from ascend_doctor.knowledge import owner


def frames(*paths: str) -> list[owner.Frame]:
    """One parsed ``File "...", line 10, in fn`` frame per path, as a traceback prints it."""
    out = []
    for p in paths:
        f = owner.frame_of(f'  File "{p}", line 10, in fn')
        assert f is not None, p
        out.append(f)
    return out
