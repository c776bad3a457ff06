"""Real artifacts from the package registry, fetched once into tests/.cache.

Only paths inside the repository are used (no machine-specific shared folders). A fetch
retries, and when it still fails the test fails with the exact command and pip's last words:
a real-artifact test must not turn into a silent skip.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"
WHEELS = CACHE / "wheels"
ATTEMPTS = 3
FETCH_TIMEOUT_S = 900.0


class ArtifactError(RuntimeError):
    """The registry did not give the artifact: says which command failed and why."""


def wheel(spec: str, pattern: str, *extra: str) -> Path:
    """The wheel for ``spec`` (e.g. ``torch-npu==2.14.0``) matching ``pattern`` in the cache.

    ``extra`` are further ``pip download`` options (``--platform``…).
    """
    WHEELS.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEELS.glob(pattern))
    if found:
        return found[0]
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
            "--python-version", "3.11", *extra, "-d", str(WHEELS), spec]
    last = ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
            last = (r.stderr or r.stdout)[-500:].strip() or f"exit status {r.returncode}"
        except subprocess.TimeoutExpired:
            last = f"timed out after {FETCH_TIMEOUT_S:.0f} s"
        found = sorted(WHEELS.glob(pattern))
        if found:
            return found[0]
        if attempt < ATTEMPTS:
            time.sleep(2.0 * attempt)
    raise ArtifactError(f"cannot obtain {spec} after {ATTEMPTS} attempts "
                        f"({' '.join(argv[2:])}): {last}")
