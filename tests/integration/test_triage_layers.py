"""`ascend-doctor triage` through the real entry point: where each answer came from, the
decisive line when nothing is known, a realistic server log, bounded memory on endless
lines (plain and compressed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import doctor_exe

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))


def test_json_names_the_source_and_confidence_of_each_answer(cli):
    log = ("(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] RuntimeError: ACL stream "
           "synchronize failed, error code:507013\n")
    r = cli("triage", "-", "--json", "--lang", "en", input=log)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    first = doc["answers"][0]
    assert first["source"] == "code-table" and first["id"] == "acl:507013"
    assert 0 < first["confidence"] <= 1 and first["decisive"]
    assert "https://" in first["code"]["document"]
    assert not any(a["id"] == "ASC-ACL-005" for a in doc["answers"])  # 507013 is not 507035
    assert doc["source_index"] == {"available": False, "reason": doc["source_index"]["reason"]}
    assert "not available" not in r.stdout and doc["decisive"]["line"] == 1


def test_no_match_still_says_the_decisive_line_and_the_next_command(cli):
    log = ("INFO 11-20 03:00:00 [api_server.py:1] all fine\n"
           "(EngineCore_DP0 pid=4) ERROR 11-20 03:00:01 [core.py:1] RuntimeError: Unsupported "
           "CPU attention configuration: head_dim=8 isa=1 kv_cache_idx=0\n")
    r = cli("triage", "-", "--lang", "en", input=log)
    assert r.returncode == 1
    assert "decisive line 2: " in r.stdout and "head_dim=8" in r.stdout
    assert "ascend-doctor check --only libs" in r.stdout
    assert "source index: not available" in r.stderr


def test_site_packages_trace_a_line_to_its_raise_site(cli, tmp_path):
    pkg = tmp_path / "vllm_ascend"
    pkg.mkdir()
    (pkg / "worker.py").write_text(
        "def init_device(rank):\n"
        "    if rank > 7:\n"
        "        raise RuntimeError(f'NPU rank {rank} has no device in this container')\n")
    (tmp_path / "vllm_ascend-0.23.0.dist-info").mkdir()
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = cli("triage", "-", "--json", "--site", str(tmp_path), env=env,
            input="RuntimeError: NPU rank 9 has no device in this container\n")
    doc = json.loads(r.stdout)
    assert doc["source_index"] == {"available": True, "packages": {"vllm_ascend": "0.23.0"}}
    a = doc["answers"][0]
    assert a["source"] == "source-template"
    assert a["template"]["file"] == "vllm_ascend/worker.py" and a["template"]["line"] == 3
    assert a["template"]["guard"] == "rank > 7" and a["template"]["function"] == "init_device"


def test_a_realistic_server_log_is_read_as_every_line_would_be(tmp_path):
    """The prefiltered read (block scan, events) finds what matching every line finds."""
    from bench_logs import grep_lines, our_signature_lines, realistic_log

    from ascend_doctor import knowledge
    from ascend_doctor.cli_kb import read_log

    log = tmp_path / "server.log"
    assert realistic_log(log, 12_000, blocks_every=3_000) == 3
    kb = knowledge.load()
    _, fast, scan = read_log(str(log), kb)
    with open(log, encoding="utf-8", errors="replace", newline="\n") as fh:
        full = kb.match_lines(fh)
    assert scan.lines == 12_000
    assert [(m.entry.id, m.score, m.lines) for m in fast] == \
        [(m.entry.id, m.score, m.lines) for m in full]
    # grep with the converted signatures finds every line ours matches
    ours = our_signature_lines(log, "python")
    missed = ours - grep_lines(log)
    assert ours and not missed, sorted(missed)[:5]


def _rss_kib(path: Path) -> float:
    return float([x for x in path.read_text().split() if x.isdigit()][-1])


def _run_bounded(argv: list[str], feed=None) -> tuple[float, float, subprocess.CompletedProcess]:
    rss = Path(os.environ.get("TMPDIR", "/tmp")) / f"rss-{os.getpid()}-{time.time_ns()}"
    cmd = ["/usr/bin/time", "-f", "%M", "-o", str(rss), *argv]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if feed:
        feed(p.stdin)
        p.stdin.close()
        p.stdin = None  # closed: communicate() must not flush it
    out, err = p.communicate(timeout=600)
    dt = time.perf_counter() - t0
    kib = _rss_kib(rss)
    rss.unlink()
    return dt, kib, subprocess.CompletedProcess(argv, p.returncode, out, err)


TAIL = b"\nEI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.\n"


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK), reason="GNU time measures RSS")
def test_a_gibibyte_without_a_newline_stays_bounded():
    """1 GiB generated lazily into the pipe, never held anywhere: the line is cut at 64 KiB,
    the rest skipped and counted, the line after it still read."""
    chunk = b"a" * (1 << 20)

    def feed(stdin):
        for _ in range(1024):
            stdin.write(chunk)
        stdin.write(TAIL)

    dt, kib, r = _run_bounded([doctor_exe(), "triage", "-", "--json"], feed)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["answers"][0]["id"] in ("ASC-UPS-019", "cann:EI0006")
    assert doc["cut"] == {"lines": 1, "bytes": (1 << 30) - 65536, "stopped": None, "read_to": None}
    assert kib < 200 * 1024, kib  # MiB: the block and one line head, not the line
    assert dt < 300, dt


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK), reason="GNU time measures RSS")
def test_a_small_gz_that_inflates_to_a_gibibyte_line_stays_bounded(tmp_path):
    gz = tmp_path / "rotated.log.gz"
    import gzip

    with open(gz, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as fh:
        zero = b"\0" * (1 << 20)
        for _ in range(1024):
            fh.write(zero)
        fh.write(TAIL)
    assert gz.stat().st_size < 2 << 20
    dt, kib, r = _run_bounded([doctor_exe(), "triage", str(gz), "--json"])
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["cut"]["lines"] == 1
    assert kib < 200 * 1024 and dt < 300, (kib, dt)
