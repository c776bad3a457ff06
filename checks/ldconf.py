"""ld.so.conf order: the Ascend directories must be configured, driver/lib64 first."""

from __future__ import annotations

from typing import Iterator

from doctor.model import Category, Finding
from doctor.probes.ldconf import LdSoConf
from doctor.registry import check


def _is_ascend(path: str) -> bool:
    return "/Ascend/" in path or path.rstrip("/").endswith("/Ascend")


def _is_driver_lib64(path: str) -> bool:
    return "/Ascend/driver/lib64" in path


@check("ldconf.order", title="Ascend driver libraries come first in ld.so.conf",
       category=Category.LIBS, tags=("libs", "ldconf"))
def driver_first(conf: LdSoConf) -> Iterator[Finding]:
    ascend = [d for d in conf.search_dirs if _is_ascend(d.path)]
    order = [f"{d.path} ({d.origin})" for d in ascend]
    if not ascend:
        conf_files = [f.path for f in conf.files]
        yield Finding.fail(
            "no Ascend directory is configured in /etc/ld.so.conf or the files it includes "
            f"(read: {', '.join(conf_files)}); libascendcl.so / libascend_hal.so are then found "
            "only through LD_LIBRARY_PATH",
            subject="/etc/ld.so.conf", evidence={"conf_files": conf_files, "dirs": conf.dirs},
            kb="ASC-LIB-002", fix="ldconf.ascend-conf")
        return
    first = ascend[0]
    if not _is_driver_lib64(first.path):
        drivers = [d for d in ascend if _is_driver_lib64(d.path)]
        where = (f"driver/lib64 comes at position {ascend.index(drivers[0]) + 1} "
                 f"({drivers[0].origin})" if drivers else "driver/lib64 is not configured at all")
        yield Finding.fail(
            f"{first.path} is searched before the driver's lib64 ({first.origin}); {where}",
            subject=first.origin.rsplit(":", 1)[0], evidence={"order": order},
            kb="ASC-LIB-003", fix="ldconf.ascend-conf")
        return
    yield Finding.passed(f"{first.path} is the first of {len(ascend)} Ascend directories "
                         f"({first.origin})", evidence={"order": order})
