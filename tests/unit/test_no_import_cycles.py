"""No import circle inside ascend_doctor (a module-level or deferred import both count, as
grimp sees them): tools that draw or lint the graph, and readers, can take a layer at a time.
The graph is read from the same symlinked shadow tree test_layers.py gives lint-imports."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.unit.test_layers import _shadow

CODE = """
import grimp
g = grimp.build_graph("ascend_doctor", cache_dir=None)
bad = set()
for a in sorted(g.modules):
    for b in sorted(g.find_modules_directly_imported_by(a)):
        chain = g.find_shortest_chain(importer=b, imported=a)
        if chain:
            bad.add(" -> ".join((a, *chain)))
print("\\n".join(sorted(bad)))
"""


def test_the_package_has_no_import_cycle(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(_shadow(tmp_path))}
    r = subprocess.run([sys.executable, "-c", CODE], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "", "import cycles:\n" + r.stdout
