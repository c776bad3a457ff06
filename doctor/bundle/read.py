"""Reading a bundle: it comes from a stranger. The tar is streamed through a bounded
inflater (total inflated size and ratio caps), each member is checked before it is read
(regular files with plain relative names only), and the JSON members are depth- and
size-bounded; every refusal is a one-line BundleError."""

from __future__ import annotations

import io
import tarfile
from typing import TYPE_CHECKING, BinaryIO

from .. import boundedjson
from ..errors import BundleError
from .format import FORMAT, FORMAT_VERSION, MAX_BLOB

if TYPE_CHECKING:
    from .format import BundleData

# Reading bounds (a bundle is hostile input; peak RSS must stay well under 256 MiB).
MAX_INDEX = 32 * 1024 * 1024        # manifest.json / index.json
MAX_INFLATED = 160 * 1024 * 1024    # the whole tar after gunzip, skipped members included
MAX_RATIO = 200                     # inflated / compressed, once past RATIO_FREE bytes
RATIO_FREE = 8 * 1024 * 1024


def load_into(data: "BundleData", path_or_bytes: "str | bytes") -> "BundleData":
    """Read a bundle from a path or bytes. Bundles come from strangers: the tar is
    streamed through a bounded inflater, only regular members with plain relative
    names are accepted, and the JSON members are depth- and size-bounded; anything
    else is a one-line BundleError."""
    name = path_or_bytes if isinstance(path_or_bytes, str) else "<bundle>"
    try:
        if isinstance(path_or_bytes, str):
            fh: BinaryIO = open(path_or_bytes, "rb")
        else:
            fh = io.BytesIO(path_or_bytes)
    except OSError as exc:
        raise BundleError(f"cannot read bundle {name}: {exc.strerror or exc}") from None
    try:
        with fh, tarfile.open(fileobj=_BoundedInflater(fh), mode="r|") as tar:
            for member in tar:
                _check_member(member)
                if member.isdir():
                    continue
                cap = MAX_INDEX if member.name.endswith(".json") else MAX_BLOB
                if member.size > cap:
                    raise BundleError(f"member {member.name!r} is {member.size} bytes "
                                      f"(limit {cap})")
                src = tar.extractfile(member)
                content = src.read(member.size) if src else b""
                if member.name == "manifest.json":
                    data.manifest = boundedjson.loads(content)
                elif member.name == "index.json":
                    data.index = boundedjson.loads(content)
                elif member.name.startswith("blobs/"):
                    data.blobs[member.name[6:]] = content
    except BundleError as exc:
        raise BundleError(f"{name} is refused: {exc}") from None
    except (tarfile.TarError, EOFError, OSError, zlib_error()) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if reason.startswith("file could not be opened"):
            reason = "not a tar or tar.gz file"
        raise BundleError(f"{name} is not a readable bundle (corrupt or truncated: "
                          f"{reason[:160]})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{name}: bundle metadata is not valid JSON "
                          f"({str(exc)[:160]})") from None
    if not isinstance(data.manifest, dict) or data.manifest.get("format") != FORMAT:
        raise BundleError(f"{name} is not an ascend-doctor bundle (no manifest.json "
                          "with format=ascend-doctor-bundle)")
    version = data.manifest.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise BundleError(f"{name}: manifest.json format_version {version!r} is not a number")
    if version > FORMAT_VERSION:
        raise BundleError(f"{name} has bundle format {version}; "
                          f"this ascend-doctor reads up to {FORMAT_VERSION}")
    if not isinstance(data.index, dict):
        raise BundleError(f"{name}: index.json is not an object")
    for kind, table in data.index.items():
        if not isinstance(table, dict):
            raise BundleError(f"{name}: index.json {kind!r} is not an object")
        for key, entries in table.items():
            if not isinstance(entries, list):
                raise BundleError(f"{name}: index.json {kind} {key!r} is not a list")
            for e in entries:
                if not isinstance(e, dict):
                    continue
                for field in ("blob", "out", "err", "body"):
                    if field not in e or (field == "body" and e[field] in (None, "")):
                        continue
                    ref = e[field]
                    if not isinstance(ref, str) or ref not in data.blobs:
                        raise BundleError(f"{name} is truncated: blob {str(ref)[:12]}… "
                                          f"for a {kind} entry is missing")
    return data


def zlib_error() -> type:
    import zlib
    return zlib.error


def _check_member(member: tarfile.TarInfo) -> None:
    """Only regular files and directories with plain relative names: a bundle never
    needs links, devices, FIFOs, absolute names or ``..`` (raise BundleError naming it)."""
    n = member.name
    if n.startswith("/"):
        raise BundleError(f"member {n!r} has an absolute name")
    if "\\" in n:
        raise BundleError(f"member {n!r} has a backslash in its name")
    if ".." in n.split("/"):
        raise BundleError(f"member {n!r} has a '..' component")
    if "\0" in n or not n.strip("/."):
        raise BundleError(f"member {n!r} has an invalid name")
    if member.issym() or member.islnk():
        raise BundleError(f"member {n!r} is a link (to {member.linkname!r})")
    if member.isdev():
        raise BundleError(f"member {n!r} is a device or FIFO")
    if not (member.isreg() or member.isdir()):
        raise BundleError(f"member {n!r} is not a regular file (tar type {member.type!r})")


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
            raise BundleError(f"it inflates past {MAX_INFLATED >> 20} MiB")
        if self._out > RATIO_FREE and self._out > MAX_RATIO * max(self._in, 1):
            raise BundleError(f"it inflates more than {MAX_RATIO}:1 (a compression bomb)")

    def readinto(self, b) -> int:
        if self._pos >= len(self._pending):
            self._fill()
        n = min(len(b), len(self._pending) - self._pos)
        b[:n] = self._pending[self._pos:self._pos + n]
        self._pos += n
        return n

