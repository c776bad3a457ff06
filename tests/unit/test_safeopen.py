"""doctor/safeopen.py: a file another account can steer is opened once, links not trusted,
and read only when every account that could change its path could read it itself."""

from __future__ import annotations

import os
import tempfile

import pytest

from ascend_doctor.safeopen import Guard, Refused, open_guarded

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plays other accounts: needs root")


@pytest.fixture
def svc_dir():
    """A directory the service account (nobody) owns, under a world-searchable parent."""
    base = tempfile.mkdtemp(prefix="ad-safeopen-", dir="/tmp")
    os.chmod(base, 0o755)
    d = os.path.join(base, "svc")
    os.mkdir(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    secret = os.path.join(base, "secret")
    with open(secret, "w") as fh:
        fh.write("root:$6$SECRET-HASH:20228:0:99999:7:::\n")
    os.chmod(secret, 0o600)
    yield d, secret
    import shutil
    shutil.rmtree(base)


def _file(path: str, text: str, uid: int = NOBODY, mode: int = 0o640) -> str:
    with open(path, "w") as fh:
        fh.write(text)
    os.chown(path, uid, uid)
    os.chmod(path, mode)
    return path


def test_the_service_s_own_file_is_read(svc_dir):
    d, _ = svc_dir
    p = _file(os.path.join(d, "op_summary_0_1.csv"), "Device_id,Op Name\n")
    with open_guarded(p, Guard()) as fh:
        assert fh.read() == b"Device_id,Op Name\n"


def test_a_link_the_service_planted_to_a_root_only_file_is_refused(svc_dir):
    d, secret = svc_dir
    link = os.path.join(d, "op_summary_0_1.csv")
    os.symlink(secret, link)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(Refused) as exc:
        open_guarded(link, Guard())
    assert f"uid {NOBODY}" in exc.value.reason and "could not read" in exc.value.reason
    assert "SECRET" not in exc.value.reason


def test_a_hard_link_to_a_root_only_file_is_refused_on_fstat(svc_dir):
    """No link to see by name: only the opened descriptor's owner and mode tell."""
    d, secret = svc_dir
    hard = os.path.join(d, "server.log")
    os.link(secret, hard)
    with pytest.raises(Refused, match="could not read"):
        open_guarded(hard, Guard())


def test_a_directory_link_out_of_the_service_dir_is_judged_where_it_lands(svc_dir):
    d, secret = svc_dir
    os.symlink(os.path.dirname(secret), os.path.join(d, "PROF_1"))
    with pytest.raises(Refused, match="could not read"):
        open_guarded(os.path.join(d, "PROF_1", "secret"), Guard())


def test_root_s_own_file_in_a_sticky_world_writable_dir_is_read():
    """/tmp is 1777: others cannot replace root's entry there, so root's 0600 file is fine."""
    fd, p = tempfile.mkstemp(dir="/tmp")
    os.write(fd, b"mine\n")
    os.close(fd)
    try:
        with open_guarded(p, Guard()) as fh:
            assert fh.read() == b"mine\n"
    finally:
        os.unlink(p)


def test_a_world_writable_dir_without_sticky_bit_needs_a_readable_file(svc_dir):
    d, _ = svc_dir
    os.chown(d, 0, 0)
    os.chmod(d, 0o777)
    p = _file(os.path.join(d, "x.log"), "x\n", uid=0, mode=0o600)
    with pytest.raises(Refused, match="anyone can change"):
        open_guarded(p, Guard())
    os.chmod(p, 0o644)
    with open_guarded(p, Guard()) as fh:
        assert fh.read() == b"x\n"


def test_the_service_reader_must_read_it_and_enter_every_dir(svc_dir):
    d, secret = svc_dir
    p = _file(os.path.join(d, "audit.jsonl"), "{}\n")
    with open_guarded(p, Guard(reader=(NOBODY, (NOBODY,)))) as fh:
        assert fh.read() == b"{}\n"
    with pytest.raises(Refused, match="service's uid 65534 could not read"):
        open_guarded(secret, Guard(reader=(NOBODY, (NOBODY,))))
    os.chmod(d, 0o700)
    os.chown(d, 0, 0)
    with pytest.raises(Refused, match="cannot enter"):
        open_guarded(p, Guard(reader=(NOBODY, (NOBODY,))))


def test_a_fifo_is_refused_without_blocking(svc_dir):
    d, _ = svc_dir
    fifo = os.path.join(d, "server.log")
    os.mkfifo(fifo)
    os.chown(fifo, NOBODY, NOBODY)
    with pytest.raises(Refused, match="not a regular file"):
        open_guarded(fifo, Guard())


def test_missing_is_told_apart(svc_dir):
    d, _ = svc_dir
    with pytest.raises(Refused) as exc:
        open_guarded(os.path.join(d, "nope", "x.csv"), Guard())
    assert exc.value.missing


def test_proc_fd_is_the_file_the_process_holds(svc_dir):
    d, secret = svc_dir
    p = _file(os.path.join(d, "server.log"), "line\n")
    with open(p, "rb") as held:
        path = f"/proc/self/fd/{held.fileno()}"
        os.rename(p, p + ".old")  # the name moves on; the descriptor is still the file
        os.symlink(secret, p)
        with open_guarded(path, Guard(reader=(NOBODY, (NOBODY,)))) as fh:
            assert fh.read() == b"line\n"
    with open(secret, "rb") as held:
        with pytest.raises(Refused, match="could not read"):
            open_guarded(f"/proc/self/fd/{held.fileno()}", Guard(reader=(NOBODY, (NOBODY,))))


def test_a_sysroot_keeps_absolute_links_inside(tmp_path):
    root = tmp_path / "root"
    (root / "var/log").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/real.log").write_text("inside\n")
    os.symlink("/etc/real.log", root / "var/log/x.log")
    with open_guarded("/var/log/x.log", Guard(), str(root)) as fh:
        assert fh.read() == b"inside\n"
    os.symlink("../../../../../../etc/hostname", root / "var/log/up.log")
    with pytest.raises(Refused):
        open_guarded("/var/log/up.log", Guard(), str(root))


@pytest.fixture
def syslog_dir():
    """Ubuntu's /var/log: root:syslog 0775 (syslog's group may create and rename entries)."""
    base = tempfile.mkdtemp(prefix="ad-varlog-", dir="/tmp")
    os.chmod(base, 0o755)
    d = os.path.join(base, "log")
    os.mkdir(d)
    os.chown(d, 0, SYSLOG)
    os.chmod(d, 0o775)
    secret = os.path.join(base, "shadow")
    with open(secret, "w") as fh:
        fh.write("root:$6$SECRET-HASH:20228:0:99999:7:::\n")
    os.chown(secret, 0, ADM)
    os.chmod(secret, 0o640)  # like /etc/shadow (root:shadow 0640): group-readable, elsewhere
    yield d, secret
    import shutil
    shutil.rmtree(base)


SYSLOG, ADM = 110, 4  # Ubuntu's syslog and adm gids; no account of them needs to exist


def test_a_root_adm_log_in_ubuntus_var_log_is_read(syslog_dir):
    """cloud-init.log, dpkg.log… are root:adm 0640 in root:syslog 0775 /var/log: a root-run
    doctor given --log /var/log/cloud-init.log reads it (was refused: group syslog can
    change /var/log)."""
    d, _ = syslog_dir
    p = _file(os.path.join(d, "cloud-init.log"), "Cloud-init v. 24.1 finished\n", uid=0)
    os.chown(p, 0, ADM)
    with open_guarded(p, Guard()) as fh:
        assert fh.read() == b"Cloud-init v. 24.1 finished\n"


def test_what_the_syslog_group_could_plant_there_is_still_refused(syslog_dir):
    d, secret = syslog_dir
    # a hard link to a root file elsewhere (two links on the opened inode)
    hard = os.path.join(d, "kern.log")
    os.link(secret, hard)
    with pytest.raises(Refused, match=f"group {SYSLOG} can change"):
        open_guarded(hard, Guard())
    # a root-only file of a directory the group can write (renamed into the log's name)
    p = _file(os.path.join(d, "auth.log"), "root only\n", uid=0, mode=0o600)
    with pytest.raises(Refused, match=f"group {SYSLOG} can change"):
        open_guarded(p, Guard())
    # a symlink a group member (nobody) planted: judged by its owner, who cannot read it
    link = os.path.join(d, "dpkg.log")
    os.symlink(secret, link)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(Refused, match=f"uid {NOBODY} can change"):
        open_guarded(link, Guard())


def test_a_root_log_in_a_dir_the_service_s_group_writes_stays_refused(syslog_dir):
    """When the service inspected is in the writing group, it could swap the file: refused."""
    d, _ = syslog_dir
    p = _file(os.path.join(d, "server.log"), "INFO ok\n", uid=0)
    os.chown(p, 0, ADM)
    svc = (NOBODY, (NOBODY, SYSLOG, ADM))  # may read it (adm), may also rename in the dir
    with pytest.raises(Refused, match=f"group {SYSLOG} can change"):
        open_guarded(p, Guard(reader=svc))
    with open_guarded(p, Guard(reader=(NOBODY, (NOBODY, ADM)))) as fh:  # not in syslog
        assert fh.read() == b"INFO ok\n"
