"""CANN toolkit, driver, firmware and NNAL/ATB versions, read from their version files.

Pure parsers (text -> dataclass) for ``ascend_toolkit_install.info`` (key=value),
``version.cfg`` (``[<inner>:<CANN>]`` per component x running/upgrade/installed), the driver
and firmware ``version.info`` (capitalised ``Version=``/``Innerversion=``), and NNAL's
version info. ``gather_cann`` probes every known layout (formats: facts/ascend-stack.md §2):
the classic ``ascend-toolkit/latest`` link, the CANN >= 8.5 ``cann-<ver>`` dirs with the
``cann`` link, ``$HOME/Ascend`` user installs, and ``ASCEND_HOME_PATH`` of the service.
"""

from __future__ import annotations

import posixpath
import re

from ..errors import ParseError, SourceError, SourceMissing
from ..i18n import T
from ..host import Host
from dataclasses import dataclass, field
from ..registry import provider
from .procs import ServiceEnv

ASCEND = "/usr/local/Ascend"
DRIVER_INFO = f"{ASCEND}/driver/version.info"
FIRMWARE_INFO = f"{ASCEND}/firmware/version.info"
NNAL_INFOS = (f"{ASCEND}/nnal/atb/latest/version.info", f"{ASCEND}/nnal/atb/latest/atb/version.info")

_C_NUMBER = re.compile(r"V\d+R\d+C\d+", re.IGNORECASE)
_BRACKETS = re.compile(r"\[([^\]]*)\]")
_CFG_LINE = re.compile(r"^(?P<comp>[A-Za-z0-9_]+?)_(?P<kind>running|upgrade|installed)_version"
                       r"\s*=\s*(?P<value>.*)$")


def parse_kv(text: str, source: str) -> dict[str, str]:
    """``key=value`` lines (keys lower-cased: the driver writes ``Version=``, CANN ``version=``)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip().lower()
        if key and re.fullmatch(r"[a-z0-9_.\-]+", key):
            out.setdefault(key, value.strip())
    if not out:
        raise ParseError(source, T("no key=value line"))
    return out


def c_number(inner: str | None) -> str | None:
    """``V100R001C23SPC002B210`` -> ``V100R001C23`` (the release line a driver accepts)."""
    m = _C_NUMBER.search(inner or "")
    return m.group(0).upper() if m else None


def bracket_list(value: str | None) -> tuple[str, ...]:
    """``[V100R001C15],[V100R001C18]`` -> ('V100R001C15', 'V100R001C18')."""
    return tuple(x.strip() for x in _BRACKETS.findall(value or "") if x.strip())


@dataclass(frozen=True, eq=False)
class ToolkitInstallInfo:
    """A toolkit's ascend_toolkit_install.info: version, package, compatible versions."""

    version: str
    innerversion: str = ""
    package_name: str = ""
    compatible_version: tuple[str, ...] = ()
    arch: str = ""
    path: str = ""

    @property
    def c_number(self) -> str | None:
        return c_number(self.innerversion)


def parse_toolkit_install_info(text: str, source: str = "ascend_toolkit_install.info"
                               ) -> ToolkitInstallInfo:
    kv = parse_kv(text, source)
    if not kv.get("version"):
        raise ParseError(source, T("no version= line"))
    return ToolkitInstallInfo(kv["version"], kv.get("innerversion", ""), kv.get("package_name", ""),
                              bracket_list(kv.get("compatible_version")), kv.get("arch", ""),
                              kv.get("path", ""))


@dataclass(frozen=True, eq=False)
class ComponentVersion:
    """One component line of a toolkit's version.cfg: its inner and CANN version."""

    inner: str
    cann: str


@dataclass(frozen=True, eq=False)
class VersionCfg:
    """component -> {running|upgrade|installed -> ComponentVersion}."""

    components: dict[str, dict[str, ComponentVersion]] = field(default_factory=dict)

    def partial_upgrades(self) -> list[tuple[str, ComponentVersion, ComponentVersion]]:
        """Components whose running version differs from the installed one."""
        out = []
        for comp, kinds in sorted(self.components.items()):
            run, inst = kinds.get("running"), kinds.get("installed")
            if run and inst and (run.inner, run.cann) != (inst.inner, inst.cann):
                out.append((comp, run, inst))
        return out


