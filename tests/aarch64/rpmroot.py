"""An RPM-style (openEuler / Kylin) arm64 sysroot made from the Debian userland's files.

openEuler's aarch64 layout: merged /usr with ``/lib64 -> usr/lib64`` and ``/lib -> usr/lib``,
libraries in /usr/lib64 (no multiarch triple), the loader at its ELF-interpreter path
/lib/ld-linux-aarch64.so.1 pointing into lib64, ``/etc/ld.so.conf`` including
``ld.so.conf.d/*.conf``, pip's platlib in /usr/local/lib64/python3.X/site-packages, the
Ascend driver under /usr/local/Ascend/driver/lib64/{driver,common} and the CANN toolkit
(absent here) under /usr/local/Ascend/ascend-toolkit/latest.

The loader and ldconfig are Debian's arm64 glibc 2.36 moved into that layout (not
openEuler's 2.34 build): their compiled-in system directories are Debian's multiarch ones,
which do not exist in this tree, so /usr/lib64 is reached through ld.so.conf.d and the cache,
as the conf files name it. The cache is written by that arm64 ldconfig, run inside the
tree under qemu.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.aarch64.userland import BINFMT, SITE

TRIPLE = "aarch64-linux-gnu"
PY_SITE = "/usr/local/lib64/python3.11/site-packages"
DRIVER = "/usr/local/Ascend/driver/lib64"
CROSS_CC = "aarch64-linux-gnu-gcc"


def _copy_lib_dir(src: Path, dst: Path) -> None:
    """Top-level files and symlinks of a library directory (links kept as links)."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if entry.is_symlink():
            os.symlink(os.readlink(entry), dst / entry.name)
        elif entry.is_file():
            shutil.copy2(entry, dst / entry.name)


def cross_lib(out: Path, soname: str, *flags: str, src: str = "int f(void){return 1;}\n") -> Path:
    """A real arm64 shared object built with the cross compiler (gcc-aarch64-linux-gnu)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.with_name(out.name + ".c")
    c.write_text(src)
    subprocess.run([CROSS_CC, "-shared", "-fPIC", "-o", str(out), str(c), f"-Wl,-soname,{soname}",
                    "-Wl,--no-as-needed", *flags], check=True, capture_output=True)
    c.unlink()
    return out


def build_rpm_root(deb: Path, dest: Path) -> Path:
    """The RPM-style tree at ``dest`` (see the module docstring); returns ``dest``."""
    usr = dest / "usr"
    _copy_lib_dir(deb / "usr/lib" / TRIPLE, usr / "lib64")
    (usr / "lib").mkdir(parents=True, exist_ok=True)
    os.symlink("../lib64/ld-linux-aarch64.so.1", usr / "lib/ld-linux-aarch64.so.1")
    for name in ("lib", "lib64", "bin", "sbin"):
        (usr / name).mkdir(exist_ok=True)
        os.symlink(f"usr/{name}", dest / name)
    ldconfig = deb / "sbin/ldconfig.real"
    if not ldconfig.exists():
        ldconfig = deb / "sbin/ldconfig"
    shutil.copy2(ldconfig, usr / "sbin/ldconfig")  # static arm64 binary
    shutil.copy2(deb / "usr/bin/env", usr / "bin/env")  # sets the environment inside (chroot())
    # the interpreter binfmt names must exist inside the tree (Debian's entry has no F flag)
    m = re.search(r"^interpreter (\S+)", BINFMT.read_text(), re.M)
    if m:
        q = dest / m.group(1).lstrip("/")
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(deb / m.group(1).lstrip("/"), q)
    etc = dest / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True)
    (etc / "ld.so.conf").write_text("include ld.so.conf.d/*.conf\n\n")
    (etc / "ld.so.conf.d/lib64.conf").write_text("/usr/lib64\n")
    (etc / "ld.so.conf.d/ascend.conf").write_text(f"{DRIVER}/driver\n{DRIVER}/common\n")
    (etc / "ascend_install.info").write_text(
        "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nFirmware_Install_Type=full\n"
        f"Driver_Install_Type=full\nDriver_Install_Path_Param=/usr/local/Ascend\n")
    (etc / "os-release").write_text('NAME="openEuler"\nVERSION="22.03 (LTS-SP4)"\nID="openEuler"\n'
                                    'VERSION_ID="22.03"\nPRETTY_NAME="openEuler 22.03 (LTS-SP4)"\n')
    # the driver's libraries (real arm64 objects standing in for them) and an empty toolkit
    # parent: the CANN toolkit is not installed, as on the Kunpeng host in question
    cross_lib(dest / DRIVER.lstrip("/") / "common/libc_sec.so", "libc_sec.so")
    cross_lib(dest / DRIVER.lstrip("/") / "driver/libascend_hal.so", "libascend_hal.so")
    (dest / "usr/local/Ascend/ascend-toolkit").mkdir(parents=True)
    # the wheels where openEuler's pip puts platlib, with their dist-info (RECORD)
    site = dest / PY_SITE.lstrip("/")
    site.mkdir(parents=True)
    for entry in sorted((deb / SITE.lstrip("/")).iterdir()):
        if entry.name.startswith(("torch_npu", "vllm_ascend")):
            shutil.copytree(entry, site / entry.name, symlinks=True)
    # static, and run first: until this cache exists the tree's env (dynamic) finds no libc,
    # since the Debian loader's own system dirs are not in this layout
    r = subprocess.run(["chroot", str(dest), "/usr/sbin/ldconfig"], capture_output=True,
                       text=True, timeout=300, env={"PATH": "/usr/sbin:/usr/bin"})
    assert r.returncode == 0, f"arm64 ldconfig in {dest}: {r.stderr}"
    return dest
