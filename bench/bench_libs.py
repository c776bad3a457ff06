"""Resolving the full closure of torch_npu's and vllm_ascend's shared objects: our static
resolver against `ldd` over the same files (side by side, same run; a ratio, not a gate).

The wheels are unpacked into a temporary site-packages (from tests/.cache/wheels, else
/work/cache/wheels, else `pip download --no-deps`). Ours runs in a child process so its
peak RSS is measured the same way as ldd's (wait4 rusage of the child).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_CHILD = r"""
import sys, time, json
sys.path.insert(0, {repo!r})
from ascend_doctor.host import LiveHost
from ascend_doctor.probes.libresolve import Resolver, SearchContext, default_dirs_for, usable_cache
files = sys.argv[1:]
t = time.perf_counter()
host = LiveHost("/", env={{}})
cache, _ = usable_cache(host)
dirs, lib = default_dirs_for(host, "EM_X86_64")
res = Resolver(host, cache, SearchContext((), dirs, lib, "x86_64"))
n = sum(len(res.closure(f).resolutions) for f in files)
print(json.dumps({{"seconds": time.perf_counter() - t, "resolutions": n}}))
"""


def _wheels() -> list[Path]:
    out = []
    for pkg, req in (("torch_npu", "torch-npu==2.14.0"), ("vllm_ascend", "vllm-ascend==0.23.0")):
        for d in (REPO / "tests/.cache/wheels", Path("/work/cache/wheels")):
            found = sorted(d.glob(f"{pkg}-*.whl")) if d.is_dir() else []
            if found:
                out.append(found[0])
                break
        else:
            dest = REPO / "tests/.cache/wheels"
            dest.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--only-binary", ":all:", "-d", str(dest), req], check=True)
            out.append(sorted(dest.glob(f"{pkg}-*.whl"))[0])
    return out


def _x86_sos(site: Path) -> list[str]:
    files = []
    for w in _wheels():
        with zipfile.ZipFile(w) as z:
            for n in z.namelist():
                if n.endswith(".so") or ".so." in n.rsplit("/", 1)[-1]:
                    z.extract(n, site)
                    p = site / n
                    with open(p, "rb") as fh:
                        machine = fh.read(20)[18:20]
                    if machine == (62).to_bytes(2, "little"):  # EM_X86_64 only
                        files.append(str(p))
    return files


def _child(argv: list[str]) -> tuple[float, float, bytes]:
    """Wall time, peak RSS (MB, from GNU time's %M when present) and stdout of a child."""
    gnu_time = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None
    full = [gnu_time, "-f", "%M", *argv] if gnu_time else argv
    t = time.perf_counter()
    p = subprocess.run(full, capture_output=True, env={"PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - t
    rss = 0.0
    if gnu_time:
        last = p.stderr.decode(errors="replace").strip().splitlines()[-1:]
        rss = float(last[0]) / 1024.0 if last and last[0].isdigit() else 0.0
    return wall, rss, p.stdout


def run(quick: bool = False) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        files = _x86_sos(Path(tmp))
        if quick:
            files = files[:4]
        ours_wall, ours_rss, out = _child([sys.executable, "-c", _CHILD.format(repo=str(REPO)),
                                           *files])
        import json
        doc = json.loads(out)
        peer_s, peer_rss = 0.0, 0.0
        for f in files:
            s, rss, _ = _child(["ldd", f])
            peer_s += s
            peer_rss = max(peer_rss, rss)
    return [*system_rows(quick), {"name": f"libs: closure of {len(files)} torch_npu+vllm_ascend ELF files",
             "ours_s": round(doc["seconds"], 4), "peer": "ldd", "peer_s": round(peer_s, 4),
             "ours_rss_mb": round(ours_rss, 1), "peer_rss_mb": round(peer_rss, 1),
             "note": f"{doc['resolutions']} DT_NEEDED resolutions; ours in one process "
                     f"(wall incl. interpreter start {ours_wall:.2f} s), ldd once per file; "
                     f"ratio ours/ldd = {doc['seconds'] / peer_s:.2f}"}]


LIBDIR = "/usr/lib/x86_64-linux-gnu"

_ANSWERS = r"""
import json, os, sys
sys.path.insert(0, {repo!r})
from ascend_doctor.host import LiveHost
from ascend_doctor.probes.libresolve import Resolver, SearchContext, default_dirs_for, usable_cache
host = LiveHost("/", env={{}})
cache, _ = usable_cache(host)
dirs, lib = default_dirs_for(host, "EM_X86_64")
res = Resolver(host, cache, SearchContext((), dirs, lib, "x86_64"))
closures = {{f: res.closure(f) for f in sys.argv[1:]}}
if not os.environ.get("BENCH_ANSWERS"):  # the timed run: resolve only
    print(sum(len(c.resolutions) for c in closures.values()))
    sys.exit(0)
out = {{}}
for f, c in closures.items():  # the answers, compared outside the timing (realpath is slow)
    got = out[f] = {{}}
    for r in c.resolutions:
        if r.via != "provided":
            got.setdefault(r.name, os.path.realpath(r.path) if r.found and r.path else None)
print(json.dumps(out))
"""


def _system_elves() -> list[str]:
    """Every x86-64 ET_DYN regular file (not a link) directly in LIBDIR."""
    files = []
    for p in sorted(Path(LIBDIR).glob("*.so*")):
        if p.is_file() and not p.is_symlink():
            with open(p, "rb") as fh:
                h = fh.read(20)
            if h[:4] == b"\x7fELF" and h[18:20] == (62).to_bytes(2, "little") and h[16] == 3:
                files.append(str(p))
    return files


def _ldd_answers(out: str) -> dict:
    import re

    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|(\S+) \(0x)", line)
        if m:
            got[m.group(1)] = os.path.realpath(m.group(3)) if m.group(3) else None
    return got


def system_rows(quick: bool) -> list[dict]:
    """Our resolver in one process vs ldd once per file over every ELF in LIBDIR, timed in
    alternating pairs; answers (name -> resolved file or not found, the closure ldd prints,
    minus the ld-linux interpreter) compared file by file."""
    import json

    from common import measure_pair

    files = _system_elves()
    if not files:
        return []
    if quick:
        files = files[:40]
    env = {"PATH": "/usr/bin:/bin"}
    code = _ANSWERS.format(repo=str(REPO))
    ours_argv = [sys.executable, "-c", code, *files]
    peer_argv = ["/bin/sh", "-c", 'for f; do ldd "$f"; done', "sh", *files]
    with tempfile.TemporaryDirectory() as tmp:
        o, p, r = measure_pair(ours_argv, peer_argv, 1 if quick else 3, env=env, stdout_dir=tmp)
    ours = json.loads(subprocess.run(ours_argv, capture_output=True, text=True,
                                     env={**env, "BENCH_ANSWERS": "1"}).stdout)
    same = 0
    for f in files:
        theirs = _ldd_answers(subprocess.run(["ldd", f], capture_output=True, text=True).stdout)
        strip = lambda d: {k: v for k, v in d.items() if not k.startswith("ld-linux")}  # noqa: E731
        same += strip(ours[f]) == strip(theirs)
    return [{"name": f"libs: every ELF shared object in {LIBDIR} ({len(files)} files)",
             "ours_s": round(o[0], 4), "peer": "ldd FILE, once per file", "peer_s": round(p[0], 4),
             "ratio": r, "ours_rss_mb": round(o[1], 1), "peer_rss_mb": round(p[1], 1),
             "note": f"same answers as ldd for {same} of {len(files)} files; ours in one process "
                     f"incl. interpreter start; median of alternating pairs ldd/ours {r:.1f}"}]


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for row in run(quick="--quick" in sys.argv):
        print(row)
