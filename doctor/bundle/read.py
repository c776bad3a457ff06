"""Reading a bundle: it comes from a stranger. The tar is streamed through a bounded
inflater (total inflated size and ratio caps), each member is checked before it is read
(regular files with plain relative names only), and the JSON members are depth- and
size-bounded; every refusal is a one-line BundleError."""

from __future__ import annotations

import errno
import io
import os
import stat
import tarfile
from typing import Any, BinaryIO, Protocol, TypeVar

from .. import boundedjson
from ..errors import BundleError
from ..i18n import Msg, T

# The format's name and version, and the largest blob (format.py re-exports them: the
# reader needs them and format.py needs the reader, so they live here, one direction).
FORMAT = "ascend-doctor-bundle"
FORMAT_VERSION = 1
MAX_BLOB = 64 * 1024 * 1024


class _Target(Protocol):
    """What the reader fills (format.BundleData)."""
    manifest: dict[str, Any]
    index: dict[str, dict[str, list[Any]]]
    blobs: dict[str, bytes]


_T = TypeVar("_T", bound=_Target)

# Reading bounds (a bundle is hostile input; peak RSS must stay well under 256 MiB).
MAX_INDEX = 32 * 1024 * 1024        # manifest.json / index.json
MAX_INFLATED = 160 * 1024 * 1024    # the whole tar after gunzip, skipped members included
MAX_RATIO = 200                     # inflated / compressed, once past RATIO_FREE bytes
RATIO_FREE = 8 * 1024 * 1024


def _open_regular(path: str) -> BinaryIO:
    """A bundle path opened only when it is a regular file: a FIFO would block the reader
    forever and a device may act on open. Refused on stat before opening, and the opened
    descriptor (non-blocking, so a swapped-in FIFO cannot hang it) is checked again."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def load_into(data: _T, path_or_bytes: "str | bytes") -> _T:
    """Read a bundle from a path or bytes. Bundles come from strangers: the tar is
    streamed through a bounded inflater, only regular members with plain relative
    names are accepted, and the JSON members are depth- and size-bounded; anything
    else is a one-line BundleError."""
    name = path_or_bytes if isinstance(path_or_bytes, str) else "<bundle>"
    try:
        if isinstance(path_or_bytes, str):
            fh: BinaryIO = _open_regular(path_or_bytes)
        else:
            fh = io.BytesIO(path_or_bytes)
    except OSError as exc:
        raise BundleError(T("cannot read bundle {name}: {why}", name=name,
                             why=exc.strerror or str(exc))) from None
    try:
        with fh, tarfile.open(fileobj=_BoundedInflater(fh), mode="r|") as tar:
            for member in tar:
                _check_member(member)
                if member.isdir():
                    continue
                cap = MAX_INDEX if member.name.endswith(".json") else MAX_BLOB
                if member.size > cap:
                    raise BundleError(T("member {member} is {size} bytes (limit {cap})",
                                        member=repr(member.name), size=member.size, cap=cap))
                src = tar.extractfile(member)
                content = src.read(member.size) if src else b""
                if member.name == "manifest.json":
                    data.manifest = boundedjson.loads(content)
                elif member.name == "index.json":
                    data.index = boundedjson.loads(content)
                elif member.name.startswith("blobs/"):
                    data.blobs[member.name[6:]] = content
    except BundleError as exc:
        raise BundleError(T("{name} is refused: {reason}", name=name, reason=_reason(exc))) from None
    except (tarfile.TarError, EOFError, OSError, zlib_error()) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if reason.startswith("file could not be opened"):
            reason = T("not a tar or tar.gz file")
        raise BundleError(T("{name} is not a readable bundle (corrupt or truncated: {reason})",
                            name=name, reason=reason if isinstance(reason, Msg)
                            else reason[:160])) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(T("{name}: bundle metadata is not valid JSON ({reason})", name=name,
                            reason=str(exc)[:160])) from None
    if not isinstance(data.manifest, dict) or data.manifest.get("format") != FORMAT:
        raise BundleError(T("{name} is not an ascend-doctor bundle (no manifest.json "
                            "with format=ascend-doctor-bundle)", name=name))
    version = data.manifest.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(T("{name}: manifest.json format_version {version} is not a number",
                            name=name, version=repr(version)))
    if version > FORMAT_VERSION:
        raise BundleError(T("{name} has bundle format {version}; this ascend-doctor reads up "
                            "to {supported}", name=name, version=version,
                            supported=FORMAT_VERSION))
    if not isinstance(data.index, dict):
        raise BundleError(T("{name}: index.json is not an object", name=name))
    for kind, table in data.index.items():
        if not isinstance(table, dict):
            raise BundleError(T("{name}: index.json {kind} is not an object", name=name,
                                kind=repr(kind)))
        for key, entries in table.items():
            if not isinstance(entries, list):
                raise BundleError(T("{name}: index.json {kind} {key} is not a list", name=name,
                                    kind=kind, key=repr(key)))
            for e in entries:
                if not isinstance(e, dict):
                    continue
                for field in ("blob", "out", "err", "body"):
                    if field not in e or (field == "body" and e[field] in (None, "")):
                        continue
                    ref = e[field]
                    if not isinstance(ref, str) or ref not in data.blobs:
                        raise BundleError(T("{name} is truncated: blob {ref}… for a {kind} entry "
                                            "is missing", name=name, ref=str(ref)[:12],
                                            kind=kind))
    return data


def _reason(exc: BaseException) -> str:
    """The exception's message, kept a :class:`Msg` when it is one (so it translates)."""
    arg = exc.args[0] if exc.args else None
    return arg if isinstance(arg, Msg) else str(exc)


