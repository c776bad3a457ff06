"""The bundle format: the in-memory ``BundleData`` (index + blobs), its deterministic
tar.gz form, and the small encodings both the recording and the replaying side share
(index keys, error entries). Reading a bundle from disk is ``read.py``'s job."""

from __future__ import annotations

import io
import json
import tarfile
import threading
from typing import Any, Mapping

from ..errors import SourceError, SourceMissing
from .read import FORMAT, FORMAT_VERSION, MAX_BLOB, load_into  # noqa: F401  (re-exported)


def _key(*parts: Any) -> str:
    return json.dumps(parts, separators=(",", ":"))


class BundleData:
    """The in-memory content of a bundle: index entries and blobs."""

    def __init__(self) -> None:
        self.manifest: dict[str, Any] = {}
        # answers keyed by question; each value is a list (a sequence replayed in order)
        self.index: dict[str, dict[str, list[Any]]] = {}
        self.blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def blob(self, data: bytes) -> str:
        import hashlib  # only when recording: OpenSSL's module costs ~3 ms of a replay

        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            self.blobs.setdefault(digest, data)
        return digest

    def put(self, kind: str, key: str, value: Any, sequence: bool = False) -> None:
        with self._lock:
            table = self.index.setdefault(kind, {})
            if sequence:
                table.setdefault(key, []).append(value)
            else:
                table[key] = [value]

    def get(self, kind: str, key: str) -> list[Any] | None:
        return self.index.get(kind, {}).get(key)

    # -- on disk -----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """A deterministic tar.gz: sorted members, fixed mtimes, gzip mtime 0."""
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            def add(name: str, data: bytes) -> None:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 0
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
            add("manifest.json", json.dumps(self.manifest, indent=1, sort_keys=True).encode())
            add("index.json", json.dumps(self.index, sort_keys=True,
                                         separators=(",", ":")).encode())
            for digest in sorted(self.blobs):
                add(f"blobs/{digest}", self.blobs[digest])
        import gzip

        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
            gz.write(raw.getvalue())
        return out.getvalue()

    def write(self, path: str) -> None:
        from ..atomic import atomic_write
        atomic_write(path, self.to_bytes(), mode=0o600)

    @classmethod
    def load(cls, path_or_bytes: "str | bytes") -> "BundleData":
        """Read a bundle from a path or bytes through the bounded reader (read.py)."""
        return load_into(cls(), path_or_bytes)


def _short(argv, width: int = 80) -> str:
    text = " ".join(str(a) for a in argv).replace("\n", " ")
    return text if len(text) <= width else text[:width - 1] + "…"


def _err_entry(exc: Exception) -> dict[str, Any]:
    kind = "missing" if isinstance(exc, SourceMissing) else "error"
    return {"error": kind, "source": getattr(exc, "source", ""),
            "reason": getattr(exc, "reason", str(exc))}


def _raise(entry: Mapping[str, Any]) -> None:
    if entry.get("error") == "missing":
        raise SourceMissing(entry.get("source", ""), entry.get("reason", "not found"))
    raise SourceError(entry.get("source", ""), entry.get("reason", "unreadable"))
