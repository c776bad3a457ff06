"""/etc/ld.so.conf with its include globs, as ldconfig reads it.

``parse_ldconf_text`` is pure (one file's text → directives); ``gather_ldconf`` walks the
includes through the Host, recording for each directory the file and line that set it.
"""

from __future__ import annotations

import posixpath

from ..errors import SourceError, SourceMissing, describe
from ..i18n import T
from ..host import Host
from dataclasses import dataclass
from ..registry import provider

LDSO_CONF = "/etc/ld.so.conf"


@dataclass(frozen=True, eq=False)
class Directive:
    """One line of an ld.so.conf file that says something."""

    kind: str  # dir | include | hwcap
    value: str
    line: int


@dataclass(frozen=True, eq=False)
class ConfFile:
    """An ld.so.conf file reached: its owner and mode, or why it could not be read."""

    path: str
    mode: int | None  # permission bits; None when it could not be stat'ed
    uid: int | None
    mtime: float | None
    readable: bool
    error: str | None = None


@dataclass(frozen=True)
class SearchDir:
    """A directory ldconfig searches, and the file line that adds it."""

    path: str
    origin: str  # "file:line"


@dataclass(frozen=True, eq=False)
class LdSoConf:
    """ld.so.conf with its includes followed: the search path and every file read."""

    search_dirs: tuple[SearchDir, ...]
    files: tuple[ConfFile, ...]  # every conf file reached, in read order
    problems: tuple[str, ...] = ()  # include loops, unreadable files, bad encodings

    @property
    def dirs(self) -> list[str]:
        return [d.path for d in self.search_dirs]

    def origin_of(self, path: str) -> str:
        for d in self.search_dirs:
            if d.path == path:
                return d.origin
        return "?"


def parse_ldconf_text(text: str) -> list[Directive]:
    """Directives of one conf file: comments after '#', dirs split on ':', ',', whitespace."""
    out: list[Directive] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word, _, rest = line.partition(" ")
        if word == "include":
            for pat in rest.split():
                out.append(Directive("include", pat, n))
        elif word == "hwcap":
            out.append(Directive("hwcap", rest.strip(), n))
        else:
            for token in line.replace(",", " ").replace(":", " ").replace("\t", " ").split():
                if token.startswith("/"):
                    out.append(Directive("dir", posixpath.normpath(token), n))
    return out


def walk_ldconf(host: Host, path: str = LDSO_CONF, max_depth: int = 16) -> LdSoConf:
    dirs: list[SearchDir] = []
    files: list[ConfFile] = []
    problems: list[str] = []
    seen_dirs: set[str] = set()
    active: list[str] = []

    def visit(conf: str, depth: int) -> None:
        if conf in active:
            problems.append(f"include loop: {' -> '.join(active + [conf])}")
            return
        if depth > max_depth:
            problems.append(f"includes nested deeper than {max_depth} at {conf}")
            return
        try:
            st = host.stat(conf)
            mode, uid, mtime = st.perm, st.uid, st.mtime
        except SourceMissing:
            if conf == path:
                raise
            problems.append(T("{path}: included but missing", path=conf))
            return
        except SourceError as exc:
            mode = uid = mtime = None
            problems.append(describe(exc))
        try:
            raw = host.read_bytes(conf, 1024 * 1024)
        except SourceError as exc:
            files.append(ConfFile(conf, mode, uid, mtime, False, exc.reason))
            problems.append(f"{conf}: {exc.reason}")
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{conf}: not UTF-8 (byte {exc.start}); read with replacement")
            text = raw.decode("utf-8", "replace")
        files.append(ConfFile(conf, mode, uid, mtime, True))
        active.append(conf)
        for d in parse_ldconf_text(text):
            if d.kind == "dir":
                if d.value not in seen_dirs:
                    seen_dirs.add(d.value)
                    dirs.append(SearchDir(d.value, f"{conf}:{d.line}"))
            elif d.kind == "include":
                pattern = d.value if d.value.startswith("/") else posixpath.join(
                    posixpath.dirname(conf), d.value)
                for inc in host.glob(pattern):
                    visit(inc, depth + 1)
        active.pop()

    visit(path, 0)
    return LdSoConf(tuple(dirs), tuple(files), tuple(problems))