def zlib_error() -> type:
    import zlib
    return zlib.error


def _check_member(member: tarfile.TarInfo) -> None:
    """Only regular files and directories with plain relative names: a bundle never
    needs links, devices, FIFOs, absolute names or ``..`` (raise BundleError naming it)."""
    n = member.name
    if n.startswith("/"):
        raise BundleError(T("member {n} has an absolute name", n=repr(n)))
    if "\\" in n:
        raise BundleError(T("member {n} has a backslash in its name", n=repr(n)))
    if ".." in n.split("/"):
        raise BundleError(T("member {n} has a '..' component", n=repr(n)))
    if "\0" in n or not n.strip("/."):
        raise BundleError(T("member {n} has an invalid name", n=repr(n)))
    if member.issym() or member.islnk():
        raise BundleError(T("member {n} is a link (to {target})", n=repr(n),
                            target=repr(member.linkname)))
    if member.isdev():
        raise BundleError(T("member {n} is a device or FIFO", n=repr(n)))
    if not (member.isreg() or member.isdir()):
        raise BundleError(T("member {n} is not a regular file (tar type {kind})", n=repr(n),
                            kind=repr(member.type)))


class _BoundedInflater(io.RawIOBase):
    """A gzip (or plain tar) stream that inflates incrementally and stops at the caps:
    total inflated bytes and the inflation ratio. tarfile's stream mode reads through it,
    so skipped members count too and memory stays at one chunk's worth."""

    CHUNK_IN = 64 * 1024
    CHUNK_OUT = 256 * 1024

    def __init__(self, raw: BinaryIO) -> None:
        import zlib
        self._raw = raw
        self._in = 0
        self._out = 0
        self._inbuf = raw.read(self.CHUNK_IN)
        self._in = len(self._inbuf)
        self._z = (zlib.decompressobj(16 + zlib.MAX_WBITS)
                   if self._inbuf[:2] == b"\x1f\x8b" else None)
        self._pending = b""
        self._pos = 0
        self._eof = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        import zlib
        out = b""
        while not out and not self._eof:
            if not self._inbuf:
                self._inbuf = self._raw.read(self.CHUNK_IN)
                self._in += len(self._inbuf)
                if not self._inbuf:
                    self._eof = True
                    if self._z is not None:
                        out = self._z.flush()
                    break
            if self._z is None:
                out, self._inbuf = self._inbuf, b""
                continue
            out = self._z.decompress(self._inbuf, self.CHUNK_OUT)
            self._inbuf = self._z.unconsumed_tail
            if self._z.eof:
                rest = self._z.unused_data.lstrip(b"\0")
                if rest:  # concatenated gzip members
                    self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    self._inbuf = rest
                else:
                    self._eof = True
        self._pending, self._pos = out, 0
        self._out += len(out)
        if self._out > MAX_INFLATED:
            raise BundleError(T("it inflates past {mib} MiB", mib=MAX_INFLATED >> 20))
        if self._out > RATIO_FREE and self._out > MAX_RATIO * max(self._in, 1):
            raise BundleError(T("it inflates more than {ratio}:1 (a compression bomb)",
                                 ratio=MAX_RATIO))

    def readinto(self, b) -> int:
        if self._pos >= len(self._pending):
            self._fill()
        n = min(len(b), len(self._pending) - self._pos)
        b[:n] = self._pending[self._pos:self._pos + n]
        self._pos += n
        return n

