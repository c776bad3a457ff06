"""Log triage over a large vLLM log: our streamed signature matcher (checks/logs.py
``match_stream``: literal prefilter + KnowledgeBase.match_lines, line numbers kept) against
``grep -E -n -i`` with the same signatures (side by side, same file, same run; a ratio).

Both run as child processes so their peak RSS is measured alike (wait4 rusage).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_CHILD = r"""
import sys, json
sys.path.insert(0, {repo!r})
import knowledge
from checks.logs import match_stream
from doctor.probes.logs import iter_lines
with open(sys.argv[1], "rb") as fh:
    m = match_stream(knowledge.load(), iter_lines(fh, None))
print(json.dumps([[a.entry.id, a.count] for a in m]))
"""

STATS = ("INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: 5198.0 tokens/s, "
         "Avg generation throughput: 903.2 tokens/s, Running: 48 reqs, Waiting: 140 reqs, GPU KV "
         "cache usage: 97.0%, Prefix cache hit rate: 0.0%\n")
ACCESS = 'INFO:     10.0.0.7:51514 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
ERRORS = ["RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB total)\n",
          "EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.\n"]


def _log(path: Path, lines: int) -> None:
    with open(path, "w") as fh:
        for i in range(lines):
            fh.write(ERRORS[i % 2] if i % 50_000 == 49_999 else (STATS if i % 10 == 0 else ACCESS))


def _timed(argv: list[str]) -> tuple[float, float, None]:
    """(wall seconds, peak RSS MB, None) of one child process (GNU time's %M, see common.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import measure_once

    wall, rss, _rc = measure_once(argv)  # grep exits 1 when nothing matched: not an error
    return wall, rss, None


def run(quick: bool = False) -> list[dict]:
    import knowledge

    lines = 100_000 if quick else 1_000_000
    sigs = [re.sub(r"\(\?P<\w+>", "(", s) for e in knowledge.load().entries.values()
            for s in e.signatures]
    ere = "|".join(f"({s.replace('(?:', '(')})" for s in sigs).replace(r"\d", "[0-9]") \
        .replace(r"\w", "[A-Za-z0-9_]").replace(r"\b", r"\b")
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "server.log"
        _log(log, lines)
        ours_s, ours_rss, _ = _timed([sys.executable, "-c", _CHILD.format(repo=str(REPO)),
                                      str(log)])
        peer_s, peer_rss, _ = _timed(["grep", "-E", "-n", "-i", ere, str(log)])
        size = log.stat().st_size
    return [{"name": f"log triage, {lines} lines ({size / 2**20:.0f} MiB)", "ours_s": round(ours_s, 3),
             "peer": "grep -E -n -i (same signatures, no ranking)", "peer_s": round(peer_s, 3),
             "ours_rss_mb": round(ours_rss, 1), "peer_rss_mb": round(peer_rss, 1),
             "note": "ours ranks KB entries and keeps line numbers; grep only prints matches"}]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
