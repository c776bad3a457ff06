"""Is there an Ascend stack on this host at all? A driver, a CANN toolkit, a device node or
a vLLM service. When none is there, the checks that need one skip naming that single
absence (and the report says so in its first line) instead of failing one by one."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceMissing
from ..host import Host
from ..registry import provider
from .procs import ServiceProcesses

NO_STACK_SOURCE = "Ascend stack"  # the SourceMissing source the report recognises
DRIVER_DIRS = ("/usr/local/Ascend/driver",)
CANN_DIRS = ("/usr/local/Ascend/ascend-toolkit", "/usr/local/Ascend/cann",
             "/usr/local/Ascend/nnae", "/usr/local/Ascend/nnrt")
DEVICE_GLOBS = ("/dev/davinci*",)


@dataclass(frozen=True)
class AscendStack:
    """What of an Ascend stack exists (paths found; empty when absent)."""

    driver: tuple[str, ...] = ()
    cann: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    service_pid: int | None = None

    @property
    def absent(self) -> bool:
        return not (self.driver or self.cann or self.devices or self.service_pid)

    def require(self) -> None:
        """Skip the calling check (SourceMissing) when there is no Ascend stack at all."""
        if self.absent:
            raise SourceMissing(NO_STACK_SOURCE, "no driver, no CANN toolkit, no device node, "
                                "no vLLM service")


@provider
def gather_ascend_stack(host: Host, procs: ServiceProcesses | None) -> AscendStack:
    driver = tuple(d for d in DRIVER_DIRS if host.is_dir(d))
    cann = tuple(d for d in CANN_DIRS if host.is_dir(d))
    devices: list[str] = []
    for pattern in DEVICE_GLOBS:
        devices += host.glob(pattern)
    pid = procs.primary.pid if procs is not None and procs.primary is not None else None
    return AscendStack(driver, cann, tuple(sorted(devices)), pid)
