"""Only the optional C scanner lives here; everything else is in pyproject.toml.

``optional=True``: without a C compiler the build still succeeds and ascend-doctor uses
its pure-Python op_summary parser (doctor/probes/msprof.py), which gives the same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ascend_doctor._opscan", ["doctor/_opscan.c"], optional=True)])
