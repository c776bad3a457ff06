"""A static emulation of ld.so: would every DT_NEEDED of these ELF files be found, and which
file would be picked? Nothing is loaded or run; every file access goes through the Host.

Search order per object L needing NAME (glibc elf/dl-load.c ``_dl_map_object``):
  already loaded (a loaded object's DT_SONAME or requested name equals NAME) →
  DT_RPATH of L and of the objects that loaded L, only while the object has no DT_RUNPATH →
  LD_LIBRARY_PATH (of the *service's* environment) → DT_RUNPATH of L (not inherited) →
  /etc/ld.so.cache (unless DF_1_NODEFLIB) → the default directories (same condition).
Candidates of the wrong ELF class or machine are skipped (as open_verify does); a candidate
that is not an ELF file at all stops the search with an error, as ld.so does.
``$ORIGIN``, ``$LIB`` and ``$PLATFORM`` are expanded; the glibc-hwcaps and legacy hwcap
subdirectories are not searched (a known limit).
"""

from __future__ import annotations

import posixpath
import re

from ..errors import ParseError, SourceError, SourceMissing
from ..host import Host
from ..inputs import user_files
from ..i18n import N_, T, join
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from .elf import ElfHeader, ElfInfo, parse_elf, parse_elf_header
from .ldcache import EXPECTED_FLAGS, LDCACHE, LdCache, parse_ldcache
from .packages import Packages
from .procs import ServiceEnv

TORCH_SONAMES = ("libtorch.so", "libc10.so", "libtorch_cpu.so", "libtorch_python.so")
TARGET_PACKAGES = ("torch-npu", "vllm-ascend")
_TRIPLES = {"EM_X86_64": ("x86_64-linux-gnu", "x86_64"), "EM_AARCH64": ("aarch64-linux-gnu", "aarch64")}
_DST = re.compile(r"\$(\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)\b)|\$\{?(\w+)\}?")
MAX_OBJECTS = 4000


@dataclass(frozen=True, eq=False)
class Resolution:
    """One DT_NEEDED entry of one object, as ld.so would settle it."""

    name: str
    needed_by: str  # path of the object whose DT_NEEDED names it
    path: str | None  # the file ld.so would map (as found: dir + name), None when not found
    via: str  # RPATH | LD_LIBRARY_PATH | RUNPATH | ld.so.cache | default dirs | loaded | provided
    tried: tuple[str, ...] = ()  # "dir (source)" in search order
    skipped: tuple[str, ...] = ()  # candidates of the wrong class/machine: "path: reason"
    error: str | None = None  # a candidate ld.so would stop at (not an ELF, corrupt)
    real: str | None = None  # realpath of ``path``
    note: str = ""  # why a "provided" name needs no file

    @property
    def found(self) -> bool:
        return (self.path is not None or self.via == "provided") and self.error is None

    @property
    def tried_dirs(self) -> list[str]:
        return [t.rsplit(" (", 1)[0] for t in self.tried]


@dataclass(frozen=True, eq=False)
class Closure:
    """A target and everything it would load, in breadth-first load order."""

    target: str
    objects: tuple[str, ...]
    resolutions: tuple[Resolution, ...]
    error: str | None = None  # the target itself could not be read or parsed
    package: str = ""  # the distribution the target belongs to ("" for --elf)
    foreign: str | None = None  # built for another machine (e.g. AICPU device kernels)

    @property
    def unresolved(self) -> list[Resolution]:
        return [r for r in self.resolutions if not r.found]


@dataclass
class _Obj:
    """A loaded object in the resolution walk: its file, ELF info, loader and names."""

    path: str  # as found
    real: str
    info: ElfInfo
    loader: "_Obj | None"
    names: set[str] = field(default_factory=set)


@dataclass(frozen=True, eq=False)
class SearchContext:
    """What ld.so's search depends on besides the objects themselves."""

    ld_library_path: tuple[str, ...] = ()
    default_dirs: tuple[str, ...] = ("/lib64", "/usr/lib64")
    lib: str = "lib64"  # $LIB
    platform: str = "x86_64"  # $PLATFORM (AT_PLATFORM)
    main_origin: str | None = None  # $ORIGIN in LD_LIBRARY_PATH: the main program's dir
    main: str | None = None  # the main program (the service's python): its DT_RPATH applies


