"""Redaction: linear time on hostile shapes, every secret shape, bytes and streams."""

from __future__ import annotations

import time

import pytest

from ascend_doctor.redact import (MAX_TEXT, REDACTED, Redactor, neutralise, redact_argv, redact_bytes,
                           redact_text, xml_safe)
from tests.timing import budget

ADVERSARIAL = ["a." * 50000, "=" * 100000, "QUFB" * 25000, "https://x.example/" + "a/" * 49990,
               "sk-" * 33334, "--" * 50000, "key" * 33334, "a=b&" * 25000, "a: " * 33334,
               "curl " * 20000, "eyJ" * 33334, '"k":' * 25000, "http://" * 14286,
               "https://u:" + "p" * 99980 + "@", "key=" * 25000, "-----BEGIN " * 9091]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda s: repr(s[:10]))
def test_hostile_100k_redacts_in_under_100ms(text: str) -> None:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        redact_text(text)
        best = min(best, time.perf_counter() - t0)
    assert best < budget(0.1), f"{best:.3f}s"  # catastrophic backtracking: seconds


def test_over_cap_is_truncated_with_marker_and_redacted() -> None:
    text = "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz " + "x" * (MAX_TEXT + 10)
    out = redact_text(text)
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in out
    assert out.endswith(f"<truncated {len(text) - MAX_TEXT} chars>")


SHAPES = {
    "OBS_AK=PLANTEDobsak0001": "PLANTEDobsak0001",
    "export OBS_SK='PLANTEDobssk0002'": "PLANTEDobssk0002",
    "HUAWEICLOUD_SDK_AK=PLANTEDhwak0003": "PLANTEDhwak0003",
    "HUAWEICLOUD_SDK_SK=PLANTEDhwsk0004": "PLANTEDhwsk0004",
    "MYSQL_PWD=PLANTEDpwd0005": "PLANTEDpwd0005",
    "DB_PASS=PLANTEDpass0006": "PLANTEDpass0006",
    "password: PLANTEDyaml0007": "PLANTEDyaml0007",
    "  - token: PLANTEDyaml0008": "PLANTEDyaml0008",
    "GET https://h.example/v1?token=PLANTEDq0009&x=1": "PLANTEDq0009",
    "GET https://h.example/v1?a=1&access_token=PLANTEDq0010": "PLANTEDq0010",
    "url=https://h.example/?api_key=PLANTEDq0011": "PLANTEDq0011",
    "pip https://user:PLANTEDurl0012@pypi.example/simple": "PLANTEDurl0012",
    "git https://ghp0PLANTEDurltoken0013x@github.com/x": "ghp0PLANTEDurltoken0013x",
    "root 12 sshpass -p PLANTEDssh0014 ssh host": "PLANTEDssh0014",
    "root 13 curl -s -u admin:PLANTEDcurl0015 https://x": "PLANTEDcurl0015",
    "root 14 tool --password PLANTEDflag0016": "PLANTEDflag0016",
    "root 15 mysql -h db -p PLANTEDmysql0017 app": "PLANTEDmysql0017",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIPLANTEDpem0018\n-----END RSA PRIVATE KEY-----":
        "MIIPLANTEDpem0018",
}


@pytest.mark.parametrize("text,secret", SHAPES.items())
def test_every_shape_redacted(text: str, secret: str) -> None:
    assert secret not in redact_text(text)
    assert secret.encode() not in redact_bytes(text.encode())


def test_harmless_text_kept() -> None:
    for s in ("PWD=/root", "--max-num-batched-tokens 8192", "KeyError: 'model.layers'",
              "BYPASS=1 TASK=2", "author: me", "ssh://git@host/x", "-p 8000"):
        assert redact_text(s) == s


@pytest.mark.parametrize("argv,secret", [
    (["sshpass", "-p", "PLANTED1", "ssh", "h"], "PLANTED1"),
    (["/usr/bin/sshpass", "-pPLANTED2", "ssh"], "PLANTED2"),
    (["curl", "-u", "admin:PLANTED3", "https://x"], "PLANTED3"),
    (["mysql", "-h", "db", "-p", "PLANTED4"], "PLANTED4"),
    (["mysql", "-pPLANTED5"], "PLANTED5"),
    (["tool", "--password", "PLANTED6"], "PLANTED6"),
])
def test_argv_shapes(argv: list[str], secret: str) -> None:
    out = redact_argv(argv)
    assert secret not in " ".join(out) and REDACTED in " ".join(out)


def test_bytes_with_invalid_utf8_and_nul_redacted_rest_intact() -> None:
    data = b"ok \xff\xfe bytes\x00 here\nHF_TOKEN=hf_PlantedToken00000042\ntail \xc3\n"
    out = redact_bytes(data)
    assert b"hf_PlantedToken00000042" not in out
    assert out.startswith(b"ok \xff\xfe bytes\x00 here\n") and out.endswith(b"tail \xc3\n")


def test_elf_left_alone() -> None:
    data = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"HF_TOKEN=abc"
    assert redact_bytes(data) == data


@pytest.mark.parametrize("split", [3, 10, 17, 25, 40])
def test_stream_secret_split_across_chunks(split: int) -> None:
    data = (b"line one\nexport OBS_SK=PLANTEDsplitsecret99 more\n"
            b"-----BEGIN PRIVATE KEY-----\nMIIplantedBODY\n-----END PRIVATE KEY-----\nend")
    for cut in range(1, len(data), split):
        r = Redactor()
        out = r.feed(data[:cut]) + r.feed(data[cut:]) + r.close()
        assert b"PLANTEDsplitsecret99" not in out and b"MIIplantedBODY" not in out, cut
        assert out.endswith(b"-----END PRIVATE KEY-----\nend")


def test_stream_overlong_line_is_bounded() -> None:
    r = Redactor()
    out = r.feed(b"HF_TOKEN=hf_PlantedToken00000042 ")
    for _ in range(40):
        out += r.feed(b"y" * 65536)
    out += r.feed(b"\nnext\n") + r.close()
    assert b"hf_PlantedToken" not in out and b"<truncated" in out and out.endswith(b"next\n")
    assert len(out) < MAX_TEXT + 200


def test_neutralise_and_xml_safe() -> None:
    s = "a\x1b[2J b\x1b]52;c;QUJD\x07 c\td\ne\x9b"
    assert neutralise(s) == "a\\x1b[2J b\\x1b]52;c;QUJD\\x07 c\td\ne\\x9b"
    assert "\x0c" not in xml_safe("x\x0cy\x00") and xml_safe("x\x0cy") == "x\\x0cy"


def test_big_blob_secret_at_a_slice_boundary_and_long_inner_line() -> None:
    secret = b"HF_TOKEN=hf_PlantedBoundaryToken0042"
    filler = (b"y" * 99 + b"\n") * (MAX_TEXT // 100)
    data = filler[:-20] + secret + b"\n" + b"z" * (MAX_TEXT + 5) + b"\n" + filler + secret + b"\n"
    out = redact_bytes(data)
    assert b"hf_PlantedBoundaryToken0042" not in out and b"<truncated" in out
    assert out.endswith(b"HF_TOKEN=<redacted>\n")
