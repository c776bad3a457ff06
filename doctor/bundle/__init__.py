"""Bundles: everything the checks read on one host, replayable offline.

A bundle is a gzip'd tar holding ``manifest.json`` (tool, host, time, what could not be
collected), ``index.json`` (every answer the Host gave, keyed by the question) and
``blobs/<sha256>`` (file contents, command output, HTTP bodies). ``RecordingHost`` wraps a
live Host and writes one; ``BundleHost`` answers the same questions from it. The demo
scenario is a bundle built by ``doctor/demo/build.py`` with ``BundleWriter``.

Secrets are redacted when recorded: a bundle never holds them.

Pieces: ``format`` (BundleData, the tar.gz form), ``read`` (the bounded reader: inflate
caps, member refusal, bounded JSON), ``record`` (RecordingHost, used by `collect`),
``replay`` (BundleHost and its fix overlay), ``writer`` (BundleWriter). Every name that
lived in the old single module is re-exported here.
"""

from __future__ import annotations

from .format import (FORMAT, FORMAT_VERSION, MAX_BLOB, BundleData, _err_entry, _key, _raise,
                     _short)
from .read import (MAX_INDEX, MAX_INFLATED, MAX_RATIO, RATIO_FREE, _BoundedInflater,
                   _check_member, load_into, zlib_error)
from .record import RecordingHost, _RecordingStream, _redact_file, _stat_entry
from .replay import BundleHost, _glob_match, _guard_replay, _MALFORMED, _SparseStream
from .writer import BundleWriter

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_BLOB", "MAX_INDEX", "MAX_INFLATED", "MAX_RATIO",
           "RATIO_FREE", "BundleData", "BundleHost", "BundleWriter", "RecordingHost",
           "load_into", "zlib_error"]
