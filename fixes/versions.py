"""versions.pip-match: the exact pip commands that reinstall torch / torch_npu / vllm-ascend
as vllm-ascend pins them. A manual step: pip resolves against an index the doctor cannot
vouch for, and a half-done install is worse than the mismatch."""

from __future__ import annotations

import shlex

from packaging.requirements import Requirement

from ascend_doctor.probes.packages import requirements_of

from ascend_doctor.errors import DoctorError
from ascend_doctor.i18n import T

from . import recipe
from .context import FixContext
from .plan import Manual, Plan

# whose pins win, in order: vllm-ascend is built against exact torch / torch-npu versions
OWNERS = ("vllm-ascend", "torch-npu", "vllm")
STACK = ("torch", "torch-npu", "torchvision", "torchaudio", "triton-ascend")


def pins_from(pkgs) -> tuple[dict[str, str], list[str]]:
    """{package: requirement} from the owners' Requires-Dist (first owner wins) and the
    conflicts between owners, in words."""
    pins: dict[str, tuple[str, str]] = {}
    conflicts = []
    for owner, req in requirements_of(pkgs, OWNERS):
        name = req.name.lower().replace("_", "-")
        if name not in STACK or not str(req.specifier) or req.marker is not None:
            continue
        spec = f"{req.name}{req.specifier}"
        if name in pins and pins[name][0] != spec:
            conflicts.append(T("{owner} wants {spec}, {other} wants {other_spec}",
                               owner=f"{owner.name} {owner.version}", spec=spec,
                               other=pins[name][1], other_spec=pins[name][0]))
            continue
        pins.setdefault(name, (spec, f"{owner.name} {owner.version}"))
    return {k: v[0] for k, v in pins.items()}, conflicts


@recipe("versions.pip-match", title="Reinstall torch / torch_npu as vllm-ascend pins them",
        check="versions.pins", affects=("versions", "torch_npu"))
def pip_match(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "versions.pins"
    from ascend_doctor.probes.packages import Packages
    plan = Plan("versions.pip-match", T("Reinstall torch / torch_npu as vllm-ascend pins them"),
                params, verify=verify)
    try:
        pkgs = ctx.fact(Packages)
    except DoctorError as exc:
        plan.notes.append(T("cannot read the installed packages: {reason}", reason=exc))
        return plan
    pins, conflicts = pins_from(pkgs)
    wrong = {n: s for n, s in pins.items()
             if pkgs.version(n) is None or not Requirement(s).specifier.contains(
                 pkgs.version(n), prereleases=True)}
    python = pkgs.executable or "python3"
    for c in conflicts:
        plan.notes.append(T("conflicting pins: {conflict}; vllm-ascend's win (torch_npu lags "
                              "torch)", conflict=c))
    if not wrong:
        plan.notes.append(T("every pin of the serving stack already holds"))
        return plan
    have = ", ".join(f"{n} {pkgs.version(n) or 'missing'}" for n in wrong)
    plan.manual.append(Manual(f"Installed: {have}. Reinstall exactly the pinned versions:",
                              f"当前安装：{have}。请安装约束要求的精确版本：",
                              shlex.join([python, "-m", "pip", "install", *sorted(
                                  wrong.values())])))
    plan.manual.append(Manual("Check that nothing is left broken:", "确认没有残留冲突：",
                              shlex.join([python, "-m", "pip", "check"])))
    plan.manual.append(Manual("Never let pip upgrade torch on its own afterwards: install vllm "
                              "first, then vllm-ascend, which reinstalls the matching torch.",
                              "之后不要让 pip 单独升级 torch：先装 vllm，再装 vllm-ascend，"
                              "它会重装匹配的 torch。"))
    return plan
