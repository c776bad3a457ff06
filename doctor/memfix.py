"""Which fix relieves an NPU memory failure, from what the log line and the KB entry know
(core, not fixes/: the logs check asks it too, and must work in a build without fixes).

Pure functions (no Host, no I/O): the logs check asks which recipe a memory signature
points at, `explain` asks what parameters an entry's fix needs, and the launch-flags
recipe asks how to change a flag from the value in use.

Two causes look alike in the log and need different fixes:
* capacity: the allocator's reserved pool is (nearly) all allocated; the request does not
  fit anywhere. vLLM's share (``--gpu-memory-utilization``) or the context
  (``--max-model-len``) must come down (vllm-ascend FAQ; ASC-ACL-002, ASC-LOG-006).
* fragmentation: reserved minus allocated is at least the request: the memory is there but
  split. ``PYTORCH_NPU_ALLOC_CONF=expandable_segments:True`` lets the caching allocator
  grow segments instead (torch_npu's counterpart of PYTORCH_CUDA_ALLOC_CONF).
"""

from __future__ import annotations

import re
from typing import Any

# KB entry -> the launch flag its steps lower (the flag and how, as its steps say)
RELIEF = {
    "ASC-ACL-001": "gpu-memory-utilization",  # peaks under load: leave headroom
    "ASC-ACL-002": "gpu-memory-utilization",  # 207018: lower the share by 0.05-0.1
    "ASC-LOG-004": "gpu-memory-utilization",  # OOM at capacity (fragmentation: env var)
    "ASC-LOG-006": "max-model-len",  # KV cache does not fit: shorten the context
    "ASC-UPS-013": "gpu-memory-utilization",  # 'Tried to allocate' in vLLM's own process
}
# entries whose line is the allocator's own OOM report (its numbers tell the cause)
ALLOCATOR_OOM = ("ASC-LOG-004", "ASC-UPS-013")
# vLLM's default when the flag is absent from the launch line
DEFAULTS = {"gpu-memory-utilization": "0.9"}
UTIL_STEP = 0.05
UTIL_FLOOR = 0.5
ALLOC_VAR = "PYTORCH_NPU_ALLOC_CONF"
ALLOC_VALUE = "expandable_segments:True"

_GIB = {"KiB": 1 / (1024 * 1024), "MiB": 1 / 1024, "GiB": 1.0, "TiB": 1024.0}
_SIZE = r"([\d.]+) ([KMGT]iB)"
_TRIED = re.compile(r"Tried to allocate " + _SIZE)
_ALLOCATED = re.compile(_SIZE + r" already allocated")
_RESERVED = re.compile(_SIZE + r" reserved in total")


def _gib(m: re.Match[str] | None) -> float | None:
    if m is None:
        return None
    try:
        return float(m.group(1)) * _GIB[m.group(2)]
    except (ValueError, KeyError):
        return None


def fragmented(line: str) -> bool | None:
    """Whether an allocator OOM line shows fragmentation (reserved - allocated >= the
    request); None when the line does not carry the three numbers."""
    tried, alloc, reserved = (_gib(r.search(line)) for r in (_TRIED, _ALLOCATED, _RESERVED))
    if tried is None or alloc is None or reserved is None:
        return None
    return reserved - alloc >= tried


def fix_for(entry_id: str, fix: str | None, line: str = "") -> tuple[str | None, dict[str, Any]]:
    """(recipe, params) for a memory entry matched on ``line``; other entries keep ``fix``."""
    if entry_id in ALLOCATOR_OOM and fragmented(line):
        return "service.env", {"var": ALLOC_VAR, "value": ALLOC_VALUE}
    flag = RELIEF.get(entry_id)
    if flag is None:
        return fix, {}
    return "service.launch-flags", {"relieve": flag}


def entry_params(entry_id: str) -> dict[str, Any]:
    """The parameters the fix of a KB entry needs (what `explain` prints with it)."""
    return fix_for(entry_id, None)[1]


def relieved(flag: str, current: str | None) -> tuple[str | None, str]:
    """(new value, how) for ``--flag`` in use at ``current``; (None, why) when no value
    can be computed (the flag is absent and has no default)."""
    cur = current if current is not None else DEFAULTS.get(flag)
    if cur is None:
        return None, f"--{flag} is not on the launch line: its value in use is unknown"
    try:
        if flag == "gpu-memory-utilization":
            new = max(UTIL_FLOOR, round(float(cur) - UTIL_STEP, 2))
            if new >= float(cur):
                return None, f"--{flag} {cur} is already at the floor {UTIL_FLOOR}"
            return f"{new:g}", f"{cur} - {UTIL_STEP}"
        if flag == "max-model-len":
            n = int(cur)
            if n < 2048:
                return None, f"--{flag} {cur} is already short"
            return str(n // 2), f"{cur} / 2"
    except ValueError:
        return None, f"--{flag} {cur} is not a number"
    return None, f"no rule to lower --{flag}"
