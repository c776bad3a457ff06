"""Does ``import torch_npu`` work in the service's interpreter and environment?"""

from __future__ import annotations

import re
from typing import Iterator

from ascend_doctor.checks.libacl import missing_key

from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.kbfact import Knowledge
from ascend_doctor.probes.torchimport import IMPORT_TIMEOUT_S, TorchNpuImport
from ascend_doctor.registry import check


@check("torch_npu.import", title="torch_npu imports in the service's interpreter",
       category=Category.LIBS, tags=("libs", "versions", "torch_npu"),
       timeout=IMPORT_TIMEOUT_S + 20)
def torch_npu_import(res: TorchNpuImport, know: Knowledge) -> Iterator[Finding]:
    where = T("{python} ({source}; env: {env})", python=res.interpreter,
              source=res.interpreter_source, env=res.env_source)
    ev = {"interpreter": res.interpreter, "env": res.env_source, "returncode": res.returncode,
          "seconds": round(res.duration_s, 2), "output": res.output[-3000:], "ran": res.ran,
          "context": dict(res.context)}
    ran = f" ({res.ran})" if res.ran else ""
    if res.timed_out:
        yield Finding.error(T("`{python} -c 'import torch_npu'` did not finish within {s} s "
                              "(killed): the import hangs (device busy or driver hung){ran}",
                              python=res.interpreter, s=f"{res.duration_s:.0f}", ran=ran),
                            subject=res.interpreter, evidence=ev, kb="ASC-NPU-004")
        return
    if res.ok:
        yield Finding.passed(T("import torch_npu works in {where} ({s} s){ran}", where=where,
                               s=f"{res.duration_s:.1f}", ran=ran),
                             evidence=ev)
        return
    last = res.last_line or T("exit {rc}, no output", rc=res.returncode)
    if "No module named 'torch_npu'" in last:
        yield Finding.skip(T("torch_npu is not installed in {where}: {last}",
                             where=where, last=last), evidence=ev)
        return
    matches = know.match_lines(res.output.splitlines())
    # entries written for this check explain it best; other matches follow in rank order
    matches = sorted(matches, key=lambda m: "torch_npu.import" not in m.entry.checks)
    kb = [m.entry.id for m in matches][:3]
    # the loader's own error names the soname: ld.so not finding it (libacl.resolve) explains it
    missing = _MISSING_SO.findall(res.output)
    yield Finding.fail(T("import torch_npu fails in {where}{ran}: {last}", where=where, ran=ran,
                         last=last), subject=res.interpreter,
                       evidence={**ev, "kb_groups": {m.entry.id: dict(m.groups)
                                                     for m in matches[:3]}}, kb=kb,
                       explained_by=[missing_key(n) for n in dict.fromkeys(missing)])


# dlopen's message (glibc dlerror): "<soname>: cannot open shared object file: ..."
_MISSING_SO = re.compile(r"([\w.+-]+\.so[\w.]*): cannot open shared object file")