def expand_dst(entry: str, origin: str | None, ctx: SearchContext) -> str | None:
    """Expand $ORIGIN/$LIB/$PLATFORM in one path entry; None when ld.so would drop it (a
    known token without a value, or a relative entry, which depends on the process's cwd)."""
    bad = False

    def sub(m: "re.Match[str]") -> str:
        nonlocal bad
        tok = m.group(2) or m.group(3)
        if tok == "ORIGIN":
            if origin is None:
                bad = True
                return ""
            return origin
        if tok == "LIB":
            return ctx.lib
        if tok == "PLATFORM":
            return ctx.platform
        return m.group(0)  # not a DST glibc knows: kept literally (_dl_dst_substitute)

    out = _DST.sub(sub, entry) if "$" in entry else entry
    if bad or not out.startswith("/"):
        return None  # relative entries depend on the cwd of the process: not modelled
    return posixpath.normpath(out)


def default_dirs_for(host: Host, machine: str) -> tuple[tuple[str, ...], str]:
    """glibc's system directories and $LIB: Debian multiarch or the /lib64 layout."""
    triple = _TRIPLES.get(machine, ("x86_64-linux-gnu", "x86_64"))[0]
    if host.is_dir(f"/usr/lib/{triple}") or host.is_dir(f"/lib/{triple}"):
        return (f"/lib/{triple}", f"/usr/lib/{triple}", "/lib", "/usr/lib"), f"lib/{triple}"
    return ("/lib64", "/usr/lib64"), "lib64"


