"""``python -c "import torch_npu"`` in the service's interpreter and environment.

Importing torch_npu loads CANN (libhccl.so, libascendcl.so, …) and the driver; it is the
shortest honest test that the stack links. It runs in a subprocess with a timeout (an import
that hangs on a busy device must not hang the doctor), never in our own process.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SourceMissing
from ..host import Host
from ..options import RunOptions
from ..registry import provider
from .procs import ServiceEnv, ServiceProcesses

IMPORT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class TorchNpuImport:
    interpreter: str
    interpreter_source: str
    env_source: str
    returncode: int | None
    timed_out: bool
    duration_s: float
    output: str  # stderr (else stdout), tail

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def last_line(self) -> str:
        lines = [ln for ln in self.output.strip().splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""


def pick_interpreter(procs: ServiceProcesses | None, options: RunOptions) -> tuple[str, str]:
    """--python when given (the user named it), else the vLLM server's, else python3."""
    if options.python:
        return options.python, "--python"
    if procs is not None and procs.primary is not None and procs.primary.interpreter:
        return procs.primary.interpreter, f"the vLLM server's interpreter (pid {procs.primary.pid})"
    return "python3", "python3 on PATH (no vLLM server running, no --python)"


@provider
def gather_torch_import(host: Host, options: RunOptions, procs: ServiceProcesses | None,
                        env: ServiceEnv | None) -> TorchNpuImport:
    python, why = pick_interpreter(procs, options)
    if host.which(python) is None:
        raise SourceMissing(python, f"interpreter not found ({why})")
    environ = env.env if env is not None else host.environ()
    res = host.run([python, "-c", "import torch_npu"], timeout=IMPORT_TIMEOUT_S,
                   cap=256 * 1024, env=environ)
    out = (res.stderr or res.stdout).decode("utf-8", "replace")
    return TorchNpuImport(python, why, env.source if env else "the doctor's own environment",
                          res.returncode, res.timed_out, res.duration_s, out[-8000:])
