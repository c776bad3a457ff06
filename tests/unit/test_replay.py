"""The manifest's options are hostile input: only known fields of the right type replay."""

from ascend_doctor.options import RunOptions
from ascend_doctor.replay import replay_options


def test_recorded_options_fill_what_the_user_did_not_give():
    rec = {"service_url": "http://10.0.0.5:8100", "service_url_given": True, "pid": 4711,
           "python": "/opt/venv/bin/python", "logs": ["/var/log/vllm.log"], "api_key": "x"}
    got = replay_options(rec, RunOptions(), explicit=[])
    assert (got.service_url, got.service_url_given, got.pid, got.python, got.logs) == (
        "http://10.0.0.5:8100", True, 4711, "/opt/venv/bin/python", ("/var/log/vllm.log",))
    assert got.api_key is None
    mine = replay_options(rec, RunOptions(pid=1), explicit=["pid"])
    assert mine.pid == 1 and mine.python == "/opt/venv/bin/python"


def test_wrong_types_and_oversized_values_are_ignored():
    rec = {"pid": "4711; rm -rf /", "sample_seconds": 10 ** 9, "logs": ["x"] * 10_000,
           "service_url": "h" * 100_000, "service_url_given": "yes", "lang": "zh"}
    assert replay_options(rec, RunOptions(), []) == RunOptions()
    assert replay_options(["not", "a", "dict"], RunOptions(), []) == RunOptions()
