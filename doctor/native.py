"""The Python side the optional C scanners share (doctor/_opscan.c for op_summary CSVs,
doctor/_dnsscan.c for pcaps): loading one unless the user ruled it out, the exception for
input it leaves to the Python path, and reading a stream into its reused buffer."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import BinaryIO


class NativeFallback(Exception):
    """The C scanner does not handle this input: read it again with the Python path."""


def load(name: str, env: str) -> ModuleType | None:
    """The extension module ``ascend_doctor.<name>`` when it was built, else None (built
    without a compiler: the Python path gives the same results); ``<env>=python`` rules
    it out, e.g. to compare the two paths."""
    if os.environ.get(env) == "python":
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None


def read_into(raw: BinaryIO, buf: bytearray, at: int, size: int) -> int:
    """Bytes read from ``raw`` into ``buf[at:at + size]`` (0 at the end of the stream);
    ``readinto`` when the stream has it, so the buffer is reused without a copy."""
    size = min(size, len(buf) - at)
    readinto = getattr(raw, "readinto", None)
    if readinto is not None:
        with memoryview(buf) as whole, whole[at:at + size] as part:
            return readinto(part) or 0
    block = raw.read(size) or b""
    buf[at:at + len(block)] = block
    return len(block)
