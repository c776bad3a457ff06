"""The process table keeps other processes' argv only as far as the checks need it
(doctor/proctable.py), on process tables shaped like a real vLLM host's."""

from __future__ import annotations

from ascend_doctor.host import ProcInfo
from ascend_doctor.probes.dns import load_client_kind
from ascend_doctor.probes.procs import find_servers, is_worker
from ascend_doctor.proctable import minimal_argv, minimise

SERVER = ("/opt/venv/bin/python3", "/opt/venv/bin/vllm", "serve", "/models/Qwen2.5-7B",
          "--port", "8001", "--api-key", "sk-service-own-key-000000000000")


def _table() -> list[ProcInfo]:
    return [
        ProcInfo(1, 0, "systemd", ("/sbin/init", "splash")),
        ProcInfo(4711, 1, "vllm", SERVER, "svc", 1001),
        ProcInfo(4712, 4711, "VLLM::EngineCor", ("VLLM::EngineCore",), "svc", 1001),
        ProcInfo(4713, 4711, "python3", ("/opt/venv/bin/python3", "-c",
                                         "from multiprocessing.spawn import spawn_main",
                                         "--multiprocessing-fork", "tracker_fd=5"), "svc", 1001),
        ProcInfo(5000, 1, "sshpass", ("sshpass", "-p", "hunter2", "ssh", "node2"), "alice", 1002),
        ProcInfo(5001, 1, "curl", ("/usr/bin/curl", "-u", "bob:Pl4nted", "https://x/"), "bob", 1003),
        ProcInfo(5002, 1, "backup", ("/usr/local/bin/backup", "--target", "s3://b",
                                     "PLANTEDbarePositional"), "root", 0),
        ProcInfo(5003, 1, "java", ("/usr/bin/java", "-Xmx4g", "-jar",
                                   "/opt/apache-jmeter-5.6/bin/ApacheJMeter.jar", "-n", "-t",
                                   "plan.jmx", "-Jpassword=PLANTEDjmeter"), "carol", 1004),
        ProcInfo(5004, 1, "python3", ("/opt/venv/bin/python3", "/opt/venv/bin/vllm", "bench",
                                      "serve", "--base-url", "http://127.0.0.1:8001"), "dave", 1005),
        ProcInfo(5005, 1, "nscd", ("/usr/sbin/nscd",), "root", 0),
    ]


def test_other_processes_keep_only_argv0_and_the_checks_words():
    table = {p.pid: p for p in minimise(_table())}
    assert table[5000].cmdline == ("sshpass",)
    assert table[5001].cmdline == ("curl",)
    assert table[5002].cmdline == ("backup",)
    assert table[5003].cmdline == ("java", "-jar", "ApacheJMeter.jar")
    assert table[1].cmdline == ("init",)
    text = repr(list(table.values()))
    for secret in ("hunter2", "Pl4nted", "PLANTEDbarePositional", "PLANTEDjmeter"):
        assert secret not in text


def test_servers_and_their_descendants_keep_their_argv():
    table = {p.pid: p for p in minimise(_table())}
    assert table[4711].cmdline == SERVER
    assert table[4712].cmdline == ("VLLM::EngineCore",)
    assert table[4713].cmdline[-1] == "tracker_fd=5"  # a server's helper child
    assert table[5004].cmdline[2] == "bench"  # mentions vllm: a candidate, kept whole
    found = find_servers(list(table.values()), None)
    assert [s.pid for s in found.servers] == [4711]
    assert is_worker(table[4712])


def test_load_clients_and_caches_are_still_recognised_after_minimising():
    table = {p.pid: p for p in minimise(_table())}
    assert load_client_kind(table[5003]) == "jmeter"
    assert load_client_kind(table[5004]) == "vllm bench"
    locust = minimise([ProcInfo(9, 1, "python3", ("/usr/bin/python3", "/srv/locustfile.py",
                                                   "--host", "http://svc", "tok-PLANTED"))])[0]
    assert locust.cmdline == ("python3", "locustfile.py")
    assert load_client_kind(locust) == "python (locust)"
    assert table[5005].name == "nscd"


def test_invalid_utf8_in_a_cmdline_becomes_valid_text_and_never_crashes():
    raw = b"agent\0--db\0PLANTED-\xff\xfe-token\0"
    argv = tuple(a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a)
    srv = tuple(a.decode("utf-8", "surrogateescape")
                for a in b"/usr/bin/python3\0-m\0vllm.entrypoints.openai.api_server\0"
                         b"--served-model-name\0q\xffwen\0".split(b"\0") if a)
    out = minimise([ProcInfo(7, 1, "agent\udcff", argv), ProcInfo(8, 1, "python3", srv)])
    assert out[0].cmdline == ("agent",) and out[0].name == "agent\ufffd"
    assert out[1].cmdline[-1] == "q\ufffdwen"
    for p in out:  # every string now encodes: a report or bundle writer cannot crash on it
        for s in (p.name, p.exe, *p.cmdline):
            s.encode("utf-8")
    assert minimal_argv(()) == ()


def test_a_pinned_pid_keeps_its_whole_argv_from_proc_cmdline(sysroot):
    """`--pid` names the service even when its launcher looks like no vLLM server: its
    argv is read from /proc/PID/cmdline, not from the minimised table."""
    from ascend_doctor.options import RunOptions
    from ascend_doctor.probes.procs import gather_service_processes

    sysroot.write("proc/77/cmdline", b"/usr/bin/python3\0/srv/launch.py\0--port\x008001\0")
    sysroot.write("proc/77/stat", "77 (python3) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n")
    sysroot.write("proc/77/status", "Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\n")
    host = sysroot.host()
    assert {p.pid: p.cmdline for p in host.processes()}[77] == ("python3",)
    found = gather_service_processes(host, RunOptions(pid=77))
    assert found.primary.proc.cmdline == ("/usr/bin/python3", "/srv/launch.py", "--port", "8001")
    assert found.primary.args.get("port") == "8001"


def test_a_cmdline_image_with_invalid_utf8_is_redacted_byte_exact():
    """A server's /proc/PID/cmdline as recorded into a bundle: the secret after --api-key
    (itself holding an invalid byte) goes, every other byte stays as it was."""
    from ascend_doctor.bundle.record import redact_cmdline_blob

    raw = (b"/usr/bin/python3\0-m\0vllm.entrypoints.openai.api_server\0--api-key\0"
           b"sk-PLANTED\xff0001\0--served-model-name\0q\xffwen\0HF_TOKEN=hf_PLANTED\xfe0002xx\0")
    out = redact_cmdline_blob(raw)
    assert b"PLANTED" not in out
    assert b"\0q\xffwen\0" in out and out.startswith(b"/usr/bin/python3\0-m\0")
    assert out.count(b"\0") == raw.count(b"\0")
