"""Is there an Ascend stack on this host at all? A driver, a CANN toolkit, /usr/local/Ascend,
a device node, npu-smi, an Ascend directory named in ld.so.conf(.d), or torch_npu /
vllm_ascend in the interpreter the run inspects. When none is there, the checks that need one
skip naming that single absence (and the report says so in its first line) instead of
failing one by one.

A vLLM process alone is no Ascend stack: vLLM runs on CPUs and GPUs too, and another
account's server on a build host says nothing about NPUs. Then the one fact is "a vLLM
service runs without an Ascend stack" (its own source, so the verdict can name it), and
the checks about that service (health, metrics, launch flags) still run."""

from __future__ import annotations


from ..errors import SourceMissing
from ..i18n import N_, T
from ..host import Host
from dataclasses import dataclass
from ..registry import provider
from .ldconf import LdConfState, LdSoConf
from ..options import RunOptions
from .packages import SITE_GLOBS, interpreter_sites
from .procs import ServiceProcesses

NO_STACK_SOURCE = N_("Ascend stack")  # the SourceMissing source the report recognises
# the same absence while a vLLM service runs (the verdict names the service)
SERVICE_NO_STACK_SOURCE = N_("Ascend stack of the vLLM service")
NO_STACK_SOURCES = (NO_STACK_SOURCE, SERVICE_NO_STACK_SOURCE)
TOOLS = ("npu-smi",)
PACKAGES = ("torch_npu", "vllm_ascend")
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
    tools: tuple[str, ...] = ()  # npu-smi where found
    packages: tuple[str, ...] = ()  # torch_npu / vllm_ascend in the inspected interpreter
    service_user: str = ""  # the account the vLLM service runs as (for the message)

    @property
    def absent(self) -> bool:
        return not (self.driver or self.cann or self.devices or self.installed
                    or self.configured or self.tools or self.packages)

    @property
    def directories(self) -> bool:
        """Any Ascend directory on this host (something ld.so.conf could name)."""
        return bool(self.driver or self.cann or self.installed)

    def require(self) -> None:
        """Skip the calling check (SourceMissing) when there is no Ascend stack at all."""
        if not self.absent:
            return
        if self.service_pid is not None:
            raise SourceMissing(SERVICE_NO_STACK_SOURCE, T(
                "pid {pid} (user {user}); this host has no driver, no CANN toolkit, no device "
                "node, no npu-smi, and no torch_npu or vllm_ascend in its interpreter",
                pid=self.service_pid, user=self.service_user or "?"))
        raise SourceMissing(NO_STACK_SOURCE, T("no driver, no CANN toolkit, no device node, "
                                               "no npu-smi, no torch_npu, no vLLM service"))


def _ascend_packages(host: Host, options: RunOptions, procs: ServiceProcesses | None
                     ) -> tuple[str, ...]:
    """torch_npu / vllm_ascend in the interpreter the run inspects (--python, else the
    service's), else in the usual system site-packages; read as directories, never run."""
    python = options.python or (procs.primary.interpreter
                                if procs is not None and procs.primary is not None else "")
    if python and "/" not in python:
        python = host.which(python) or ""
    sites = interpreter_sites(host, python)[0] if python.startswith("/") else []
    if not sites:
        sites = [d for g in SITE_GLOBS for d in host.glob(g)]
    return tuple(p for p in PACKAGES if any(host.is_dir(f"{d}/{p}") for d in sites[:32]))


@provider
def gather_ascend_stack(host: Host, options: RunOptions, procs: ServiceProcesses | None,
                        conf: LdSoConf | None, state: LdConfState | None) -> AscendStack:
    driver = tuple(d for d in DRIVER_DIRS if host.is_dir(d))
    cann = tuple(d for d in CANN_DIRS if host.is_dir(d))
    devices: list[str] = []
    for pattern in DEVICE_GLOBS:
        devices += host.glob(pattern)
    primary = procs.primary if procs is not None else None
    pid = primary.pid if primary is not None else None
    named = list(conf.dirs if conf is not None else ())
    for u in (state.unreached if state is not None else ()):
        named += u.ascend_dirs
    configured = tuple(dict.fromkeys(d for d in named if "/Ascend/" in d + "/"))
    tools = tuple(w for w in (host.which(t) for t in TOOLS) if w)
    packages = _ascend_packages(host, options, procs)
    return AscendStack(driver, cann, tuple(sorted(devices)), pid, host.is_dir(ASCEND_ROOT),
                       configured, tools, packages,
                       (primary.user or str(primary.proc.uid)) if primary is not None else "")
