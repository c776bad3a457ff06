"""Reading the package's own data files (the demo bundle, the knowledge TOML).

Next to the module on disk (a wheel, an editable install), a plain ``open``: importing
``importlib.resources`` pulls in tempfile and zipfile (~3 ms of a ~0.2 s ``demo --json``).
A package that is not a directory (a zip) is read through importlib.resources.
"""

from __future__ import annotations

import os


def read_bytes(package: str, module_file: str, name: str) -> bytes:
    """The bytes of ``name`` in ``package`` (whose ``__init__`` is ``module_file``)."""
    try:
        with open(os.path.join(os.path.dirname(module_file), name), "rb") as fh:
            return fh.read()
    except (FileNotFoundError, NotADirectoryError):
        from importlib.resources import files

        return files(package).joinpath(name).read_bytes()


def names(package: str, module_file: str, suffix: str) -> list[str]:
    """The names of ``package``'s data files that end in ``suffix``, sorted."""
    try:
        with os.scandir(os.path.dirname(module_file)) as it:
            return sorted(e.name for e in it if e.name.endswith(suffix) and e.is_file())
    except (FileNotFoundError, NotADirectoryError):
        from importlib.resources import files

        return sorted(p.name for p in files(package).iterdir() if p.name.endswith(suffix))
