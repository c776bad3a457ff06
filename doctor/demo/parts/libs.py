"""The demo host's shared objects: torch, torch_npu and vllm_ascend files at the paths the
Packages fact names, CANN and driver libraries under /usr/local/Ascend, system libraries
and a real new-format /etc/ld.so.cache that lacks every Ascend library (ascend.conf is
mode 600 and not included: seed 000_93c34712512482cd.txt). Nothing in the service's
environment names the Ascend directories, so libascendcl.so / libhccl.so stay unresolved.
"""

from __future__ import annotations

from ...bundle import BundleWriter
from ...probes.ldcache import build_ldcache
from ..elfgen import shared_object
from .base import SITE

MULTIARCH = "/usr/lib/x86_64-linux-gnu"
TK = "/usr/local/Ascend/ascend-toolkit/8.3.RC2"  # the stack part's toolkit (latest -> 8.3.RC2)
SYSTEM = {"libc.so.6": ("ld-linux-x86-64.so.2",), "libm.so.6": ("libc.so.6",),
          "libgcc_s.so.1": ("libc.so.6",), "libpthread.so.0": ("libc.so.6",),
          "libstdc++.so.6": ("libm.so.6", "libc.so.6", "libgcc_s.so.1"),
          "ld-linux-x86-64.so.2": ()}
CXX = ("libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6")
TORCH = {"libc10.so": CXX, "libtorch_cpu.so": ("libc10.so",) + CXX,
         "libtorch.so": ("libtorch_cpu.so",) + CXX,
         "libtorch_python.so": ("libtorch.so", "libtorch_cpu.so", "libc10.so") + CXX}
# real DT_NEEDED / RPATH of the wheels (facts/observed-wheels.md), trimmed to the Ascend core
TORCH_NPU = {
    "torch_npu/lib/libtorch_npu.so": (
        ("libhccl.so", "libascendcl.so", "libacl_op_compiler.so", "libge_runner.so",
         "libgraph.so", "libtorch_python.so", "libtensorpipe.so", "libnpu_profiler.so",
         "libtorch.so", "libtorch_cpu.so", "libc10.so") + CXX,
        "$ORIGIN/lib/:$ORIGIN/:$ORIGIN/../../torch_npu.libs", None),
    "torch_npu/_C.cpython-311-x86_64-linux-gnu.so": (
        ("libtorch_npu.so", "libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so",
         "libhccl.so") + CXX + ("libpthread.so.0",),
        "$ORIGIN/lib:$ORIGIN/../torch_npu.libs", None),
    "torch_npu/lib/libtensorpipe.so": (("libascendcl.so",) + CXX, "$ORIGIN", None),
    "torch_npu/lib/libnpu_profiler.so": (("libascendcl.so",) + CXX, "$ORIGIN", None),
    "torch_npu/lib/libop_plugin_atb.so": (("libatb.so", "libascendcl.so") + CXX, "$ORIGIN", None),
}
VLLM_ASCEND = {
    "vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so": (
        ("libvllm_ascend_kernels.so", "libtorch.so", "libc10.so", "libtorch_npu.so",
         "libascendcl.so", "libruntime.so", "libtorch_cpu.so") + CXX,
        None, "$ORIGIN:$ORIGIN/lib"),
    "vllm_ascend/libvllm_ascend_kernels.so": (("libascendcl.so",) + CXX, None, None),
}
CANN = ("libascendcl.so", "libhccl.so", "libacl_op_compiler.so", "libge_runner.so",
        "libgraph.so", "libruntime.so")  # libatb.so (NNAL) is not installed on this host
LIBC6_X86_64 = 0x0303


def build(w: BundleWriter) -> None:
    cache_rows = []
    for name, needed in SYSTEM.items():
        w.file(f"{MULTIARCH}/{name}", shared_object(needed, name), mode=0o755)
        cache_rows.append((name, f"/lib/x86_64-linux-gnu/{name}", LIBC6_X86_64))
    w.symlink("/lib", "usr/lib")  # merged /usr, as on Ubuntu 22.04
    w.symlink("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    for name, needed in TORCH.items():
        w.file(f"{SITE}/torch/lib/{name}", shared_object(needed, name), mode=0o755)
    for files in (TORCH_NPU, VLLM_ASCEND):
        for rel, (needed, rpath, runpath) in files.items():
            base = rel.rsplit("/", 1)[1]
            soname = base if base.startswith("lib") else None
            w.file(f"{SITE}/{rel}", shared_object(needed, soname, runpath, rpath), mode=0o755)
    for name in CANN:
        w.file(f"{TK}/lib64/{name}", shared_object(CXX, name), mode=0o755)
    w.symlink("/usr/local/Ascend/ascend-toolkit/latest", TK)
    w.file("/usr/local/Ascend/driver/lib64/driver/libascend_hal.so",
           shared_object(("libc.so.6",), "libascend_hal.so"), mode=0o755)
    # ldconfig ran before the CANN install: the cache knows only the system libraries
    cache_rows.sort(key=lambda r: r[0], reverse=True)
    w.file("/etc/ld.so.cache",
           build_ldcache(cache_rows, "ldconfig (Ubuntu GLIBC 2.35-0ubuntu3.7) stable release "
                                     "version 2.35"), mtime=1767225600.0 + 60)