def parse_version_cfg(text: str, source: str = "version.cfg") -> VersionCfg:
    comps: dict[str, dict[str, ComponentVersion]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _CFG_LINE.match(line)
        if not m:
            continue
        items = bracket_list(m.group("value"))
        if not items:
            continue
        inner, _, cann = items[-1].partition(":")
        comps.setdefault(m.group("comp").lower(), {})[m.group("kind")] = ComponentVersion(
            inner.strip(), cann.strip())
    if not comps:
        raise ParseError(source, T("no {pattern} line",
                                  pattern="<component>_{running,upgrade,installed}_version=[…]"))
    return VersionCfg(comps)


@dataclass(frozen=True, eq=False)
class DriverVersion:
    """The driver's version.info: its version and what it is compatible with."""

    version: str
    innerversion: str = ""
    compatible_version: tuple[str, ...] = ()
    compatible_version_fw: tuple[str, ...] = ()
    ascendhal_version: str = ""

    def accepts(self, toolkit_inner: str) -> bool | None:
        """Does the driver list the toolkit's C-number? None when either side lacks one."""
        c = c_number(toolkit_inner)
        listed = [c_number(x) for x in self.compatible_version]
        if not c or not any(listed):
            return None
        return c in listed


def parse_driver_version_info(text: str, source: str = DRIVER_INFO) -> DriverVersion:
    kv = parse_kv(text, source)
    if not kv.get("version"):
        raise ParseError(source, T("no Version= line"))
    return DriverVersion(kv["version"], kv.get("innerversion", ""),
                         bracket_list(kv.get("compatible_version")),
                         bracket_list(kv.get("compatible_version_fw")),
                         kv.get("ascendhal_version", ""))


@dataclass(frozen=True, eq=False)
class FirmwareVersion:
    """The firmware's version.info: its version and the drivers it accepts."""

    version: str
    package_version: str = ""
    compatible_version_drv: tuple[str, ...] = ()


def parse_firmware_version_info(text: str, source: str = FIRMWARE_INFO) -> FirmwareVersion:
    kv = parse_kv(text, source)
    if not kv.get("version"):
        raise ParseError(source, T("no Version= line"))
    return FirmwareVersion(kv["version"], kv.get("package_version", ""),
                           bracket_list(kv.get("compatible_version_drv")))


def parse_nnal_version_info(text: str, source: str = "nnal version.info") -> str:
    """NNAL/ATB version info: a ``version=`` (or ``Ascend-cann-atb : <ver>``) line."""
    try:
        kv = parse_kv(text, source)
        if kv.get("version"):
            return kv["version"]
    except ParseError:
        pass
    for line in text.splitlines():
        if ":" in line and "atb" in line.lower():
            value = line.split(":", 1)[1].strip()
            if value:
                return value
    raise ParseError(source, T("no version= line"))


# -- gathering ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Toolkit:
    """One installed CANN toolkit: where it was found, what it resolves to, its info files."""

    home: str  # as found (e.g. /usr/local/Ascend/ascend-toolkit/latest)
    real: str  # the directory it resolves to
    info_path: str
    info: ToolkitInstallInfo
    version_cfg: VersionCfg | None = None
    origin: str = ""  # which probe found it


@dataclass(frozen=True, eq=False)
class CannStack:
    """Every toolkit found, the active one (and why), driver, firmware and NNAL."""

    toolkits: tuple[Toolkit, ...] = ()
    active: Toolkit | None = None  # the one ASCEND_HOME_PATH names, else the first found
    active_reason: str = ""
    driver: DriverVersion | None = None
    firmware: FirmwareVersion | None = None
    nnal: str | None = None
    problems: tuple[tuple[str, str], ...] = ()  # (file, reason): unreadable or malformed


def toolkit_homes(env: dict[str, str]) -> list[tuple[str, str]]:
    """(candidate home, why it is a candidate), most authoritative first."""
    out: list[tuple[str, str]] = []
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        if env.get(var, "").startswith("/"):
            out.append((env[var].rstrip("/") or "/", f"${var}"))
    out += [(f"{ASCEND}/ascend-toolkit/latest", "classic layout"),
            (f"{ASCEND}/cann", "CANN >= 8.5 layout")]
    home = env.get("HOME", "")
    if home.startswith("/") and home != "/":
        out += [(f"{home.rstrip('/')}/Ascend/ascend-toolkit/latest", "user install ($HOME)"),
                (f"{home.rstrip('/')}/Ascend/cann", "user install ($HOME)")]
    return out


def _read_parse(host: Host, path: str, parse, problems: list[tuple[str, str]]):
    try:
        return parse(host.read_text(path, 1024 * 1024), path)
    except SourceMissing:
        return None
    except SourceError as exc:  # ParseError included
        problems.append((path, exc.reason))
        return None


@provider
def gather_cann(host: Host, env: ServiceEnv | None) -> CannStack:
    environ = env.env if env is not None else host.environ()
    problems: list[tuple[str, str]] = []
    candidates = toolkit_homes(environ)
    candidates += [(p, "CANN >= 8.5 layout") for p in host.glob(f"{ASCEND}/cann-*")]
    found: list[Toolkit] = []
    seen: set[str] = set()
    first_by_origin: dict[str, Toolkit] = {}
    for home, why in candidates:
        if not host.is_dir(home):
            continue
        real = host.realpath(home)
        if real in seen:
            for t in found:
                if t.real == real:
                    first_by_origin.setdefault(why, t)
            continue
        seen.add(real)
        for info_path in host.glob(f"{real}/*-linux/ascend_toolkit_install.info"):
            info = _read_parse(host, info_path, parse_toolkit_install_info, problems)
            if info is None:
                continue
            cfg = _read_parse(host, f"{real}/version.cfg", parse_version_cfg, problems)
            tk = Toolkit(home, real, info_path, info, cfg, why)
            found.append(tk)
            first_by_origin.setdefault(why, tk)
            break
    active, reason = None, ""
    for var in ("$ASCEND_HOME_PATH", "$ASCEND_TOOLKIT_HOME"):
        if var in first_by_origin:
            active, reason = first_by_origin[var], f"{var} of the service environment"
            break
    if active is None and found:
        active, reason = found[0], f"first toolkit found ({found[0].origin})"
    driver = _read_parse(host, DRIVER_INFO, parse_driver_version_info, problems)
    firmware = _read_parse(host, FIRMWARE_INFO, parse_firmware_version_info, problems)
    nnal = None
    for p in NNAL_INFOS:
        nnal = _read_parse(host, p, parse_nnal_version_info, problems)
        if nnal:
            break
    if not found and driver is None and firmware is None and not problems:
        raise SourceMissing(ASCEND, T("no CANN toolkit, driver or firmware version file found "
                                      "(looked in {dirs})",
                                      dirs=", ".join(h for h, _ in candidates)))
    return CannStack(tuple(found), active, reason, driver, firmware, nnal, tuple(problems))


def arch_dir(tk: Toolkit) -> str:
    return posixpath.dirname(tk.info_path)
