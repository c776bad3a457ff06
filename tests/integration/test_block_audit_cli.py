"""`ascend-doctor check --block-audit FILE` and the demo, through the real console script."""

from __future__ import annotations

import json

from tests.fixtures.sysroots import write_log


def check(cli, path, *extra):
    r = cli("check", "--only", "block_tables", "--block-audit", str(path), "--json", *extra)
    doc = json.loads(r.stdout)
    (c,) = [c for c in doc["checks"] if c["id"] == "block_tables.invariants"]
    return r, c


def test_healthy_log_passes(cli, tmp_path):
    write_log(tmp_path / "ok.jsonl", num_blocks=300)
    r, c = check(cli, tmp_path / "ok.jsonl")
    assert r.returncode == 0 and c["status"] == "pass", r.stderr
    assert "60 requests" in c["findings"][0]["message"]


def test_duplicate_log_fails_with_evidence_in_json_and_text(cli, tmp_path):
    s = write_log(tmp_path / "dup.jsonl", inject={20: "duplicate"})
    r, c = check(cli, tmp_path / "dup.jsonl")
    assert r.returncode == 1 and c["status"] == "fail"
    f = c["findings"][0]
    assert f["kb"] == ["ASC-KV-001"] and f["evidence"]["blocks"] == [s.injected[0][3]]
    assert f["evidence"]["examples"][0]["step"] == s.injected[0][0]
    t = cli("check", "--only", "block_tables", "--block-audit", str(tmp_path / "dup.jsonl"),
            "-v")
    assert t.returncode == 1 and "still held by another live request" in t.stdout


def test_corrupt_and_missing_inputs(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\x1f\x8b\x08 gzip, not json\n")
    r, c = check(cli, bad)
    assert c["status"] == "error" and "bad.jsonl" in c["findings"][0]["message"]
    r, c = check(cli, tmp_path / "absent.jsonl")
    assert c["status"] in ("skip", "error") and "absent.jsonl" in json.dumps(c)


def test_demo_finds_the_duplicate_audit_log(cli):
    r = cli("demo", "--json")
    doc = json.loads(r.stdout)
    (c,) = [c for c in doc["checks"] if c["id"] == "block_tables.invariants"]
    assert c["status"] == "fail"
    assert c["findings"][0]["subject"] == "/var/log/vllm/block_audit.jsonl"
    assert "ASC-KV-001" in doc["knowledge"]
