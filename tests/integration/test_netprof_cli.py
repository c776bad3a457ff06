"""DNS and msprof checks from the real CLI: --pcap, --profile, and the demo's recorded inputs."""

from __future__ import annotations

import json

from tests.unit.capgen import cached, per_request, write
from tests.unit.profgen import write_msprof


def by_id(doc):
    return {c["id"]: c for c in doc["checks"]}


def test_check_pcap_json_and_text(cli, tmp_path):
    bad = write(tmp_path / "jmeter.pcapng", per_request(60), ng=True)
    r = cli("check", "--json", "--only", "dns.per-request", "--pcap", str(bad))
    assert r.returncode == 1, r.stderr
    (f,) = by_id(json.loads(r.stdout))["dns.per-request"]["findings"]
    assert f["status"] == "fail" and f["fix"]["id"] == "dns.hosts-pin"
    assert f["fix"]["params"]["hostname"] == "api.deepseek.example.com"
    assert f["evidence"]["new_connections"] == 60
    ok = write(tmp_path / "ok.pcap", cached(60))
    r = cli("check", "--only", "dns.per-request", "--pcap", str(ok))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "of 60 new" in " ".join(r.stdout.split())


def test_truncated_pcap_is_an_error_finding_not_a_crash(cli, tmp_path):
    path = write(tmp_path / "cut.pcap", per_request(60))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 6 // 10])
    r = cli("check", "--json", "--only", "dns", "--pcap", str(path))
    doc = json.loads(r.stdout)
    cap = by_id(doc)["dns.capture"]
    assert cap["status"] == "error" and "at byte" in cap["findings"][0]["message"]
    per = by_id(doc)["dns.per-request"]["findings"][0]  # still judged on the part read
    assert per["status"] == "fail" and "from the first" in per["message"]


def test_check_profile_json(cli, tmp_path):
    write_msprof(tmp_path, memcpy_us=2000.0, copies=[("host to device", 64 << 20, 20)])
    r = cli("check", "--json", "--only", "msprof", "--profile", str(tmp_path))
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert by_id(doc)["msprof.copy-bound"]["status"] == "fail"
    assert by_id(doc)["msprof.weights-recopied"]["status"] == "fail"
    assert "ASC-PROF-001" in json.dumps(doc["knowledge"])


def test_demo_finds_its_capture_and_profile(cli):
    r = cli("demo", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    c = by_id(doc)
    assert doc["inputs"]["pcap"].endswith(".pcap") and doc["inputs"]["profile_dir"]
    per = c["dns.per-request"]["findings"][0]
    assert per["status"] == "fail" and per["fix"]["params"] == {
        "hostname": "api.deepseek.example.com", "address": "192.168.1.100"}
    assert c["dns.latency"]["status"] == "fail"
    assert c["msprof.copy-bound"]["status"] == "fail"
    assert "72%" in c["msprof.copy-bound"]["findings"][0]["message"]
    assert c["msprof.weights-recopied"]["status"] == "fail"
    assert c["net.tcp-ports"]["status"] == "fail"
