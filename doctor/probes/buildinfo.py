"""``vllm_ascend/_build_info.py``: the chip family the installed vllm-ascend was built for.

Read as text through the Host at the package's location (never imported): a line
``__device_type__ = 'A2'`` (A2, A3, 310P, …; facts/observed-wheels.md).
"""

from __future__ import annotations

import posixpath
import re

from ..errors import ParseError, SourceMissing
from ..i18n import T
from ..host import Host
from dataclasses import dataclass
from ..registry import provider
from .packages import Packages

_DEVICE = re.compile(r"""^__device_type__\s*(?::\s*\w+\s*)?=\s*['"]([^'"]*)['"]""", re.MULTILINE)


@dataclass(frozen=True, eq=False)
class VllmAscendBuild:
    """The chip vllm-ascend was built for (``__device_type__`` in its _build_info.py)."""

    path: str
    device_type: str


def parse_build_info(text: str, source: str = "_build_info.py") -> str:
    m = _DEVICE.search(text)
    if not m or not m.group(1).strip():
        raise ParseError(source, T("no `__device_type__ = '<chip>'` line"))
    return m.group(1).strip()


@provider
def gather_build_info(host: Host, pkgs: Packages) -> VllmAscendBuild:
    pkg = pkgs.get("vllm-ascend")
    if pkg is None:
        raise SourceMissing("vllm-ascend", T("not installed ({source})", source=pkgs.source))
    if not pkg.location:
        raise SourceMissing("vllm_ascend/_build_info.py", T("the package location is unknown"))
    path = posixpath.join(pkg.location, "vllm_ascend", "_build_info.py")
    return VllmAscendBuild(path, parse_build_info(host.read_text(path, 65536), path))
