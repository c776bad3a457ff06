"""The fix journal: one directory per applied plan, written *before* anything changes.

``$XDG_STATE_HOME/ascend-doctor/journal/<id>/`` holds ``journal.json`` (the plan, the write
root, each target's backup entry, the state) and ``backups/<n>`` (the old bytes). Undo
needs nothing else, so a crash after the backups leaves a restorable journal.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
from typing import Any

from doctor.atomic import atomic_write
from doctor.errors import DoctorError


def state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "state")
    return os.path.join(base, "ascend-doctor", "journal")


def new_id(recipe: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{recipe}-{secrets.token_hex(3)}"


class Journal:
    def __init__(self, jid: str, data: dict[str, Any]) -> None:
        self.id = jid
        self.dir = os.path.join(state_dir(), jid)
        self.data = data

    @classmethod
    def create(cls, recipe: str, doc: dict[str, Any]) -> "Journal":
        j = cls(new_id(recipe), {**doc, "state": "started", "targets": []})
        os.makedirs(os.path.join(j.dir, "backups"), mode=0o700, exist_ok=False)
        j.save()
        return j

    @classmethod
    def load(cls, jid: str | None = None) -> "Journal":
        """A journal by id, or the newest one not yet undone."""
        root = state_dir()
        if jid:
            path = os.path.join(root, jid, "journal.json")
            if not os.path.exists(path):
                raise DoctorError(f"no fix journal {jid!r} under {root}")
        else:
            cands = [j for j in list_ids() if Journal._read(j).get("state") != "undone"]
            if not cands:
                raise DoctorError(f"no fix to undo (journal {root} is empty)")
            jid = cands[-1]
        return cls(jid, cls._read(jid))

    @staticmethod
    def _read(jid: str) -> dict[str, Any]:
        path = os.path.join(state_dir(), jid, "journal.json")
        try:
            with open(path, "rb") as fh:
                return json.loads(fh.read())
        except (OSError, ValueError) as exc:
            raise DoctorError(f"fix journal {path} is unreadable: {exc}") from None

    def save(self) -> None:
        atomic_write(os.path.join(self.dir, "journal.json"),
                     json.dumps(self.data, indent=1, sort_keys=True).encode(), mode=0o600)

    def set_state(self, state: str, **extra: Any) -> None:
        self.data["state"] = state
        self.data.update(extra)
        self.save()

    def backup(self, host_path: str, real: str, created_dirs: list[str]) -> None:
        """Copy the target's bytes and mode into the journal (fsync'd) before it changes."""
        n = len(self.data["targets"])
        entry: dict[str, Any] = {"path": host_path, "real": real, "existed": False,
                                 "created_dirs": created_dirs}
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            st = None
        if st is not None:
            with open(real, "rb") as fh:
                data = fh.read()
            blob = os.path.join(self.dir, "backups", str(n))
            atomic_write(blob, data, mode=0o600)
            entry.update(existed=True, backup=str(n), mode=st.st_mode & 0o7777, uid=st.st_uid,
                         gid=st.st_gid, size=len(data))
        self.data["targets"].append(entry)
        self.save()

    def backup_bytes(self, n: str) -> bytes:
        with open(os.path.join(self.dir, "backups", n), "rb") as fh:
            return fh.read()


def list_ids() -> list[str]:
    try:
        return sorted(d for d in os.listdir(state_dir())
                      if os.path.exists(os.path.join(state_dir(), d, "journal.json")))
    except FileNotFoundError:
        return []
