"""Which curated entries recognise vLLM's own messages in each release users run (issue 32,
item 3: messages are reworded between releases).

For each vLLM release below, the release's source distribution (the registry's sdist, checked
against the sha256 the registry publishes, cached in tests/.cache/vllm-sdists) is indexed like
an installed vLLM (knowledge/srcindex.py: every raise, assert, error log and error response,
as a template); each template is rendered with sample values and read by the knowledge base.
The table says, per entry, in which releases some vLLM message of it is recognised: an entry
recognised in the newest and the oldest but not in between, or no longer in a newer release,
points at a reworded message its signature misses.

    python tests/corpus/releases.py                 # the table (downloads ~50 MB once)
    python tests/corpus/releases.py --site DIR      # add an installed vLLM (site-packages)

Not part of the test suite: it needs the registry's JSON API and the sdists, which pip cannot
fetch without building them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RELEASES = ("0.6.6.post1", "0.7.3", "0.8.5.post1", "0.9.2", "0.10.2", "0.11.0")
CACHE = REPO / "tests" / ".cache" / "vllm-sdists"
PYPI = "https://pypi.org/pypi/vllm/json"
# what a placeholder becomes: a number, a word, an architecture name (a signature's group
# may want any of them)
SAMPLES = ("4096", "foo", "Qwen2ForCausalLM")


def sdist(version: str, cache: Path = CACHE) -> Path:
    """The release's sdist, downloaded once and checked against the registry's sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"vllm-{version}.tar.gz"))
    meta_url = PYPI
    with urllib.request.urlopen(meta_url, timeout=60) as r:
        meta = json.load(r)
    (src,) = [u for u in meta["releases"][version] if u["packagetype"] == "sdist"]
    path = found[0] if found else cache / src["filename"]
    if not path.exists():
        with urllib.request.urlopen(urllib.parse.urljoin(meta_url, src["url"]), timeout=600) as r:
            data = r.read()
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != src["digests"]["sha256"]:
        path.unlink()
        raise SystemExit(f"{path.name}: sha256 {digest} is not the registry's")
    return path


def sdist_sites(path: Path, version: str) -> list:
    """The raise/log sites of the ``vllm`` package inside an sdist."""
    from ascend_doctor.knowledge.srcindex import sites_of_source

    out = []
    with tarfile.open(path) as tf:
        for m in tf:
            parts = m.name.split("/")
            if len(parts) > 2 and parts[1] == "vllm" and m.name.endswith(".py") and m.isfile():
                fh = tf.extractfile(m)
                if fh is not None:
                    out += sites_of_source(fh.read(), "vllm", version, "/".join(parts[1:]))
    return out


def site_sites(site: Path) -> tuple[str, list]:
    """The version and sites of the vllm installed under a site-packages directory."""
    from ascend_doctor.probes.srcindex import index_local

    index = index_local([str(site)])
    if index is None or "vllm" not in index.packages:
        raise SystemExit(f"no vllm under {site}")
    return index.packages["vllm"], [s for s in index.sites if s.package == "vllm"]


def recognised(kb, sites: list) -> dict[str, set[tuple[str, str]]]:
    """Entry id -> the (file, function) of the templates whose rendering it matches."""
    from ascend_doctor.knowledge.srcindex import HOLE

    lines, origin = [], []
    for s in sites:
        for sample in SAMPLES:
            for piece in s.template.split("\n"):
                lines.append(piece.replace(HOLE, sample))
                origin.append(s)
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for m in kb.match_lines(lines):
        for n, _ in m.lines:
            s = origin[n - 1]
            found[m.entry.id].add((s.file, s.function))
    return found


def table(columns: dict[str, dict[str, set[tuple[str, str]]]]) -> str:
    ids = sorted({i for found in columns.values() for i in found})
    head = "entry".ljust(14) + " ".join(v[:11].ljust(11) for v in columns)
    rows = [head]
    for i in ids:
        rows.append(i.ljust(14) + " ".join(("yes" if i in found else "-").ljust(11)
                                          for found in columns.values()))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", action="append", default=[], type=Path,
                    help="a site-packages directory with an installed vllm (repeatable)")
    args = ap.parse_args(argv)
    from ascend_doctor import knowledge

    kb = knowledge.load()
    columns = {}
    for v in RELEASES:
        columns[v] = recognised(kb, sdist_sites(sdist(v), v))
    for site in args.site:
        v, sites = site_sites(site)
        columns[v] = recognised(kb, sites)
    print(table(columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
