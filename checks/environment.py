"""The environment report: what collect_env prints, as an info finding for the issue body."""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.collect_env import CollectEnv
from ascend_doctor.probes.packages import WATCHED, Packages
from ascend_doctor.registry import check


@check("host.environment", title="Environment report (what collect_env prints)",
       category=Category.HOST, tags=("env", "report"))
def environment(ce: CollectEnv, pkgs: Packages | None) -> Iterator[Finding]:
    versions = {}
    packages = {}
    if pkgs is not None:
        packages = {p.name: p.version for p in sorted(pkgs.packages.values(),
                                                      key=lambda p: p.name.lower())
                    if any(w in p.name.lower().replace("_", "-") for w in
                           ("torch", "numpy", "transformers", "triton", "vllm", "zmq", "onnx",
                            "optree", "mypy", "flake8"))}
        versions = {n: pkgs.version(n) for n in WATCHED if pkgs.version(n)}
        versions["python"] = pkgs.python
    summary = ", ".join(f"{k} {v}" for k, v in versions.items()) or T("no Python packages read")
    yield Finding.info(T("{os}, kernel {kernel}; {summary}", os=ce.system.get("os", "?"),
                         kernel=ce.system.get("kernel", "?"), summary=summary),
                       evidence={"os": ce.system, "versions": versions, "packages": packages,
                                 "env": ce.env, "env_source": ce.env_source,
                                 "cpu": ce.cpu.splitlines()[:20]})
