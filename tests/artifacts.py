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


def wheel(spec: str, pattern: str, *extra: str, dest: Path = WHEELS) -> Path:
    """The wheel for ``spec`` (e.g. ``torch-npu==2.14.0``) matching ``pattern`` in the cache.

    ``extra`` are further ``pip download`` options (``--platform``…); ``dest`` the cache
    directory (another machine's wheels keep their own, so a glob never mixes them).
    """
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(pattern))
    if found:
        return found[0]
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
            "--python-version", "3.11", *extra, "-d", str(dest), spec]
    last = ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
            last = (r.stderr or r.stdout)[-500:].strip() or f"exit status {r.returncode}"
        except subprocess.TimeoutExpired:
            last = f"timed out after {FETCH_TIMEOUT_S:.0f} s"
        found = sorted(dest.glob(pattern))
        if found:
            return found[0]
        if attempt < ATTEMPTS:
            time.sleep(2.0 * attempt)
    raise ArtifactError(f"cannot obtain {spec} after {ATTEMPTS} attempts "
                        f"({' '.join(argv[2:])}): {last}")


# The aarch64 (Kunpeng) builds of the same releases, for tests/aarch64/: their own directory.
WHEELS_AARCH64 = CACHE / "wheels-aarch64"
# pip's --platform takes exact tags: every manylinux glibc level up to bookworm's 2.36
# (torch_npu 2.14.0 is manylinux_2_28, vllm_ascend 0.23.0 manylinux_2_34)
AARCH64_PLATFORMS = tuple(a for v in ["2014", *(f"_2_{n}" for n in range(17, 37))]
                          for a in ("--platform", f"manylinux{v}_aarch64"))


def aarch64_wheel(spec: str, pattern: str) -> Path:
    """The aarch64 wheel for ``spec`` (CPython 3.11, manylinux aarch64), fetched once."""
    return wheel(spec, pattern, *AARCH64_PLATFORMS, dest=WHEELS_AARCH64)


if __name__ == "__main__":  # tests/aarch64/build_userland.sh: SPEC PATTERN ... → the paths
    pairs = sys.argv[1:]
    for spec, pat in zip(pairs[::2], pairs[1::2]):
        print(aarch64_wheel(spec, pat))