class Resolver:
    """Resolves closures; parsed ELF files and probed candidates are cached across targets."""

    def __init__(self, host: Host, cache: LdCache | None, ctx: SearchContext,
                 user: Host | None = None, user_paths: "tuple[str, ...]" = ()) -> None:
        self.host = host
        self.cache = cache
        self.ctx = ctx
        # --elf files are the invoking user's (doctor/inputs.py): read through ``user``,
        # everything they load is searched in the inspected host
        self._user = user
        self._user_paths = frozenset(user_paths) if user is not None else frozenset()
        self._headers: dict[str, "ElfHeader | str | None"] = {}
        self._infos: dict[str, "ElfInfo | str"] = {}
        self._real: dict[str, str] = {}

    # -- file access (through the Host, memoised) ----------------------------------------
    def _src(self, path: str) -> Host:
        return self._user if path in self._user_paths and self._user is not None else self.host

    def realpath(self, path: str) -> str:
        if path not in self._real:
            try:
                self._real[path] = self._src(path).realpath(path)
            except (SourceMissing, SourceError):
                self._real[path] = path
        return self._real[path]

    def header(self, path: str) -> "ElfHeader | str | None":
        """The ELF header of a candidate; None when absent, a string when not loadable."""
        if path not in self._headers:
            try:
                with self._src(path).open_stream(path) as fh:
                    head = fh.read(64)
                self._headers[path] = parse_elf_header(head, path)
            except SourceMissing:
                self._headers[path] = None
            except ParseError as exc:
                self._headers[path] = exc.reason
            except SourceError as exc:
                self._headers[path] = None if "directory" in exc.reason else exc.reason
            except OSError as exc:
                self._headers[path] = f"cannot read ({exc.strerror or exc})"
        return self._headers[path]

    def info(self, path: str) -> "ElfInfo | str":
        real = self.realpath(path)
        if real not in self._infos:
            try:
                with self._src(path).open_stream(path) as fh:
                    self._infos[real] = parse_elf(fh, path)
            except (ParseError, SourceError, SourceMissing) as exc:
                self._infos[real] = exc.reason
            except OSError as exc:
                self._infos[real] = f"cannot read ({exc.strerror or exc})"
        return self._infos[real]

    def _main(self) -> ElfInfo | None:
        if not self.ctx.main:
            return None
        info = self.info(self.ctx.main)
        return info if isinstance(info, ElfInfo) else None

    # -- the search ----------------------------------------------------------------------
    def _dirs(self, loader: _Obj) -> list[tuple[str, str]]:
        """(directory, source) in ld.so's order before the cache."""
        out: list[tuple[str, str]] = []
        if not loader.info.has_runpath:
            obj: _Obj | None = loader
            while obj is not None:
                if not obj.info.has_runpath:
                    for e in obj.info.rpath:
                        d = expand_dst(e, posixpath.dirname(obj.path), self.ctx)
                        if d:
                            out.append((d, f"RPATH of {posixpath.basename(obj.path)}"))
                obj = obj.loader
            main = self._main()
            if main is not None and not main.has_runpath and self.ctx.main:
                for e in main.rpath:  # "try the DT_RPATH of the executable itself"
                    d = expand_dst(e, posixpath.dirname(self.ctx.main), self.ctx)
                    if d:
                        out.append((d, f"RPATH of {posixpath.basename(self.ctx.main)} (main)"))
        for e in self.ctx.ld_library_path:
            d = expand_dst(e, self.ctx.main_origin, self.ctx)
            if d:
                out.append((d, "LD_LIBRARY_PATH"))
        for e in loader.info.runpath:
            d = expand_dst(e, posixpath.dirname(loader.path), self.ctx)
            if d:
                out.append((d, f"RUNPATH of {posixpath.basename(loader.path)}"))
        return out

    def _accept(self, cand: str, want: ElfInfo) -> "tuple[str, str | None]":
        """('ok'|'missing'|'skip'|'error', reason) for one candidate file."""
        h = self.header(cand)
        if h is None:
            return "missing", None
        if isinstance(h, str):
            return "error", h
        if h.elfclass != want.elfclass:
            return "skip", f"wrong ELF class: ELFCLASS{h.elfclass}"
        if h.machine != want.machine:
            return "skip", f"wrong machine {h.machine}"
        return "ok", None

    def search(self, name: str, loader: _Obj) -> Resolution:
        want = loader.info
        tried: list[str] = []
        skipped: list[str] = []

        def attempt(cand: str, via: str) -> Resolution | None:
            verdict, why = self._accept(cand, want)
            if verdict == "ok":
                return Resolution(name, loader.path, cand, via, tuple(tried), tuple(skipped),
                                  real=self.realpath(cand))
            if verdict == "skip":
                skipped.append(f"{cand}: {why}")
            elif verdict == "error":
                return Resolution(name, loader.path, cand, via, tuple(tried), tuple(skipped),
                                  error=f"{cand}: {why}", real=self.realpath(cand))
            return None

        if "/" in name:
            cand = expand_dst(name, posixpath.dirname(loader.path), self.ctx) or name
            tried.append(f"{cand} (path in DT_NEEDED)")
            return attempt(cand, "path") or Resolution(name, loader.path, None, "path",
                                                        tuple(tried), tuple(skipped))
        seen: set[str] = set()
        for d, src in self._dirs(loader):
            if (d, src) in seen:
                continue
            seen.add((d, src))
            tried.append(f"{d} ({src})")
            r = attempt(posixpath.join(d, name), src.split(" of ")[0])
            if r:
                return r
        if not want.nodeflib:
            if self.cache is not None:
                tried.append(f"{self.cache.source} (ld.so.cache)")
                e = self.cache.lookup(name, EXPECTED_FLAGS.get((want.elfclass, want.machine)))
                if e is not None:
                    r = attempt(e.path, "ld.so.cache")
                    if r:
                        return r
            for d in self.ctx.default_dirs:
                tried.append(f"{d} (default)")
                r = attempt(posixpath.join(d, name), "default dirs")
                if r:
                    return r
        return Resolution(name, loader.path, None, "not found", tuple(tried), tuple(skipped))

    # -- closures ------------------------------------------------------------------------
    def closure(self, target: str, preload: tuple[str, ...] = (),
                provided: dict[str, str] | None = None, package: str = "") -> Closure:
        """Resolve ``target`` as a library loaded into a process that already holds
        ``preload`` (and their closures) and objects named in ``provided`` (name → why)."""
        provided = dict(provided or {})
        loaded: list[_Obj] = []
        by_real: dict[str, _Obj] = {}
        resolutions: list[Resolution] = []
        queue: list[_Obj] = []

        def load(path: str, loader: _Obj | None, as_name: str | None) -> "_Obj | str":
            real = self.realpath(path)
            if real in by_real:  # same file (inode) already mapped
                obj = by_real[real]
                if as_name:
                    obj.names.add(as_name)
                return obj
            info = self.info(path)
            if isinstance(info, str):
                return info
            obj = _Obj(path, real, info, loader, {path} | ({as_name} if as_name else set()))
            if info.soname:
                obj.names.add(info.soname)
            loaded.append(obj)
            by_real[real] = obj
            queue.append(obj)
            return obj

        for pre in preload:
            load(pre, None, None)
        root = load(target, None, None)
        if isinstance(root, str):
            return Closure(target, (), (), root, package)
        # the preloads' own dependencies come first, as `import torch` ran before
        if root in queue:
            queue.remove(root)
            queue.append(root)
        target_obj = root
        while queue and len(loaded) < MAX_OBJECTS:
            obj = queue.pop(0)
            for name in obj.info.needed:
                hit = next((o for o in loaded if name in o.names), None)
                if hit is not None:
                    if obj is target_obj or _in_closure_of(obj, target_obj):
                        resolutions.append(Resolution(name, obj.path, hit.path, "loaded",
                                                      real=hit.real))
                    continue
                if name in provided:
                    resolutions.append(Resolution(name, obj.path, None, "provided",
                                                  note=provided[name]))
                    continue
                r = self.search(name, obj)
                if r.found:
                    dep = load(r.path, obj, name)
                    if isinstance(dep, str):
                        r = Resolution(r.name, r.needed_by, r.path, r.via, r.tried, r.skipped,
                                       error=f"{r.path}: {dep}", real=r.real)
                if obj is target_obj or _in_closure_of(obj, target_obj):
                    resolutions.append(r)
        objects = tuple(o.path for o in loaded if o is target_obj or _in_closure_of(o, target_obj))
        return Closure(target, objects, tuple(resolutions), None, package)


