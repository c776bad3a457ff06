"""Version pins: every installed package's own Requires-Dist must hold for what is installed."""

from __future__ import annotations

from typing import Iterator

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from doctor.model import Category, Finding
from doctor.probes.packages import WATCHED, Packages
from doctor.registry import check

# whose pins we hold to account: the serving stack, not every package on the host
PINNED_BY = ("vllm-ascend", "vllm", "torch-npu", "torch", "triton-ascend")


def _marker_env(pkgs: Packages) -> dict[str, str]:
    env = dict(default_environment())
    if pkgs.python:
        env["python_version"] = ".".join(pkgs.python.split(".")[:2])
        env["python_full_version"] = pkgs.python
    env["extra"] = ""
    return env


@check("versions.pins", title="Installed packages satisfy the serving stack's own pins",
       category=Category.VERSIONS, tags=("versions", "packages"))
def pins(pkgs: Packages) -> Iterator[Finding]:
    env = _marker_env(pkgs)
    found = {n: pkgs.version(n) for n in WATCHED if pkgs.version(n)}
    broken = 0
    for owner_name in PINNED_BY:
        owner = pkgs.get(owner_name)
        if owner is None:
            continue
        for raw in owner.requires:
            try:
                req = Requirement(raw)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = pkgs.get(req.name)
            if dep is None:
                if canonicalize_name(req.name) in WATCHED:
                    broken += 1
                    yield Finding.fail(
                        f"{owner.name} {owner.version} requires {req}; {req.name} is not installed",
                        subject=f"{owner.name} {owner.version}",
                        evidence={"requirement": str(req), "installed": None,
                                  "versions": found}, kb="ASC-VER-001",
                        fix="versions.pip-match",
                        fix_params={"package": req.name, "requirement": str(req)})
                continue
            try:
                ok = req.specifier.contains(Version(dep.version), prereleases=True)
            except InvalidVersion:
                ok = False
            if not ok:
                broken += 1
                yield Finding.fail(
                    f"{owner.name} {owner.version} requires {req}; found {dep.version}",
                    subject=f"{owner.name} {owner.version}",
                    evidence={"requirement": str(req), "installed": dep.version,
                              "versions": found}, kb="ASC-VER-001", fix="versions.pip-match",
                    fix_params={"package": req.name, "requirement": str(req)})
    if not broken:
        yield Finding.passed(
            "every pin of " + ", ".join(f"{n} {v}" for n, v in found.items() if n in PINNED_BY)
            + " holds" if any(n in PINNED_BY for n in found) else
            "none of torch, torch_npu, vllm, vllm-ascend is installed in this interpreter",
            evidence={"versions": found, "python": pkgs.python, "source": pkgs.source})
