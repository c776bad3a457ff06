"""Byte redaction of a large vLLM log (doctor/redact.py ``redact_bytes``, the path `collect`
uses for every file, stream range and HTTP body) side by side with ``sed -E`` doing one
similar substitution (``NAME…=value`` for the secret-name markers, case-insensitive) over the
same file, and with the previous redactor (every line through all of redact_text's
patterns) in the same kind of child process.

Each runs as a fresh child process; the times are the child's wall time, so interpreter
start-up and ``import doctor.redact`` are included for ours (≈40 ms; the regexes compile at
import). Bytecode compilation is not included: the .pyc files exist after the first run
(run it once, or use the median, which is what bench/common.py reports).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_OURS = r"""
import sys
sys.path.insert(0, {repo!r})
from ascend_doctor.redact import redact_bytes
with open(sys.argv[1], "rb") as fh:
    data = fh.read()
out = redact_bytes(data)
assert b"hf_PlantedBenchToken" not in out
"""

_PREVIOUS = r"""
import sys
sys.path.insert(0, {repo!r})
from ascend_doctor.redact import Redactor, _redact_text_plain
class Previous(Redactor):
    _text = staticmethod(_redact_text_plain)
    def _redact(self, chunk):
        return self._redact_all(chunk)
with open(sys.argv[1], "rb") as fh:
    data = fh.read()
r = Previous()
out = r.feed(data) + r.close()
assert b"hf_PlantedBenchToken" not in out
"""

SED = (r"s/([A-Za-z0-9_.-]*(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE)"
       r"[A-Za-z0-9_.-]*[ \t]*=[ \t]*)[^ \t\"'&;]+/\1<redacted>/gI")

LINES = [
    "INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: {n}.0 tokens/s, "
    "Avg generation throughput: 903.2 tokens/s, Running: 48 reqs, GPU KV cache usage: 97.0%",
    'INFO:     10.0.0.7:{n} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "DEBUG 11-20 03:06:03 [client.py:41] GET http://127.0.0.1:8000/v1/models took {n} us",
    "INFO 11-20 03:06:04 [engine.py:9] Added request chatcmpl-{n}: prompt: 'Hello, my name is', "
    "params: SamplingParams(n=1, temperature=0.7, max_tokens=256)",
    "WARNING 11-20 03:06:05 [worker.py:7] npu memory usage {n} MiB of 65536, task queue peak 3",
]
SECRETS = ["HF_TOKEN=hf_PlantedBenchToken0001", "Authorization: Bearer planted-bench-bearer-02",
           "pip https://ci:planted-pw-03@mirror.example/simple", "OBS_SK=plantedObsSk04"]


def _log(path: Path, mib: int) -> None:
    rnd = random.Random(7)
    size, target = 0, mib * 2**20
    with open(path, "w") as fh:
        while size < target:
            line = rnd.choice(LINES).format(n=rnd.randint(0, 99999))
            if rnd.random() < 0.001:
                line += " " + rnd.choice(SECRETS)
            fh.write(line + "\n")
            size += len(line) + 1


def _timed(argv: list[str]) -> tuple[float, float]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import measure_once

    wall, rss, rc = measure_once(argv)
    if rc != 0:
        raise RuntimeError(f"{argv[0]} exited {rc}")
    return wall, rss


def run(quick: bool = False) -> list[dict]:
    mib = 3 if quick else 15
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "server.log"
        _log(log, mib)
        py = [sys.executable, "-c"]
        _timed([*py, _OURS.format(repo=str(REPO)), str(log)])  # warm: .pyc written, cache hot
        ours_s, ours_rss = _timed([*py, _OURS.format(repo=str(REPO)), str(log)])
        sed_s, sed_rss = _timed(["sh", "-c", 'exec sed -E "$0" "$1" > /dev/null', SED, str(log)])
        prev_s, prev_rss = _timed([*py, _PREVIOUS.format(repo=str(REPO)), str(log)])
    note = ("ours: every shape (names, flags, headers, bearer, URLs, argv, tokens, PEM), "
            "child wall time incl. start-up + import, no bytecode compile; sed: one pattern")
    return [
        {"name": f"redact_bytes, {mib} MiB vLLM log", "ours_s": round(ours_s, 3),
         "peer": "sed -E (NAME=value only, /gI)", "peer_s": round(sed_s, 3),
         "ours_rss_mb": round(ours_rss, 1), "peer_rss_mb": round(sed_rss, 1), "note": note},
        {"name": f"redact_bytes vs previous, {mib} MiB", "ours_s": round(ours_s, 3),
         "peer": "previous redactor (all patterns on every line)", "peer_s": round(prev_s, 3),
         "ours_rss_mb": round(ours_rss, 1), "peer_rss_mb": round(prev_rss, 1),
         "note": "same output (tests/unit/test_redact_fast.py)"},
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
