"""Writes under a target cannot leave it (issue 20 items 2, 4, 5, 7): the attacks themselves —
bundles planting absolute/relative symlinks then writing through them, ``..`` entries, setuid
modes, a symlink swapped in between plan and apply, a file edited between plan and apply, and
tampered journals (foreign paths, 0666 modes, planted commands, ``../`` ids)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner

from ascend_doctor import confine
from ascend_doctor.bundle import FORMAT, FORMAT_VERSION, BundleData
from ascend_doctor.cli import main
from ascend_doctor.fixes import FixRegistry
from ascend_doctor.fixes.apply import FixFailed, apply_plan, undo
from ascend_doctor.fixes.context import FixContext
from ascend_doctor.fixes.journal import Journal, JournalError, list_ids

HOSTS = "127.0.0.1 localhost\n"


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def sentinel(tmp_path):
    """A directory outside every target holding a shadow-like file; must never change."""
    d = tmp_path / "sentinel"
    d.mkdir()
    (d / "shadow").write_bytes(b"root:$6$secret:19000::::::\n")
    os.chmod(d / "shadow", 0o600)
    return d


def tree(d) -> dict[str, tuple]:
    out = {}
    for dirpath, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            body = open(p, "rb").read() if stat.S_ISREG(st.st_mode) else b""
            out[os.path.relpath(p, d)] = (st.st_mode, body)
    return out


def bundle(tmp_path, entries: list[tuple[str, dict, bytes | None]]) -> str:
    """A real bundle file whose lstat/read tables hold ``entries`` (path, lstat, content)."""
    data = BundleData()
    data.manifest = {"format": FORMAT, "format_version": FORMAT_VERSION}
    for path, st, body in entries:
        data.put("lstat", path, st)
        if body is not None:
            data.put("read", path, {"blob": data.blob(body)})
    p = tmp_path / "hostile.tar.gz"
    data.write(str(p))
    return str(p)


DIR = {"mode": stat.S_IFDIR | 0o755}


def reg(mode: int = 0o644) -> dict:
    return {"mode": stat.S_IFREG | mode}


def link(target: str) -> dict:
    return {"mode": stat.S_IFLNK | 0o777, "link": target}


def export(tmp_path, b: str):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["export-root", str(out), "--bundle", b])
    return r, out


@pytest.mark.parametrize("target", ["ABS", "../../../sentinel", "../../sentinel"])
def test_export_root_never_writes_through_a_bundle_symlink(tmp_path, sentinel, target):
    target = str(sentinel) if target == "ABS" else target
    before = tree(sentinel)
    b = bundle(tmp_path, [("/etc", DIR, None), ("/etc/evil", link(target), None),
                          ("/etc/evil/shadow", reg(), b"owned\n"),
                          ("/etc/evil/new", reg(), b"owned\n")])
    r, out = export(tmp_path, b)
    assert tree(sentinel) == before
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "/etc/evil" in r.output
    assert not os.path.islink(out / "etc" / "evil")  # the directory stayed a directory


def test_export_root_dotdot_entry_is_one_line_exit_2(tmp_path, sentinel):
    before = tree(sentinel)
    b = bundle(tmp_path, [("/../sentinel/shadow", reg(), b"owned\n")])
    r, _ = export(tmp_path, b)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "'..'" in r.output and len(r.output.strip().splitlines()) == 1
    assert tree(sentinel) == before


def test_export_root_drops_setuid_and_creates_links_last(tmp_path, sentinel):
    b = bundle(tmp_path, [("/usr", DIR, None), ("/usr/bin", {"mode": stat.S_IFDIR | 0o1777},
                                                     None),
                          ("/usr/bin/tool", reg(0o4755), b"#!/bin/sh\n"),
                          ("/usr/bin/gtool", reg(0o2755), b"#!/bin/sh\n"),
                          ("/lib", link("usr/lib"), None),
                          ("/etc", DIR, None), ("/etc/abs", link(str(sentinel)), None)])
    r, out = export(tmp_path, b)
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE(os.stat(out / "usr/bin/tool").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(out / "usr/bin/gtool").st_mode) == 0o755
    # a 1777 directory keeps its sticky bit (world-writable without it: anyone replaces
    # anyone's files); setuid/setgid on files go
    assert stat.S_IMODE(os.stat(out / "usr/bin").st_mode) == 0o1777
    assert os.readlink(out / "lib") == "usr/lib"
    assert os.readlink(out / "etc/abs") == str(sentinel)  # data, never followed


def test_confine_refuses_symlinked_components_and_keeps_existing_dir_modes(tmp_path, sentinel):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    os.chmod(root / "etc", 0o700)
    os.symlink(str(sentinel), root / "abs")
    os.symlink("../sentinel", root / "rel")
    os.symlink(str(sentinel / "shadow"), root / "etc" / "hosts")
    before = tree(sentinel)
    for p in ("/abs/shadow", "/rel/shadow", "/abs/sub/new", "/etc/hosts"):
        with pytest.raises(confine.ConfinementError, match="symlink"):
            confine.write_file(str(root), p, b"owned\n")
    with pytest.raises(confine.ConfinementError, match="symlink"):
        confine.read_file(str(root), "/etc/hosts")
    with pytest.raises(confine.ConfinementError, match="'..'"):
        confine.write_file(str(root), "/etc/../../sentinel/shadow", b"owned\n")
    confine.make_dir(str(root), "/etc", 0o755)
    assert stat.S_IMODE(os.stat(root / "etc").st_mode) == 0o700  # never chmod an existing dir
    confine.write_file(str(root), "/etc/new/file", b"x", 0o6755)
    assert stat.S_IMODE(os.stat(root / "etc/new/file").st_mode) == 0o755
    assert tree(sentinel) == before


def hosts_plan(root: str):
    ctx = FixContext.for_root(root)
    plan = FixRegistry.discover().get("dns.hosts-pin").plan(
        ctx, {"hostname": "a.example", "address": "10.1.1.1"})
    return plan, ctx


def test_symlink_swapped_in_between_plan_and_apply_is_refused(sysroot, sentinel):
    sysroot.write("/etc/hosts", HOSTS)
    plan, ctx = hosts_plan(str(sysroot.root))
    os.rename(sysroot.path("/etc"), sysroot.path("/etc.orig"))
    os.symlink(str(sentinel), sysroot.path("/etc"))
    (sentinel / "hosts").write_text(HOSTS)  # same "before" bytes: only the walk can refuse
    before = tree(sentinel)
    with pytest.raises(FixFailed):
        apply_plan(plan, ctx)
    assert tree(sentinel) == before


def test_symlink_swapped_in_after_preflight_and_backup_is_refused_at_write(sysroot, sentinel,
                                                                          monkeypatch):
    """The race proper: the walk at write time, not the preflight, has to catch it."""
    sysroot.write("/etc/hosts", HOSTS)
    (sentinel / "hosts").write_text(HOSTS)
    plan, ctx = hosts_plan(str(sysroot.root))
    before = tree(sentinel)
    real_set_state = Journal.set_state

    def swap(self, state, **kw):
        real_set_state(self, state, **kw)
        if state == "backed-up":
            os.rename(sysroot.path("/etc"), sysroot.path("/etc.orig"))
            os.symlink(str(sentinel), sysroot.path("/etc"))
    monkeypatch.setattr(Journal, "set_state", swap)
    with pytest.raises(FixFailed, match="symlink"):
        apply_plan(plan, ctx)
    assert tree(sentinel) == before
    assert sysroot.path("/etc.orig/hosts").read_text() == HOSTS


def test_file_edited_between_plan_and_apply_keeps_the_edit(sysroot):
    sysroot.write("/etc/hosts", HOSTS)
    plan, ctx = hosts_plan(str(sysroot.root))
    sysroot.write("/etc/hosts", HOSTS + "10.9.9.9 edited-meanwhile\n")
    with pytest.raises(FixFailed, match="changed since the plan"):
        apply_plan(plan, ctx)
    assert "edited-meanwhile" in sysroot.path("/etc/hosts").read_text()
    assert list_ids() == []  # refused before the journal: nothing to undo


def test_demo_overlay_write_through_planted_symlink_is_refused(tmp_path, sentinel):
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    os.symlink(str(sentinel), overlay / "etc")
    before = tree(sentinel)
    r = CliRunner().invoke(main, ["fix", "ldconf.ascend-conf", "--demo-root", str(overlay),
                                  "--apply", "--yes"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "symlink" in r.output
    assert tree(sentinel) == before


def applied_hosts(sysroot) -> Journal:
    sysroot.write("/etc/hosts", HOSTS)
    plan, ctx = hosts_plan(str(sysroot.root))
    res = apply_plan(plan, ctx)
    return Journal.load(res.journal)


def tamper(j: Journal, fn) -> None:
    path = os.path.join(j.dir, "journal.json")
    doc = json.loads(open(path).read())
    fn(doc)
    with open(path, "w") as fh:
        json.dump(doc, fh)


def test_tampered_journal_cannot_point_undo_outside_the_recipe(sysroot, sentinel):
    j = applied_hosts(sysroot)
    sysroot.write("/etc/shadow", "root:$6$x:1::::::\n", mode=0o600)
    before, root_before = tree(sentinel), tree(sysroot.root)
    attacks = [
        lambda d: d["targets"][0].update(path="/etc/shadow", resolved="/etc/shadow"),
        lambda d: d["targets"][0].update(resolved="/etc/../etc/shadow"),
        lambda d: d["targets"][0].update(mode=0o666),
        lambda d: d["targets"][0].update(mode=0o4755),
        lambda d: d["targets"][0].update(backup="../../../sentinel/shadow"),
        lambda d: d["targets"][0].update(existed=False, created_dirs=["/var"]),
        lambda d: d.update(recipe="no.such-recipe"),
    ]
    orig = json.loads(open(os.path.join(j.dir, "journal.json")).read())
    for attack in attacks:
        tamper(j, lambda d: (d.clear(), d.update(json.loads(json.dumps(orig))), attack(d)))
        with pytest.raises(JournalError):
            undo(j.id)
        assert tree(sentinel) == before and tree(sysroot.root) == root_before


def test_commands_planted_in_the_journal_are_not_run(sysroot, tmp_path):
    j = applied_hosts(sysroot)
    planted = tmp_path / "planted"
    tamper(j, lambda d: d["plan"].setdefault("commands", []).append(
        {"argv": ["touch", str(planted)], "sysroot_argv": ["touch", str(planted)]}))
    out = undo(j.id)
    assert not planted.exists() and out["commands"] == []
    assert sysroot.path("/etc/hosts").read_text() == HOSTS


@pytest.mark.parametrize("jid", ["../x", "..", "a/b", "000001-../../etc", "/etc/shadow"])
def test_journal_ids_are_validated(jid):
    with pytest.raises(JournalError, match="not a fix journal id"):
        undo(jid)


def test_journal_directory_with_loose_mode_is_refused(sysroot, state):
    j = applied_hosts(sysroot)
    os.chmod(state / "ascend-doctor" / "journal", 0o755)
    with pytest.raises(JournalError, match="0700"):
        undo(j.id)
    r = CliRunner().invoke(main, ["fix", "--undo"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1


def test_undo_root_a_undoes_a_not_the_newest_of_another_target(tmp_path):
    from tests.conftest import Sysroot
    a, b = Sysroot(tmp_path / "a"), Sysroot(tmp_path / "b")
    ja, jb = applied_hosts(a), applied_hosts(b)
    assert list_ids() == [ja.id, jb.id]  # sequence order
    r = CliRunner().invoke(main, ["fix", "--undo", "--root", str(a.root)])
    assert r.exit_code == 0, r.output
    assert str(a.root) in r.output
    assert a.path("/etc/hosts").read_text() == HOSTS
    assert "a.example" in b.path("/etc/hosts").read_text()
    with pytest.raises(JournalError, match="was applied to"):
        undo(jb.id, root=str(a.root))


def test_ldconf_undo_reruns_the_recipes_ldconfig_for_that_target(sysroot, tmp_path):
    import shutil
    sysroot.write("/etc/ld.so.conf", "/usr/local/lib\n")
    sysroot.write("/etc/ld.so.conf.d/ascend.conf",
                  "/usr/local/Ascend/ascend-toolkit/latest/lib64\n"
                  "/usr/local/Ascend/driver/lib64\n", mode=0o600)
    sysroot.mkdir("/usr/local/Ascend/driver/lib64")
    ctx = FixContext.for_root(str(sysroot.root))
    plan = FixRegistry.discover().get("ldconf.ascend-conf").plan(ctx, {})
    res = apply_plan(plan, ctx)
    j = Journal.load(res.journal)
    planted = tmp_path / "planted"
    tamper(j, lambda d: d["plan"]["commands"][0].update(
        argv=["touch", str(planted)], sysroot_argv=["touch", str(planted)]))
    out = undo(root=str(sysroot.root))
    assert out["write_root"] == str(sysroot.root)
    assert [c["argv"] for c in out["commands"]] == [["ldconfig", "-r", str(sysroot.root)]]
    assert not planted.exists()
    if shutil.which("ldconfig"):
        assert out["commands"][0]["rc"] == 0
        assert sysroot.path("/etc/ld.so.cache").exists()
    assert sysroot.path("/etc/ld.so.conf").read_text() == "/usr/local/lib\n"
    assert stat.S_IMODE(os.stat(sysroot.path("/etc/ld.so.conf.d/ascend.conf")).st_mode) == 0o600


def test_journal_under_a_directory_others_can_write_is_refused(sysroot, state):
    j = applied_hosts(sysroot)
    os.chmod(state / "ascend-doctor", 0o777)  # another account could swap journal/
    with pytest.raises(JournalError, match="writable by another account"):
        undo(j.id)
    os.chmod(state / "ascend-doctor", 0o755)
    assert undo(j.id)["restored"] == ["/etc/hosts"]


@pytest.mark.parametrize("doc", ['{"targets": "x"', "[" * 100000, '{"recipe": "dns.hosts-pin", '
                                 '"write_root": "/", "targets": "abc"}', '{"plan": 3}'])
def test_malformed_journal_is_one_line_not_a_traceback(sysroot, doc):
    j = applied_hosts(sysroot)
    with open(os.path.join(j.dir, "journal.json"), "w") as fh:
        fh.write(doc)
    before = tree(sysroot.root)
    r = CliRunner().invoke(main, ["fix", "--undo", j.id])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    assert tree(sysroot.root) == before


def test_edit_after_backup_is_refused_at_write_and_kept(sysroot, monkeypatch):
    sysroot.write("/etc/hosts", HOSTS)
    plan, ctx = hosts_plan(str(sysroot.root))
    real_set_state = Journal.set_state

    def edit(self, state, **kw):
        real_set_state(self, state, **kw)
        if state == "backed-up":
            sysroot.write("/etc/hosts", HOSTS + "10.3.3.3 late-edit\n")
    monkeypatch.setattr(Journal, "set_state", edit)
    with pytest.raises(FixFailed, match="changed since the plan"):
        apply_plan(plan, ctx)
    assert "late-edit" in sysroot.path("/etc/hosts").read_text()


def test_export_root_validates_the_whole_bundle_before_writing(tmp_path, sentinel):
    """Issue 34: the entries sorted first are fine, a later one cannot be written (a file
    that another entry needs as a directory): exit 2 and not one byte written."""
    b = bundle(tmp_path, [("/a", DIR, None), ("/a/ok", reg(), b"fine\n"),
                          ("/b", reg(), b"a file\n"), ("/b/c", reg(), b"under a file\n")])
    r, out = export(tmp_path, b)
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "/b is a file, not a directory" in r.output
    assert not out.exists() or not any(out.iterdir())
