"""walk_ldconf over random sysroots: include globs, loops, dangling links, bad bytes.

The result is always an LdSoConf (problems named in ``problems``), whatever the tree holds.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import example, given, strategies as st

from ascend_doctor.host import LiveHost
from ascend_doctor.probes.ldconf import LdSoConf, walk_ldconf
from tests.fuzz.harness import assert_total, corpus, heavy, mutated

FILES = ("/etc/ld.so.conf", "/etc/ld.so.conf.d/a.conf", "/etc/ld.so.conf.d/b.conf",
         "/etc/ascend/c.conf")
INCLUDES = ("/etc/ld.so.conf.d/*.conf", "ld.so.conf.d/*", "/etc/ld.so.conf", "*.conf",
            "/etc/ascend/*", "../etc/ld.so.conf.d/a.conf", "/etc/ld.so.conf.d", "/nonexistent/*",
            "/etc/ld.so.conf.d/[ab].conf", "/etc/ld.so.conf.d/[z-a]*", "/etc/loop.conf",
            "/etc/dangling.conf", "/etc/ld.so.conf.d/**", "bad\0name", "/etc/" + "x" * 300)

_line = st.one_of(
    st.sampled_from(INCLUDES).map(lambda p: f"include {p}"),
    st.sampled_from(["/usr/local/Ascend/driver/lib64", "/usr/lib/x86_64-linux-gnu",
                     "/opt/a:/opt/b,/opt/c", "hwcap 0 nosegneg", "# comment", ""]),
    st.text(max_size=40),
)
_conf = st.one_of(st.lists(_line, max_size=6).map(lambda ls: "\n".join(ls).encode("utf-8",
                                                                                  "surrogatepass")),
                  mutated(corpus("ldconf")))
_tree = st.fixed_dictionaries({f: st.one_of(st.none(), _conf) for f in FILES[1:]},
                              optional={"links": st.booleans(), "dir_as_conf": st.booleans()})


def _build(root: str, top: bytes, files: dict) -> None:
    def write(path: str, data: bytes) -> None:
        real = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as fh:
            fh.write(data)

    write(FILES[0], top)
    for path, data in files.items():
        if path.startswith("/") and data is not None:
            write(path, data)
    if files.get("links"):
        os.symlink("/etc/loop.conf", os.path.join(root, "etc/loop.conf"))  # self-loop
        os.symlink("/gone/x.conf", os.path.join(root, "etc/dangling.conf"))
        os.makedirs(os.path.join(root, "etc/ld.so.conf.d"), exist_ok=True)
        os.symlink("../ld.so.conf", os.path.join(root, "etc/ld.so.conf.d/up.conf"))
    if files.get("dir_as_conf"):
        os.makedirs(os.path.join(root, "etc/ld.so.conf.d/d.conf"), exist_ok=True)


@heavy()
@given(_conf, _tree)
@example(b"include /etc/ld.so.conf.d/*.conf\n", {"/etc/ld.so.conf.d/a.conf": b"include bad\0x\n",
                                                 "links": True, "dir_as_conf": True})
def test_walk_ldconf_total_on_random_trees(top, files):
    root = tempfile.mkdtemp(prefix="fuzz-ldconf-")
    try:
        _build(root, top, files)
        conf = assert_total(walk_ldconf, LiveHost(root, env={"PATH": "/usr/bin"}), allowed=())
        assert isinstance(conf, LdSoConf)
        assert len(conf.dirs) == len(set(conf.dirs))
        assert all(d.startswith("/") for d in conf.dirs)
        assert conf.files and conf.files[0].path == "/etc/ld.so.conf"
    finally:
        shutil.rmtree(root, ignore_errors=True)
