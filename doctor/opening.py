"""Opening the Host a run reads: this machine, a sysroot, a bundle or the demo scenario.

Core, not a front end: the CLI (doctor/cli.py and its extensions) and the TUI both call it,
so the TUI never imports the CLI. Nothing heavy is imported until a host is opened.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import BundleError, UsageError
from .i18n import T


def open_host(root: str | None, bundle: str | None, overlay: str | None = None) -> Any:
    """The Host for this run: a bundle, a sysroot or this machine.

    ``overlay`` (bundles only) is a directory whose files shadow the bundle's, where a fix
    planned against a bundle writes.
    """
    if root and bundle:
        raise UsageError(T("--root and --bundle exclude each other"))
    if bundle:
        from .bundle import BundleHost
        if not os.path.exists(bundle):
            raise BundleError(T("bundle {path} does not exist", path=bundle))
        return BundleHost.open(bundle, overlay)
    from .host import LiveHost
    if not root:
        return LiveHost("/")
    # In a pod reading the node at --root /host, the node's npu-smi is placed at its own
    # path by the Ascend Docker Runtime (deploy/k8s/daemonset.yaml): run that one.
    tools = tuple(t for t in os.environ.get("ASCEND_DOCTOR_NODE_TOOLS", "").split(",") if t)
    return LiveHost(root, node_tools=tools)


def demo_host(overlay: str | None = None) -> Any:
    """The demo scenario (a broken 8x910B host) replayed, optionally under an overlay."""
    from .bundle import BundleHost
    from .demo import demo_bundle_data
    return BundleHost(demo_bundle_data(), overlay)
