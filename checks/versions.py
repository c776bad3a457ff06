"""Version pins: every installed package's own Requires-Dist must hold for what is installed."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from packaging.version import InvalidVersion, Version

from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.kbfact import Knowledge
from ascend_doctor.probes.packages import WATCHED, Packages, requirements_of
from ascend_doctor.registry import check

# whose pins we hold to account: the serving stack, not every package on the host
PINNED_BY = ("vllm-ascend", "vllm", "torch-npu", "torch", "triton-ascend")


def _marker_env(pkgs: Packages) -> dict[str, str]:
    from packaging.markers import default_environment  # with packaging.tags: only when run

    env = dict(default_environment())
    if pkgs.python:
        env["python_version"] = ".".join(pkgs.python.split(".")[:2])
        env["python_full_version"] = pkgs.python
    env["extra"] = ""
    return env


def pkg_key(name: str, version: str) -> str:
    """Cause key "this installed package version is not the one the stack pins": every pin
    and matrix line broken by the same installed torch is one problem."""
    from packaging.utils import canonicalize_name

    return f"versions.pkg:{canonicalize_name(name)}=={version}"


def cann_key(toolkit: str) -> str:
    """Cause key "the active CANN toolkit is not the one the Python stack was built for"."""
    return f"versions.cann:{toolkit}"


@check("versions.pins", title="Installed packages satisfy the serving stack's own pins",
       category=Category.VERSIONS, tags=("versions", "packages"))
def pins(pkgs: Packages) -> Iterator[Finding]:
    from packaging.utils import canonicalize_name

    env = _marker_env(pkgs)
    found = {n: pkgs.version(n) for n in WATCHED if pkgs.version(n)}
    broken = 0
    for owner, req in requirements_of(pkgs, PINNED_BY):
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        dep = pkgs.get(req.name)
        if dep is None:
            if canonicalize_name(req.name) in WATCHED:
                broken += 1
                yield Finding.fail(
                    T("{name} {version} requires {req}; {name2} is not installed",
                      name=owner.name, version=owner.version, req=str(req), name2=req.name),
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
                T("{name} {version} requires {req}; found {version2}",
                  name=owner.name, version=owner.version, req=str(req), version2=dep.version),
                subject=f"{owner.name} {owner.version}",
                evidence={"requirement": str(req), "installed": dep.version,
                          "versions": found}, kb="ASC-VER-001", fix="versions.pip-match",
                fix_params={"package": req.name, "requirement": str(req)},
                cause=pkg_key(req.name, dep.version))
    if broken:
        return
    owners = [n for n in PINNED_BY if n in found]
    if not owners:  # absence is not health: nothing was checked
        yield Finding.skip(
            T("none of {v} is installed in {source} (Python {python}): no pins to check",
              v=', '.join(PINNED_BY), source=pkgs.source, python=pkgs.python),
            evidence={"absent": list(PINNED_BY), "versions": found, "python": pkgs.python,
                      "source": pkgs.source})
        return
    yield Finding.passed(
        T("every pin of {packages} holds", packages=", ".join(f"{n} {found[n]}" for n in owners)),
        evidence={"versions": found, "python": pkgs.python, "source": pkgs.source})


# -- the knowledge-base matrix, the driver, the platform plugin, the chip -------------------
import re  # noqa: E402

from ascend_doctor.probes.buildinfo import VllmAscendBuild  # noqa: E402
from ascend_doctor.probes.cann import (CannStack, DriverVersion, ToolkitInstallInfo,  # noqa: E402
                                       c_number)
from ascend_doctor.probes.npusmi import NpuSmi  # noqa: E402
from packaging.specifiers import InvalidSpecifier, SpecifierSet  # noqa: E402


def _public(v: str) -> str:
    """'2.10.0+cpu' -> '2.10.0' (a local label does not change the release)."""
    try:
        return Version(v).public
    except InvalidVersion:
        return v.split("+", 1)[0]


def _same(a: str, b: str) -> bool:
    try:
        return Version(a).public == Version(b).public
    except InvalidVersion:
        return a.strip().lower() == b.strip().lower()


def _cann_eq(a: str, b: str) -> bool:
    return a.strip().lower().lstrip("v") == b.strip().lower().lstrip("v")


_INTERNAL_CITE = re.compile(r"\s*\((?:facts|seed):[^)]*\)")


def _public_row(row: dict) -> dict:
    """The row with its source as a user may follow it: the public document, without the
    internal design-file names some rows still carry next to it."""
    src = row.get("source")
    return {**row, "source": _INTERNAL_CITE.sub("", src)} if isinstance(src, str) else row


def matrix_row(compat: Mapping[str, Any], table: str, version: str) -> dict | None:
    for row in compat.get(table, []):
        if _same(row["version"], version):
            return _public_row(row)
    return None


def torch_python_row(compat: Mapping[str, Any], torch: str) -> dict | None:
    rel = _public(torch)
    for row in compat.get("torch_python", []):
        if rel == row["torch"] or rel.startswith(row["torch"] + "."):
            return _public_row(row)
    return None


@check("versions.matrix", title="vllm-ascend, vLLM, torch, torch_npu, CANN and Python were "
       "released together", category=Category.VERSIONS, tags=("versions", "matrix"))
def matrix(pkgs: Packages, cann: CannStack | None, know: Knowledge) -> Iterator[Finding]:
    found = {n: pkgs.version(n) for n in ("vllm-ascend", "vllm", "torch", "torch-npu")}
    toolkit = cann.active.info.version if cann and cann.active else None
    checked = 0
    bad = 0
    va = found["vllm-ascend"]
    if va:
        row = matrix_row(know.compat, "vllm_ascend", va)
        if row is None:
            yield Finding.info(T("vllm-ascend {va} is not in the compatibility matrix "
                                 "(knowledge/compat.toml ends at the releases it lists); its "
                                 "own pins are checked by versions.pins",
                                 va=va), evidence={"versions": found})
        else:
            checked += 1
            src = row["source"]
            for name, want in (("vllm", row["vllm"]), ("torch", [row["torch"]]),
                               ("torch-npu", [row["torch_npu"]])):
                have = found[name]
                if have is None:
                    continue
                if not any(_same(have, w) for w in want):
                    bad += 1
                    yield Finding.fail(
                        T("vllm-ascend {va} is released with {name} {v}; found {have}",
                          va=va, name=name, v=' or '.join(want), have=have),
                        subject=f"vllm-ascend {va}",
                        evidence={"package": name, "expected": want, "installed": have,
                                  "source": src}, kb="ASC-VER-002", fix="versions.pip-match",
                        fix_params={"package": name, "requirement": f"{name}=={want[0]}"},
                        cause=pkg_key(name, have))
            try:
                if pkgs.python and not SpecifierSet(row["python"]).contains(pkgs.python):
                    bad += 1
                    yield Finding.fail(T("vllm-ascend {va} supports Python {python}; the "
                                         "service's interpreter is {python2}",
                                         va=va, python=row['python'], python2=pkgs.python),
                                       evidence={"python": pkgs.python, "source": src},
                                       kb="ASC-VER-002")
            except InvalidSpecifier:
                pass
            if toolkit and not _cann_eq(toolkit, row["cann"]):
                bad += 1
                yield Finding.warn(
                    T("vllm-ascend {va} was validated with CANN {cann}; the active toolkit is "
                      "CANN {toolkit} ({home})",
                      va=va, cann=row['cann'], toolkit=toolkit, home=cann.active.home),
                    subject=f"vllm-ascend {va}",
                    evidence={"expected_cann": row["cann"], "cann": toolkit, "source": src},
                    kb="ASC-VER-002", cause=cann_key(toolkit))
    tn = found["torch-npu"]
    if tn:
        row = matrix_row(know.compat, "torch_npu", tn)
        if row is not None:
            checked += 1
            if found["torch"] and not _same(_public(found["torch"]), row["torch"]):
                bad += 1
                yield Finding.fail(T("torch_npu {tn} extends torch {torch}; found torch "
                                     "{torch2}",
                                     tn=tn, torch=row['torch'], torch2=found['torch']),
                                   subject=f"torch_npu {tn}",
                                   evidence={"expected": row["torch"], "installed": found["torch"],
                                             "source": row["source"]}, kb="ASC-VER-003",
                                   fix="versions.pip-match",
                                   fix_params={"package": "torch",
                                               "requirement": f"torch=={row['torch']}"},
                                   cause=pkg_key("torch", found["torch"]))
            if toolkit and not _cann_eq(toolkit, row["cann"]):
                bad += 1
                yield Finding.fail(
                    T("torch_npu {tn} is built for CANN {cann} (branch {branch}); the active "
                      "toolkit is CANN {toolkit} ({home}); CANN and torch_npu pair strictly",
                      tn=tn, cann=row['cann'], branch=row['branch'], toolkit=toolkit,
                      home=cann.active.home), subject=f"torch_npu {tn}",
                    evidence={"expected_cann": row["cann"], "cann": toolkit,
                              "source": row["source"]}, kb="ASC-VER-003",
                    cause=cann_key(toolkit))
        else:
            yield Finding.info(T("torch_npu {tn} is not in the torch_npu/CANN table of "
                                 "knowledge/compat.toml; its CANN pairing cannot be checked "
                                 "here",
                                 tn=tn),
                               evidence={"torch_npu": tn})
    if found["torch"] and pkgs.python:
        row = torch_python_row(know.compat, found["torch"])
        if row is not None:
            checked += 1
            if not SpecifierSet(row["python"]).contains(pkgs.python):
                bad += 1
                yield Finding.fail(T("torch {torch} supports Python {python}; the interpreter "
                                     "is {python2}",
                                     torch=found['torch'], python=row['python'],
                                     python2=pkgs.python),
                                   evidence={"source": row["source"]}, kb="ASC-VER-002")
    if toolkit and cann.nnal and not _cann_eq(cann.nnal, toolkit):
        bad += 1
        yield Finding.warn(T("NNAL/ATB {nnal} differs from CANN {toolkit}: vllm-ascend installs"
                             " NNAL at the CANN version (libatb.so is built against it)",
                             nnal=cann.nnal, toolkit=toolkit),
                           evidence={"nnal": cann.nnal, "cann": toolkit}, kb="ASC-VER-002")
    if not bad:
        what = ", ".join(f"{n} {v}" for n, v in found.items() if v)
        if toolkit:
            what += f", CANN {toolkit}"
        if checked:
            yield Finding.passed(T("{what}: consistent with the compatibility matrix",
                                   what=what),
                                 evidence={"versions": found, "cann": toolkit})
            return
        absent = [n for n, v in found.items() if not v] + ([] if toolkit else ["CANN toolkit"])
        parts = ([f"{', '.join(absent)} not found"] if absent else []) + (
            [f"{what} not in knowledge/compat.toml"] if what else [])
        yield Finding.skip(T("nothing to compare against the matrix: {v} (packages from "
                             "{source})",
                             v='; '.join(parts), source=pkgs.source),
                           evidence={"versions": found, "cann": toolkit, "absent": absent})


# Both install files name the other side's release line (V100R001C<nn>): the driver's
# version.info lists the CANN lines it accepts, the toolkit's ascend_toolkit_install.info the
# driver lines it runs on (CANN 8.3.RC2 lists C15…C23; driver 25.0.rc1.1 is C21 and lists
# C17…C21). Either list naming the pair is the installers' own statement that it works.
PAIR_RULE_SOURCE = T("compatible_version in /usr/local/Ascend/driver/version.info and in the "
                    "toolkit's ascend_toolkit_install.info, as the Ascend HDK and CANN "
                    "installers write them (CANN Software Installation Guide)")


def pair_accepted(drv: DriverVersion, tk: ToolkitInstallInfo) -> tuple[bool | None, str]:
    """Does either side declare the driver/toolkit pair compatible, and which file says so?

    None when neither side carries a comparable list (no innerversion or no list)."""
    by_driver = drv.accepts(tk.innerversion)
    own = c_number(drv.innerversion)
    listed = [c_number(x) for x in tk.compatible_version]
    by_toolkit = (own in listed) if own and any(listed) else None
    if by_driver:
        return True, "driver"
    if by_toolkit:
        return True, "toolkit"
    if by_driver is None and by_toolkit is None:
        return None, ""
    return False, ""


@check("versions.driver-cann", title="The NPU driver accepts the installed CANN toolkit",
       category=Category.VERSIONS, tags=("versions", "driver", "cann"))
def driver_cann(cann: CannStack) -> Iterator[Finding]:
    for path, reason in cann.problems:
        yield Finding.error(T("cannot use {path}: {reason}", path=path, reason=reason),
                            subject=path, evidence={"file": path, "reason": reason})
    drv = cann.driver
    if drv is None:
        yield Finding.skip(T("no driver version file (/usr/local/Ascend/driver/version.info); "
                             "the driver is not installed or not mounted"))
        return
    if not cann.toolkits:
        yield Finding.skip(T("driver {driver} is installed but no CANN toolkit was found",
                             driver=drv.version))
        return
    dc = c_number(drv.innerversion) or "?"
    for tk in cann.toolkits:
        ok, who = pair_accepted(drv, tk.info)
        c = c_number(tk.info.innerversion)
        ev = {"driver": drv.version, "driver_inner": drv.innerversion,
              "compatible_version": list(drv.compatible_version), "toolkit": tk.info.version,
              "toolkit_inner": tk.info.innerversion,
              "toolkit_compatible_version": list(tk.info.compatible_version),
              "toolkit_path": tk.info_path, "accepted_by": who, "rule": PAIR_RULE_SOURCE}
        active = tk is cann.active
        if ok is None:
            yield Finding.info(T("CANN {cann} ({path}): innerversion {inner} or the "
                                 "compatible_version lists cannot be compared",
                                 cann=tk.info.version, path=tk.info_path,
                                 inner=tk.info.innerversion or "absent"), evidence=ev)
        elif not ok:
            make = Finding.fail if active else Finding.warn
            yield make(T("driver {driver} ({dc}) accepts CANN {accepted}; {which} toolkit CANN "
                         "{cann} is {c} ({inner}, {path}) and lists drivers {tk_accepts}; "
                         "neither file names the other (rule: {rule})", driver=drv.version,
                         dc=dc, accepted=", ".join(drv.compatible_version) or "(none listed)",
                         which=T("the active") if active else T("an installed"),
                         cann=tk.info.version, c=c, inner=tk.info.innerversion,
                         path=tk.info_path,
                         tk_accepts=", ".join(tk.info.compatible_version) or "(none listed)",
                         rule=PAIR_RULE_SOURCE),
                       subject=tk.home, evidence=ev, kb="ASC-VER-004")
        elif who == "driver":
            yield Finding.passed(T("driver {driver} accepts CANN {cann} ({c} is in the driver's "
                                   "compatible_version list; rule: {rule})", driver=drv.version,
                                   cann=tk.info.version, c=c, rule=PAIR_RULE_SOURCE),
                                 subject=tk.home, evidence=ev)
        else:
            yield Finding.passed(T("CANN {cann} accepts driver {driver} ({dc} is in the "
                                   "toolkit's compatible_version list, {path}; rule: {rule})",
                                   cann=tk.info.version, driver=drv.version, dc=dc,
                                   path=tk.info_path, rule=PAIR_RULE_SOURCE),
                                 subject=tk.home, evidence=ev)


@check("versions.cann-upgrade", title="Every CANN component runs the installed version",
       category=Category.VERSIONS, tags=("versions", "cann"))
def cann_upgrade(cann: CannStack) -> Iterator[Finding]:
    with_cfg = [t for t in cann.toolkits if t.version_cfg is not None]
    if not with_cfg:
        yield Finding.skip(T("no toolkit with a version.cfg was found"))
        return
    for tk in with_cfg:
        partial = tk.version_cfg.partial_upgrades()
        if partial:
            parts = [f"{c}: running {r.inner}:{r.cann}, installed {i.inner}:{i.cann}"
                     for c, r, i in partial]
            yield Finding.fail(T("{real}/version.cfg: {n_partial} component(s) run another "
                                 "version than installed (partial upgrade): {v}",
                                 real=tk.real, n_partial=len(partial), v='; '.join(parts)),
                               subject=tk.real, evidence={"components": parts}, kb="ASC-VER-005")
        else:
            yield Finding.passed(T("{real}/version.cfg: all {n_components} components run their"
                                   " installed version",
                                   real=tk.real, n_components=len(tk.version_cfg.components)),
                                 subject=tk.real)


@check("versions.driver-active", title="The installed NPU driver is the one running",
       category=Category.VERSIONS, tags=("versions", "driver", "npu"), timeout=45.0)
def driver_active(cann: CannStack, smi: NpuSmi) -> Iterator[Finding]:
    if cann.driver is None:
        yield Finding.skip(T("no /usr/local/Ascend/driver/version.info"))
        return
    if smi.info is None or not smi.info.driver_version:
        yield Finding.skip(T("npu-smi info gave no driver version (see npu.smi)"))
        return
    installed, running = cann.driver.version, smi.info.driver_version
    if installed.lower() != running.lower():
        yield Finding.fail(T("driver {installed} is installed (driver/version.info) but npu-smi"
                             " reports {running}: the new driver is not active until the host "
                             "reboots",
                             installed=installed, running=running),
                           evidence={"installed": installed, "running": running},
                           kb="ASC-VER-006")
    else:
        yield Finding.passed(T("driver {installed} is installed and running",
                               installed=installed))


@check("versions.platform-plugin", title="vLLM has the Ascend platform plugin",
       category=Category.VERSIONS, tags=("versions", "packages"))
def platform_plugin(pkgs: Packages) -> Iterator[Finding]:
    vllm = pkgs.get("vllm")
    if vllm is None:
        yield Finding.skip(T("vLLM is not installed ({source})",
                             source=pkgs.source))
        return
    plugins = [(p.name, ep[1], ep[2]) for p in pkgs.packages.values() for ep in p.entry_points
               if ep[0] == "vllm.platform_plugins"]
    if not plugins:
        yield Finding.fail(
            T("vllm {version} is installed but no package provides a vllm.platform_plugins "
              "entry point: vLLM will look for CUDA (a plain `pip install vllm`); install "
              "vllm-ascend",
              version=vllm.version), subject=f"vllm {vllm.version}",
            evidence={"vllm": vllm.version, "vllm_ascend": pkgs.version("vllm-ascend")},
            kb="ASC-VER-007", fix="versions.pip-match",
            fix_params={"package": "vllm-ascend", "requirement": f"vllm-ascend=={vllm.version}"})
        return
    yield Finding.passed(T("vllm platform plugins: {plugins}",
                           plugins=", ".join(f"{n} ({e} = {v})" for n, e, v in plugins)))


CHIP_FAMILIES = (("310P", re.compile(r"^310P", re.I)), ("A2", re.compile(r"^910B", re.I)),
                 ("A3", re.compile(r"^(Ascend910|910_93|910C)", re.I)),
                 ("310B", re.compile(r"^310B", re.I)))


def chip_family(name: str) -> str | None:
    for fam, rx in CHIP_FAMILIES:
        if rx.search(name.strip()):
            return fam
    return None


@check("versions.chip", title="vllm-ascend was built for the chip in this host",
       category=Category.VERSIONS, tags=("versions", "npu"), timeout=45.0)
def chip_match(build: VllmAscendBuild, smi: NpuSmi) -> Iterator[Finding]:
    if smi.info is None or not smi.info.chips:
        yield Finding.skip(T("npu-smi info gave no NPU rows (see npu.smi)"))
        return
    names = sorted({c.name for c in smi.info.chips})
    board_name = (smi.board.chip_name or "") if smi.board is not None else ""
    fams = {chip_family(n) for n in names} - {None}
    if not fams and board_name:
        fams = {chip_family(board_name)} - {None}
    if not fams:
        yield Finding.info(T("chip name(s) {v} are not a known family; vllm-ascend was built "
                             "for {device_type}",
                             v=', '.join(names), device_type=build.device_type))
        return
    want = build.device_type.upper()
    if want not in {f.upper() for f in fams}:
        yield Finding.fail(T("vllm-ascend was built for {device_type} ({path}) but npu-smi "
                             "shows {v} ({v2})",
                             device_type=build.device_type, path=build.path, v=', '.join(names),
                             v2='/'.join(sorted(fams))),
                           evidence={"device_type": build.device_type, "chips": names},
                           kb="ASC-VER-008")
    else:
        yield Finding.passed(T("vllm-ascend built for {device_type}; npu-smi shows {v}",
                               device_type=build.device_type, v=', '.join(names)))


def _num(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


@check("versions.driver-firmware", title="The NPU firmware is in the range the driver accepts",
       category=Category.VERSIONS, tags=("versions", "driver", "firmware"))
def driver_firmware(cann: CannStack) -> Iterator[Finding]:
    drv, fw = cann.driver, cann.firmware
    if drv is None or fw is None:
        yield Finding.skip(T("needs both /usr/local/Ascend/driver/version.info and "
                             "/usr/local/Ascend/firmware/version.info"))
        return
    ranges = [r.split(",") for r in drv.compatible_version_fw if r.count(",") == 1]
    if not ranges:
        yield Finding.info(T("driver {version} lists no compatible_version_fw range",
                             version=drv.version))
        return
    have = _num(fw.version)
    ok = any(_num(lo) <= have <= _num(hi) for lo, hi in ranges)
    text = ", ".join(f"[{lo},{hi}]" for lo, hi in ranges)
    ev = {"firmware": fw.version, "driver": drv.version, "compatible_version_fw": text}
    if ok:
        yield Finding.passed(T("firmware {version} is within driver {version2}'s range {text}",
                               version=fw.version, version2=drv.version, text=text),
                             evidence=ev)
    else:
        yield Finding.fail(T("firmware {version} is outside driver {version2}'s "
                             "compatible_version_fw {text}: upgrade the firmware package to the"
                             " one released with the driver",
                             version=fw.version, version2=drv.version, text=text),
                           evidence=ev, kb="ASC-VER-012")
