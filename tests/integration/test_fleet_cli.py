"""`ascend-doctor diff` and `ascend-doctor fleet` on real bundles written by `collect --root`
through the console script: good nodes, one with a broken ld.so.conf (the Ascend conf no
longer included), one with another CANN toolkit, and a file that is no bundle at all."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from tests.conftest import Sysroot, run_cli

TOOLKIT = """package_name=Ascend-cann-toolkit
version={v}
innerversion={inner}
compatible_version={compat}
arch=x86_64
os=linux
path=/usr/local/Ascend/ascend-toolkit/{v}/x86_64-linux
"""
DRIVER = """Version=24.1.rc3
ascendhal_version=7.35.19
Innerversion=V100R001C23SPC001B100
compatible_version=[V100R001C15],[V100R001C23]
"""
ASCEND_CONF = "/usr/local/Ascend/driver/lib64\n/usr/local/Ascend/ascend-toolkit/latest/lib64\n"


def _node(root: Path, *, cann: str = "8.3.RC2", inner: str = "V100R001C23SPC002B210",
          include: bool = True, compat: str = "[V100R001C15],[V100R001C23]") -> Sysroot:
    s = Sysroot(root)
    root.mkdir()
    s.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n" if include
            else "/usr/lib/x86_64-linux-gnu\n")
    s.write("/etc/ld.so.conf.d/ascend.conf", ASCEND_CONF)
    for d in ("/usr/local/Ascend/driver/lib64", "/usr/lib/x86_64-linux-gnu"):
        s.mkdir(d)
    s.write(f"/usr/local/Ascend/ascend-toolkit/{cann}/x86_64-linux/ascend_toolkit_install.info",
            TOOLKIT.format(v=cann, inner=inner, compat=compat))
    s.mkdir(f"/usr/local/Ascend/ascend-toolkit/{cann}/lib64")
    s.symlink("/usr/local/Ascend/ascend-toolkit/latest", cann)
    s.write("/usr/local/Ascend/driver/version.info", DRIVER)
    return s


def _collect(root: Sysroot, out: Path) -> Path:
    r = run_cli("collect", "--root", str(root), "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fleet")
    out = d / "bundles"
    out.mkdir()
    made = {}
    for name, kw in (("node-01", {}), ("node-02", {}), ("node-03", {}),
                     ("node-05", {"include": False}),
                     # node-07's toolkit lists no driver line of this host's driver (C23), which lists no
                     # C25 either: versions.driver-cann fails there
                     ("node-07", {"cann": "8.5.0", "inner": "V100R001C25SPC001B212",
                                  "compat": "[V100R001C24],[V100R001C25]"})):
        made[name] = _collect(_node(d / name, **kw), out / f"{name}.tar.gz")
    return made


def test_diff_good_bad_names_the_ldconf_break_first(bundles):
    r = run_cli("diff", str(bundles["node-01"]), str(bundles["node-05"]))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("checks that differ"))
    # worse on B first: ldconf.order passes on node-01 and fails on node-05
    assert lines[first + 1].split()[:5] == ["ldconf.order", "A", "pass", "B", "fail"]
    assert "ASC-LIB-002" in lines[first + 1]
    assert "B: no Ascend directory is configured in /etc/ld.so.conf" in r.stdout
    assert "ld.so.conf search order differs:" in r.stdout
    assert ("  only in A: /usr/local/Ascend/driver/lib64 "
            "/usr/local/Ascend/ascend-toolkit/latest/lib64") in lines
    assert "  only in B: /usr/lib/x86_64-linux-gnu" in lines
    assert "versions that differ" not in r.stdout


def test_diff_json_shows_the_cann_version(bundles):
    r = run_cli("diff", "--json", str(bundles["node-01"]), str(bundles["node-07"]))
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert {"name": "cann", "a": "8.3.RC2", "b": "8.5.0"} in d["versions"]
    assert d["ldconf"] is None
    assert (d["a"], d["b"]) == ("node-01.tar.gz", "node-07.tar.gz")


def test_diff_of_two_equal_nodes_is_empty_and_exits_0(bundles):
    r = run_cli("diff", str(bundles["node-01"]), str(bundles["node-02"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no differences" in r.stdout


def test_fleet_dir_groups_nodes_and_names_the_odd_ones(bundles):
    r = run_cli("fleet", "--json", str(bundles["node-01"].parent))
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["nodes"] == 5 and d["refused"] == []
    major = d["groups"][0]
    assert major["majority"] and major["size"] == 3
    assert {n.split(" ")[0] for n in major["nodes"]} == {"node-01.tar.gz", "node-02.tar.gz",
                                                         "node-03.tar.gz"}
    odd = {n.split(" ")[0] for n in d["odd_nodes"]}
    assert "node-05.tar.gz" in odd
    drift = {x["field"]: x for x in d["drift"]}
    cann = drift["version cann"]
    assert (cann["majority"], cann["majority_count"]) == ("8.3.RC2", 4)
    assert [(o["value"], [n.split(" ")[0] for n in o["nodes"]]) for o in cann["others"]] == [
        ("8.5.0", ["node-07.tar.gz"])]
    ld = drift["ld.so.conf order"]
    assert ld["majority_count"] == 4
    assert ld["others"][0]["value"] == "/usr/lib/x86_64-linux-gnu"
    order = {p["check"]: p for p in d["some_problems"]}["ldconf.order"]
    assert [n.split(" ")[0] for n in order["nodes"]] == ["node-05.tar.gz"]


def test_fleet_text_and_a_refused_bundle_among_good_ones(bundles, tmp_path):
    junk = tmp_path / "node-99.tar.gz"
    junk.write_bytes(gzip.compress(b"not a tar at all\n" * 10))
    files = [str(bundles[n]) for n in ("node-01", "node-02", "node-05")]
    r = run_cli("fleet", *files, str(junk))
    assert r.returncode == 2, r.stderr  # one bundle without a verdict
    out = r.stdout
    assert out.startswith("fleet: 3 nodes read, 1 bundles refused\n")
    assert f"  refused node-99.tar.gz: {junk} is not a readable bundle" in out
    assert "2 node(s), majority: node-01.tar.gz" in out
    assert "1 node(s), odd: node-05.tar.gz" in out
    assert "also failing: ldconf.order fail" in out
    assert "  ld.so.conf order: /usr/local/Ascend/driver/lib64" in out


def test_fleet_refuses_a_link_member_and_goes_on(bundles, tmp_path):
    """A bundle with a symlink member (blobs/x -> /etc/shadow) is refused by the bounded
    reader, named in one line, and the other nodes are still compared."""
    import io
    import tarfile

    evil = tmp_path / "node-66.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        manifest = json.dumps({"format": "ascend-doctor-bundle", "format_version": 1}).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        link = tarfile.TarInfo("blobs/x")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(link)
    r = run_cli("fleet", "--json", str(bundles["node-01"]), str(bundles["node-02"]), str(evil))
    assert r.returncode == 2, r.stderr
    d = json.loads(r.stdout)
    assert d["nodes"] == 2 and len(d["groups"]) == 1
    (refused,) = d["refused"]
    assert refused["bundle"] == "node-66.tar.gz" and "is a link" in refused["reason"]
    assert "\n" not in refused["reason"]


def test_diff_refuses_a_non_bundle_in_one_line(bundles, tmp_path):
    junk = tmp_path / "x.tar.gz"
    junk.write_bytes(b"\x1f\x8b garbage")
    r = run_cli("diff", str(bundles["node-01"]), str(junk))
    assert r.returncode == 2
    assert r.stdout == ""
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ascend-doctor: ") and str(junk) in err[0]


def test_fleet_of_an_empty_dir_is_a_usage_error(tmp_path):
    r = run_cli("fleet", str(tmp_path))
    assert r.returncode == 2
    assert "no bundles" in r.stderr and str(tmp_path) in r.stderr
    assert not os.listdir(tmp_path)


def _peak_rss_mb(args: list[str]) -> float:
    import shutil
    import subprocess
    import tempfile

    from tests.conftest import doctor_exe

    gnu_time = shutil.which("time") if os.path.exists("/usr/bin/time") else None
    if gnu_time is None:
        pytest.skip("GNU time (Debian package `time`) is not installed")
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name, doctor_exe(), *args],
                           capture_output=True, text=True, timeout=600,
                           env={**os.environ, "CI": "true", "NO_COLOR": "1"})
        assert r.returncode == 1, r.stderr
        return int(out.read().split()[-1]) / 1024


def test_fleet_memory_does_not_grow_with_the_bundle_count(tmp_path):
    """Bounded memory: one bundle at a time is held. 45 more demo variants (each ~0.9 MB of
    blobs and index once inflated, several MiB as Python objects) add less than 10 MiB of
    peak RSS (holding them would add ~45 MiB or more). The smaller fleet has 45 bundles, not
    15: the first few dozen variants reach code paths (and their imports) the first 15 do
    not, a one-time 7-11 MiB that is not per bundle (15 → 45 → 90: 78 → 86 → 86 MiB)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from bench_fleet import make_variants

    few, many = tmp_path / "few", tmp_path / "many"
    few.mkdir()
    many.mkdir()
    paths = make_variants(str(many), 90)
    for p in paths[:45]:
        os.symlink(p, few / os.path.basename(p))
    # the peak of one run varies by up to ~13 MiB on the same input (73.6 against 86.6 MiB
    # for the 45, in CI under load): two runs of each, the smaller fleet's highest against
    # the bigger one's lowest, which a real leak (+45 MiB or more) still fails
    small = [_peak_rss_mb(["fleet", "--json", str(few)]) for _ in range(2)]
    big = [_peak_rss_mb(["fleet", "--json", str(many)]) for _ in range(2)]
    print(f"peak RSS: 45 bundles {small} MiB, 90 bundles {big} MiB")
    assert min(big) - max(small) < 10, (small, big)