@provider
def gather_ldconf(host: Host) -> LdSoConf:
    return walk_ldconf(host)


# -- what ldconfig would see besides the conf text ------------------------------------------
CONF_D = "/etc/ld.so.conf.d"
MAX_DIR_ENTRIES = 4000


@dataclass(frozen=True, eq=False)
class UnreachedConf:
    """A conf file that names Ascend directories but is not read by ldconfig."""

    path: str
    ascend_dirs: tuple[str, ...]
    mode: int | None = None
    uid: int | None = None


@dataclass(frozen=True, eq=False)
class DirState:
    """A search directory as it is on disk: present, owner, mode, the libraries it holds."""

    path: str
    origin: str  # file:line, or "holds <conf>" for a conf directory
    exists: bool
    mode: int | None = None
    uid: int | None = None
    libs: tuple[str, ...] = ()  # lib*.so / lib*.so.N names listed in it (bounded)
    error: str | None = None


@dataclass(frozen=True, eq=False)
class LdConfState:
    """Unreached Ascend conf files, the configured dirs and the dirs holding conf files."""

    unreached: tuple[UnreachedConf, ...]
    search_dirs: tuple[DirState, ...]
    conf_dirs: tuple[DirState, ...]


def _is_lib_name(name: str) -> bool:
    if not name.startswith("lib") or ".so" not in name:
        return False
    head, _, tail = name.partition(".so")
    return tail == "" or (tail.startswith(".") and tail[1:].replace(".", "").isdigit()
                          and tail.count(".") == 1)


def _ascend_dirs_in(text: str) -> tuple[str, ...]:
    return tuple(d.value for d in parse_ldconf_text(text)
                 if d.kind == "dir" and "/Ascend/" in d.value + "/")


def _dir_state(host: Host, path: str, origin: str, list_libs: bool) -> DirState:
    try:
        st = host.stat(path)
    except SourceMissing:
        return DirState(path, origin, False)
    except SourceError as exc:
        return DirState(path, origin, True, error=exc.reason)
    libs: tuple[str, ...] = ()
    err = None
    if list_libs and st.is_dir:
        try:
            libs = tuple(n for n in host.listdir(path)[:MAX_DIR_ENTRIES] if _is_lib_name(n))
        except (SourceMissing, SourceError) as exc:
            err = exc.reason
    return DirState(path, origin, st.is_dir, st.perm, st.uid, libs, err)


@provider
def gather_ldconf_state(host: Host, conf: LdSoConf) -> LdConfState:
    reached = {f.path for f in conf.files}
    unreached = []
    cands = host.glob(f"{CONF_D}/*")
    for c in cands:
        if c in reached:
            continue
        try:
            text = host.read_bytes(c, 1024 * 1024).decode("utf-8", "replace")
        except (SourceMissing, SourceError):
            text = ""
        dirs = _ascend_dirs_in(text)
        if dirs or "ascend" in posixpath.basename(c).lower():
            try:
                st = host.stat(c)
                mode, uid = st.perm, st.uid
            except (SourceMissing, SourceError):
                mode = uid = None
            unreached.append(UnreachedConf(c, dirs, mode, uid))
    search = tuple(_dir_state(host, d.path, d.origin, True) for d in conf.search_dirs)
    holders: dict[str, str] = {}
    for f in conf.files:
        holders.setdefault(posixpath.dirname(f.path), f.path)
    if host.is_dir(CONF_D):
        holders.setdefault(CONF_D, CONF_D)
    conf_dirs = tuple(_dir_state(host, d, f"holds {f}", False) for d, f in holders.items())
    return LdConfState(tuple(unreached), search, conf_dirs)
