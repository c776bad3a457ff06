"""The pids the host lists, as a fact read once per run (argv trimming: doctor/proctable.py).

npu.processes compares npu-smi's pids with it; keeping the read here keeps that check a
pure rule over facts (testable with a ProcessTable built by hand).
"""

from __future__ import annotations


from ..errors import SourceError, SourceMissing, describe
from ..host import Host
from dataclasses import dataclass
from ..registry import provider


@dataclass(frozen=True, eq=False)
class ProcessTable:
    """Pids of the processes the host (or the bundle's recorded /proc) lists."""

    pids: frozenset[int]
    error: str | None = None  # why the table could not be read (then ``pids`` is empty)


@provider
def gather_process_table(host: Host) -> ProcessTable:
    """Never fails: a check that needs no table (nothing holds NPU memory) still runs."""
    try:
        return ProcessTable(frozenset(p.pid for p in host.processes()))
    except (SourceMissing, SourceError) as exc:
        return ProcessTable(frozenset(), describe(exc))
