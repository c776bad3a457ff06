"""json.loads with bounds: hostile documents (bundles, recorded HTTP bodies) raise ValueError.

The stdlib decoder recurses once per nesting level, so ``[[[[…`` 100 000 deep raises
RecursionError (not a ValueError callers catch) and can crash the interpreter; and a few
MiB of ``[{},{},…]`` become millions of Python objects. One linear pre-scan counts the
nesting depth and the number of containers outside strings before the real parse runs.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 200
MAX_CONTAINERS = 1_000_000

# A string token, or one bracket. The string alternative also matches an unterminated
# string to the end of the text, so no position is ever re-scanned (linear time).
_TOKEN = re.compile(r'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)|[\[\]{}]', re.S)


def check_bounds(text: str, max_depth: int = MAX_DEPTH,
                 max_containers: int = MAX_CONTAINERS) -> None:
    """Raise ValueError when ``text`` nests deeper or holds more containers than allowed."""
    depth = containers = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c == "[" or c == "{":
            depth += 1
            containers += 1
            if depth > max_depth:
                raise ValueError(f"JSON nested deeper than {max_depth} levels")
            if containers > max_containers:
                raise ValueError(f"JSON holds more than {max_containers} arrays/objects")
        elif c == "]" or c == "}":
            depth -= 1


def loads(data: "str | bytes", max_depth: int = MAX_DEPTH,
          max_containers: int = MAX_CONTAINERS) -> Any:
    """``json.loads`` that raises ValueError (never RecursionError) on hostile input."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    check_bounds(text, max_depth, max_containers)
    try:
        return json.loads(text)
    except RecursionError:  # belt and braces: the pre-scan should make this unreachable
        raise ValueError("JSON nested too deeply") from None
