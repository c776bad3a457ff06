"""What vllm-ascend's collect_env.py prints, gathered through the Host.

Keys follow its SystemEnv fields (gcc, clang, cmake, libc, os, cpu, env vars) so the
Markdown issue body carries at least what maintainers ask for in their issue template.
"""

from __future__ import annotations


from ..errors import SourceError, SourceMissing
from ..host import Host
from dataclasses import dataclass, field
from ..redact import is_secret_name
from ..registry import provider
from .procs import ServiceEnv

ENV_PREFIXES = ("TORCH", "PYTORCH", "ASCEND_", "ATB_", "HCCL_", "VLLM_", "OMP_", "TASK_QUEUE",
                "SOC_VERSION", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH")
# collect_env drops names with these words; we drop them too (and redact the rest)
SECRET_WORDS = ("SECRET", "TOKEN", "API", "ACCESS", "PASSWORD")


@dataclass(frozen=True, eq=False)
class CollectEnv:
    """What torch.utils.collect_env reports that the other facts do not: system, CPU, env."""

    system: dict[str, str] = field(default_factory=dict)  # os, gcc, clang, cmake, libc, kernel
    cpu: str = ""
    env: dict[str, str] = field(default_factory=dict)
    env_source: str = ""


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def filter_env(env: dict[str, str]) -> dict[str, str]:
    """collect_env's filter: relevant prefixes, secrets dropped."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(ENV_PREFIXES)
            and not any(w in k.upper() for w in SECRET_WORDS) and not is_secret_name(k)}


def _cmd_line(host: Host, argv: list[str]) -> str:
    try:
        res = host.run(argv, timeout=5.0, cap=256 * 1024)
    except (SourceMissing, SourceError) as exc:
        return f"Could not collect ({exc.reason})"
    return first_line(res.text) if res.ok else f"Could not collect ({res.describe_failure()})"


@provider
def gather_collect_env(host: Host, env: ServiceEnv) -> CollectEnv:
    info = host.info()
    system = {"os": info.os or "unknown", "kernel": info.kernel, "arch": info.arch,
              "gcc": _cmd_line(host, ["gcc", "--version"]),
              "clang": _cmd_line(host, ["clang", "--version"]),
              "cmake": _cmd_line(host, ["cmake", "--version"]),
              "libc": _cmd_line(host, ["ldd", "--version"])}
    try:
        res = host.run(["lscpu"], timeout=5.0, cap=256 * 1024)
        cpu = res.text.strip() if res.ok else res.describe_failure()
    except (SourceMissing, SourceError) as exc:
        cpu = f"Could not collect ({exc.reason})"
    return CollectEnv(system, cpu, filter_env(env.env), env.source)
