"""A bundle replays with the options it was collected with; the user's explicit flags win.

`collect --service URL --pid N --python P --log F` records those options in the manifest.
Without them a replay would ask the recorded answers different questions (the default URL,
no pid, the doctor's python) and the findings would differ from the collection's. The
manifest is hostile input, so only known fields of the expected types are taken.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from .options import RunOptions

# the RunOptions fields that shape which questions the checks ask (never api_key, lang)
REPLAYED = ("service_url", "service_url_given", "pid", "python", "pcap", "sniff_seconds",
            "iface", "profile_dir", "block_audit", "logs", "elf_paths", "sample_seconds",
            "watch_seconds", "npu_exporter_url")
_MAX_ITEMS = 64
_MAX_TEXT = 4096


def _valid(name: str, value: Any, default: Any) -> Any:
    """The recorded value when it has the field's type, else the default."""
    if value is None:
        return None if default is None or name in ("pid", "python", "npu_exporter_url") \
            else default
    if name == "service_url_given":
        return value if isinstance(value, bool) else default
    if name == "pid":
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
            else default
    if name in ("sniff_seconds", "sample_seconds", "watch_seconds"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 86400
        return float(value) if ok else default
    if name in ("logs", "elf_paths"):
        if isinstance(value, (list, tuple)) and len(value) <= _MAX_ITEMS and all(
                isinstance(v, str) and len(v) <= _MAX_TEXT for v in value):
            return tuple(value)
        return default
    return value if isinstance(value, str) and len(value) <= _MAX_TEXT else default


def replay_options(recorded: Mapping[str, Any] | None, options: RunOptions,
                   explicit: Iterable[str]) -> RunOptions:
    """``options`` with every field the user did not set taken from the bundle's manifest.

    ``explicit`` names the RunOptions fields the user gave on this command line.
    """
    if not isinstance(recorded, Mapping):
        return options
    given = set(explicit)
    if "service_url" in given:
        given.add("service_url_given")
    changes: dict[str, Any] = {}
    for name in REPLAYED:
        if name in given or name not in recorded:
            continue
        value = _valid(name, recorded[name], getattr(options, name))
        if value != getattr(options, name):
            changes[name] = value
    return replace(options, **changes) if changes else options


def replayed_fields(before: RunOptions, after: RunOptions) -> list[str]:
    """What the replay took from the bundle, for one line on stderr."""
    return [n for n in REPLAYED if getattr(before, n) != getattr(after, n)]
