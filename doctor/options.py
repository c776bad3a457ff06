"""The inputs of one run, as the CLI (or the TUI, or a test) gives them.

Probes read what they need from here; the core gives every field a meaning only by name.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunOptions:
    """The user's inputs to a run (service URL, capture, profile, logs ...), frozen for it."""

    service_url: str = "http://127.0.0.1:8000"
    service_url_given: bool = False  # the user named the service: absence is then a finding
    pid: int | None = None
    api_key: str | None = None  # never printed; sent as a bearer token to /v1
    pcap: str | None = None
    sniff_seconds: float | None = None
    iface: str | None = None
    profile_dir: str | None = None
    block_audit: str | None = None
    logs: tuple[str, ...] = ()
    elf_paths: tuple[str, ...] = ()
    sample_seconds: float = 3.0
    watch_seconds: float | None = None
    python: str | None = None  # interpreter whose packages are inspected (default: the service's)
    npu_exporter_url: str | None = None  # Huawei npu-exporter base URL (None: 127.0.0.1:8082)
    lang: str = "en"
    extra: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The inputs as reports show them (the API key never appears)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "api_key":
                v = "<set>" if v else None
            if isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out