def _in_closure_of(obj: _Obj, target: _Obj) -> bool:
    o = obj.loader
    while o is not None:
        if o is target:
            return True
        o = o.loader
    return False


# -- the fact ------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class LibResolution:
    """Closures of the torch_npu / vllm_ascend ELF files (and --elf paths)."""

    closures: tuple[Closure, ...]
    env_source: str  # which environment LD_LIBRARY_PATH came from
    ld_library_path: tuple[str, ...]
    default_dirs: tuple[str, ...]
    cache_source: str | None  # None: no usable ld.so.cache
    preload_note: str  # how torch's own libraries were modelled
    service_pid: int | None = None

    @property
    def unresolved(self) -> list[Resolution]:
        seen: set[tuple[str, str]] = set()
        out = []
        for c in self.closures:
            for r in c.unresolved:
                if r.via == "provided":
                    continue
                key = (r.name, r.needed_by)
                if key not in seen:
                    seen.add(key)
                    out.append(r)
        return out


def package_elf_files(host: Host, pkgs: Packages | None, names: tuple[str, ...] = TARGET_PACKAGES
                      ) -> list[tuple[str, str]]:
    """(package, absolute path) of every shared object an installed package recorded."""
    out: list[tuple[str, str]] = []
    if pkgs is None:
        return out
    for n in names:
        p = pkgs.get(n)
        if p is None or not p.location:
            continue
        for f in p.files:
            base = posixpath.basename(f)
            if base.endswith(".so") or ".so." in base:
                out.append((p.name, posixpath.normpath(posixpath.join(p.location, f))))
    return out


def torch_preload(host: Host, pkgs: Packages | None) -> tuple[tuple[str, ...], dict[str, str], str]:
    """torch's own libraries: pre-loaded from its lib dir when torch is installed (as
    `import torch` would), else counted as provided by torch and said so."""
    torch = pkgs.get("torch") if pkgs else None
    if torch is not None and torch.location:
        libdir = posixpath.join(torch.location, "torch", "lib")
        pre = tuple(posixpath.join(libdir, n) for n in TORCH_SONAMES
                    if host.exists(posixpath.join(libdir, n)))
        if pre:
            return pre, {}, T("torch {version} is installed: {libs} pre-loaded from {libdir} "
                              "(as `import torch` does first)", version=torch.version,
                              libs=", ".join(TORCH_SONAMES), libdir=libdir)
    why = T("provided by torch (not installed here: `import torch` would load it first)")
    return (), {n: why for n in TORCH_SONAMES}, T(
        "torch is not installed in this interpreter: {libs} are counted as provided by torch",
        libs=", ".join(TORCH_SONAMES))


HOST_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "arm64": "EM_AARCH64"}


IMPORT_ORDER = ("torch", "torch-npu", "vllm-ascend")  # what a vLLM-Ascend process imports first


def _canon(pkg: str) -> str:
    return pkg.replace("_", "-").lower()


def _top_level(pkg: str, path: str) -> bool:
    """A package's own top-level extension (``torch_npu/_C*.so``, ``vllm_ascend/*.so``):
    what ``import <pkg>`` itself dlopens before any submodule's extension."""
    return posixpath.basename(posixpath.dirname(path)) == pkg.replace("-", "_")


def load_order(targets: list[tuple[str, str]], torch_pre: tuple[str, ...]
               ) -> dict[str, tuple[str, ...]]:
    """For each package in IMPORT_ORDER, the objects a real process has already loaded when
    that package's non-top-level extensions are dlopened: torch's libraries, then each
    earlier package's top-level extensions, then the package's own top-level ones (their
    resolved DT_NEEDED closures come with them in ``Resolver.closure``). ld.so reuses a
    loaded soname, so anything in here satisfies a later object's DT_NEEDED."""
    stages: dict[str, tuple[str, ...]] = {}
    loaded: tuple[str, ...] = torch_pre
    for pkg in IMPORT_ORDER:
        own = tuple(t for p, t in targets if _canon(p) == pkg and _top_level(pkg, t))
        stages[pkg] = loaded  # before `import pkg`
        loaded = loaded + own
        stages[pkg + ":after"] = loaded  # after `import pkg`
    return stages


