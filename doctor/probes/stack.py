"""Is there an Ascend stack on this host at all? A driver, a CANN toolkit, /usr/local/Ascend,
a device node, an Ascend directory named in ld.so.conf(.d) or a vLLM service. When none is there, the checks that need one skip naming that single
absence (and the report says so in its first line) instead of failing one by one."""

from __future__ import annotations


from ..errors import SourceMissing
from ..i18n import N_, T
from ..host import Host
from dataclasses import dataclass
from ..registry import provider
from .ldconf import LdConfState, LdSoConf
from .procs import ServiceProcesses

NO_STACK_SOURCE = N_("Ascend stack")  # the SourceMissing source the report recognises
ASCEND_ROOT = "/usr/local/Ascend"
DRIVER_DIRS = ("/usr/local/Ascend/driver",)
CANN_DIRS = ("/usr/local/Ascend/ascend-toolkit", "/usr/local/Ascend/cann",
             "/usr/local/Ascend/nnae", "/usr/local/Ascend/nnrt")
DEVICE_GLOBS = ("/dev/davinci*",)


@dataclass(frozen=True, eq=False)
class AscendStack:
    """What of an Ascend stack exists (paths found; empty when absent)."""

    driver: tuple[str, ...] = ()
    cann: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    service_pid: int | None = None
    installed: bool = False  # /usr/local/Ascend exists
    configured: tuple[str, ...] = ()  # Ascend directories named by ld.so.conf files

    @property
    def absent(self) -> bool:
        return not (self.driver or self.cann or self.devices or self.service_pid
                    or self.installed or self.configured)

    def require(self) -> None:
        """Skip the calling check (SourceMissing) when there is no Ascend stack at all."""
        if self.absent:
            raise SourceMissing(NO_STACK_SOURCE, T("no driver, no CANN toolkit, no device node, "
                                                   "no vLLM service"))


@provider
def gather_ascend_stack(host: Host, procs: ServiceProcesses | None, conf: LdSoConf | None,
                        state: LdConfState | None) -> AscendStack:
    driver = tuple(d for d in DRIVER_DIRS if host.is_dir(d))
    cann = tuple(d for d in CANN_DIRS if host.is_dir(d))
    devices: list[str] = []
    for pattern in DEVICE_GLOBS:
        devices += host.glob(pattern)
    pid = procs.primary.pid if procs is not None and procs.primary is not None else None
    named = list(conf.dirs if conf is not None else ())
    for u in (state.unreached if state is not None else ()):
        named += u.ascend_dirs
    configured = tuple(dict.fromkeys(d for d in named if "/Ascend/" in d + "/"))
    return AscendStack(driver, cann, tuple(sorted(devices)), pid, host.is_dir(ASCEND_ROOT),
                       configured)
