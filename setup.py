"""Only the optional C scanners live here; everything else is in pyproject.toml.

``optional=True``: without a C compiler the build still succeeds and ascend-doctor uses
its pure-Python paths, which give the same results: the op_summary parser
(doctor/probes/msprof.py) and the pcap DNS analysis (doctor/probes/dnsstats.py).
``-ffp-contract=off`` keeps the DNS scanner's double arithmetic as Python does it (no FMA
on aarch64, where the Ascend hosts are; the timestamp also goes through a volatile).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("ascend_doctor._opscan", ["doctor/_opscan.c"], optional=True),
    Extension("ascend_doctor._dnsscan", ["doctor/_dnsscan.c"], optional=True,
              extra_compile_args=["-ffp-contract=off"]),
])