def preload_for(pkg: str, target: str, stages: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """What is loaded when ``target`` (a file of ``pkg``) is dlopened in a real process."""
    canon = _canon(pkg)
    if canon not in IMPORT_ORDER:
        return ()  # an --elf path outside the known packages: resolved on its own
    key = canon if _top_level(canon, target) else canon + ":after"
    return tuple(t for t in stages[key] if t != target)


def resolve_targets(host: Host, targets: list[tuple[str, str]], env: ServiceEnv,
                    cache: LdCache | None, pkgs: Packages | None, user: Host | None = None,
                    user_paths: "tuple[str, ...]" = ()) -> LibResolution:
    """Resolve every target in the load order of a real process (`import torch`, then
    `import torch_npu`, then `import vllm_ascend`; see ``load_order``). Targets built for
    another machine (vllm_ascend ships AArch64 AICPU kernels that run on the NPU's own
    cores) are noted, not resolved."""
    machine = HOST_MACHINES.get(host.info().arch or "x86_64", "EM_X86_64")
    dirs, lib = default_dirs_for(host, machine)
    plat = _TRIPLES.get(machine, ("", "x86_64"))[1]
    llp = tuple(p for p in env.env.get("LD_LIBRARY_PATH", "").split(":") if p)
    main = None
    if pkgs is not None and pkgs.executable and host.exists(pkgs.executable):
        main = host.realpath(pkgs.executable)  # ld.so takes $ORIGIN from /proc/self/exe
    ctx = SearchContext(llp, dirs, lib, plat, posixpath.dirname(main) if main else None, main)
    res = Resolver(host, cache, ctx, user, user_paths)
    pre, provided, note = torch_preload(host, pkgs)

    def native(t: str) -> bool:
        h = res.header(t)
        return not (isinstance(h, ElfHeader) and h.machine != machine)

    stages = load_order([(p, t) for p, t in targets if native(t)], pre)
    closures = []
    for pkg, t in targets:
        h = res.header(t)
        if isinstance(h, ElfHeader) and (h.machine != machine):
            closures.append(Closure(t, (), (), None, pkg,
                                    foreign=T("built for {elf}, this host is {host}: not "
                                              "loaded by the host's ld.so", elf=h.machine,
                                              host=machine)))
            continue
        inside = _canon(pkg) in IMPORT_ORDER
        closures.append(res.closure(t, preload_for(pkg, t, stages), provided if inside else {},
                                    pkg))
    note = join("; ", [note, T("each extension is resolved after what `import torch`, "
                               "`import torch_npu`, `import vllm_ascend` load before it (a "
                               "loaded soname is reused)")])
    return LibResolution(tuple(closures), env.source, llp, dirs,
                         cache.source if cache is not None else None, note, env.pid)


def _package_of_path(path: str) -> str:
    """An --elf path inside torch_npu/ or vllm_ascend/ is resolved as that package's file."""
    for pkg in ("torch_npu", "vllm_ascend"):
        if f"/{pkg}/" in path:
            return pkg
    return ""


def usable_cache(host: Host) -> tuple[LdCache | None, str]:
    """The cache ld.so would consult; a missing or corrupt one is searched as absent (the
    ldconf.cache check reports why)."""
    try:
        return parse_ldcache(host.read_bytes(LDCACHE), LDCACHE), LDCACHE
    except SourceMissing:
        return None, f"{LDCACHE} is missing: not consulted"
    except (ParseError, SourceError) as exc:
        return None, f"{LDCACHE} unusable ({exc.reason}): not consulted"


@provider
def gather_libresolution(host: Host, options: RunOptions, env: ServiceEnv,
                         pkgs: Packages | None) -> LibResolution:
    targets = package_elf_files(host, pkgs)
    targets += [(_package_of_path(p), p) for p in options.elf_paths]
    if not targets:
        raise SourceMissing(N_("torch_npu / vllm_ascend shared objects"),
                            T("neither package is installed in the service's interpreter "
                              "and no --elf path was given"))
    cache, _why = usable_cache(host)
    # --elf names the user's files (also under --root); what they load is the host's
    return resolve_targets(host, targets, env, cache, pkgs, user_files(host), options.elf_paths)
