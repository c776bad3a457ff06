"""Issue 35: the block-audit plugin writes its lines in batches (one os.write per batch, not per
step), and still loses at most one bounded batch when the engine dies, never splits a line
across a rotation, and writes everything on a normal or multiprocessing exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ascend_doctor.checks.block_tables import replay
from ascend_doctor.probes.block_audit import iter_records
from ascend_doctor.vllm_plugin import AuditState, install_v1
from ascend_doctor.vllm_plugin.recorder import BATCH_STEPS, AuditFile
from ascend_doctor.vllm_plugin.sim import MiniScheduler, workload

REPO = Path(__file__).resolve().parents[2]


def steps_in(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def drive(sched: MiniScheduler, n: int) -> None:
    for _ in range(n):
        sched.update_from_output(sched.schedule())


def test_one_write_per_batch_and_the_reader_sees_whole_batches(tmp_path):
    path = tmp_path / "a.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path),
                     "ASCEND_DOCTOR_BLOCK_AUDIT_BATCH": "10",
                     "ASCEND_DOCTOR_BLOCK_AUDIT_BATCH_MS": "600000"})
    sched = MiniScheduler(seed=1)
    workload(sched, 40)
    rec = install_v1(sched, st)
    drive(sched, 1)  # the header goes out at once with the first step
    assert [r["t"] for r in steps_in(path)] == ["hdr", "s"] and rec.out.writes == 1
    drive(sched, 9)
    assert len(steps_in(path)) == 2  # nine steps buffered, not written
    drive(sched, 1)
    assert [r["n"] for r in steps_in(path)[1:]] == list(range(1, 12))
    assert rec.out.writes == 2  # steps 2..11 in one os.write: ten lines
    drive(sched, 25)
    assert rec.out.writes == 4 and len(steps_in(path)) == 1 + 31
    st.flush()
    assert rec.out.writes == 5 and [r["n"] for r in steps_in(path)[1:]] == list(range(1, 37))


def test_idle_buffer_is_written_by_the_background_flush(tmp_path):
    path = tmp_path / "idle.jsonl"
    out = AuditFile(str(path), 1 << 20, 0, batch_steps=1000, batch_ms=50)
    out.write(b'{"t":"hdr"}\n')
    out.flush()
    out.write(b'{"t":"s","n":1}\n')
    assert path.read_bytes() == b'{"t":"hdr"}\n'
    deadline = time.monotonic() + 10
    while path.read_bytes().count(b"\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.read_bytes() == b'{"t":"hdr"}\n{"t":"s","n":1}\n'
    out.close()


def test_a_failed_background_write_reaches_the_engine_thread(tmp_path):
    out = AuditFile(str(tmp_path / "e.jsonl"), 1 << 20, 0, batch_steps=1000, batch_ms=20)
    out.write(b"x\n")
    os.close(out._fd)  # the descriptor goes bad under the flusher
    fd = os.open(os.devnull, os.O_RDONLY)  # and its number now names a read-only file
    try:
        deadline = time.monotonic() + 10
        while out.error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert isinstance(out.error, OSError)
        try:
            out.write(b"y\n")
        except OSError:
            pass
        else:
            raise AssertionError("the write after a failed flush must raise")
    finally:
        os.close(fd)
        out._fd = -1
        out.close()


def test_rotation_never_splits_a_line_and_each_file_replays_alone(tmp_path):
    """A 16 KiB cap with 64-step batches: the buffered lines count against the cap, the batch
    goes into the old file before the rename, and every file starts with a header and, by its
    second step, a full step, so each one replays clean on its own."""
    path = tmp_path / "r.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path),
                     "ASCEND_DOCTOR_BLOCK_AUDIT_KEEP": "3"})
    st.max_bytes = 16 * 1024
    sched = MiniScheduler(num_blocks=900, block_size=16, max_num_seqs=12, seed=4)
    workload(sched, 120, prompt=(40, 600), max_tokens=(8, 40), seed=4)
    rec = install_v1(sched, st)
    from ascend_doctor.vllm_plugin.sim import run

    run(sched)
    assert rec.out.rotations >= 3
    files = [path, *(path.with_name(path.name + f".{k}") for k in (1, 2, 3))]
    for f in files:
        data = f.read_bytes()
        assert len(data) <= 16 * 1024 and data.endswith(b"\n"), f
        recs = [json.loads(x) for x in data.splitlines()]  # every line whole
        assert recs[0]["t"] == "hdr" and any(r.get("full") == 1 for r in recs[1:3]), f
        with open(f, "rb") as fh:
            r = replay(iter_records(fh))
        assert not r.counts and r.steps == len(recs) - 1, (f, r.counts)
    # the newest files hold consecutive steps: nothing lost between them
    ns = [n for f in reversed(files) for n in (x["n"] for x in steps_in(f)[1:])]
    assert ns == list(range(ns[0], ns[0] + len(ns)))


def test_disable_writes_the_buffer_and_the_reason(tmp_path):
    path = tmp_path / "d.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path)})
    sched = MiniScheduler(seed=2)
    workload(sched, 20)
    install_v1(sched, st)
    drive(sched, 5)
    st.disable("test reason")
    recs = steps_in(path)
    assert [r["n"] for r in recs if r["t"] == "s"] == [1, 2, 3, 4, 5]
    assert recs[-1] == {"t": "off", "n": 5, "reason": "test reason"}


_CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = {paths!r}
    from ascend_doctor.vllm_plugin import AuditState, install_v1
    from ascend_doctor.vllm_plugin.sim import MiniScheduler, workload

    def engine(path, steps, end):
        st = AuditState({{"ASCEND_DOCTOR_BLOCK_AUDIT": path}})
        sched = MiniScheduler(seed=3)
        workload(sched, 200, max_tokens=(200, 400))
        install_v1(sched, st)
        for _ in range(steps):
            sched.update_from_output(sched.schedule())
        if end == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif end == "exit":
            sys.exit(0)  # atexit

    mode, path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "mp":  # vLLM's EngineCore: a multiprocessing child, ends in os._exit
        import multiprocessing as mp
        p = mp.get_context("fork").Process(target=engine, args=(path, steps, "return"))
        p.start(); p.join()
        sys.exit(p.exitcode)
    engine(path, steps, mode)
""")


def _child(tmp_path: Path, mode: str, steps: int) -> tuple[int, list[dict]]:
    path = tmp_path / f"{mode}.jsonl"
    code = _CHILD.format(paths=[p for p in sys.path if p])
    r = subprocess.run([sys.executable, "-c", code, mode, str(path), str(steps)],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    return r.returncode, steps_in(path)


def test_a_normal_exit_writes_every_step(tmp_path):
    rc, recs = _child(tmp_path, "exit", 150)
    assert rc == 0 and [r["n"] for r in recs[1:]] == list(range(1, 151))


def test_a_multiprocessing_engine_writes_every_step_at_its_exit(tmp_path):
    """multiprocessing ends a child with os._exit (no atexit): its exit finalisers write."""
    rc, recs = _child(tmp_path, "mp", 150)
    assert rc == 0 and [r["n"] for r in recs[1:]] == list(range(1, 151))


def test_a_killed_engine_loses_at_most_one_batch_of_whole_lines(tmp_path):
    rc, recs = _child(tmp_path, "kill", 150)
    assert rc == -9
    ns = [r["n"] for r in recs[1:]]
    assert ns == list(range(1, len(ns) + 1))  # whole lines, in order, none torn
    assert 150 - BATCH_STEPS <= len(ns) < 150, len(ns)  # 150 steps: 1 + 64 + 64 written
