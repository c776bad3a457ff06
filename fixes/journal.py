"""The fix journal: one directory per applied plan, written *before* anything changes.

``$XDG_STATE_HOME/ascend-doctor/journal/<seq>-<stamp>-<recipe>-<hex>/`` (a 0700 directory
owned by the user, verified before use) holds ``journal.json`` (the plan, the write
root, each target's backup entry, the state) and ``backups/<n>`` (the old bytes). Undo
needs nothing else, so a crash after the backups leaves a restorable journal.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import secrets
import stat as _stat
from typing import Any

from ascend_doctor import confine
from ascend_doctor.errors import DoctorError
from ascend_doctor.i18n import T


# <seq>-<UTC stamp>-<recipe>-<6 hex>: ordered by the sequence number, never a path
ID_RE = re.compile(r"^[0-9]{6,12}-[0-9]{8}T[0-9]{6}Z-[a-z0-9][a-z0-9._-]{0,63}-[0-9a-f]{6}$")


class JournalError(DoctorError):
    """The journal (its directory, an id, an entry) is not trustworthy: nothing is done."""


# inside an overlay (the demo's, a bundle's): fixes there are not fixes of this machine, so
# their journal lives and dies with the overlay, never in the user's own journal
OVERLAY_JOURNAL = (".ascend-doctor", "journal")


def state_dir(base: str | None = None) -> str:
    """``base`` when given (an overlay's journal), else the user's own journal directory."""
    if base:
        return base
    home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "state")
    return os.path.join(home, "ascend-doctor", "journal")


def overlay_dir(overlay: str) -> str:
    """The journal of fixes applied inside ``overlay`` (a directory the doctor writes)."""
    return os.path.join(os.path.abspath(overlay), *OVERLAY_JOURNAL)


def base_for(root: str | None) -> str | None:
    """The journal to use for a target: its overlay journal when ``root`` holds one."""
    if root and os.path.isdir(overlay_dir(root)) and not os.path.islink(overlay_dir(root)):
        return overlay_dir(root)
    return None


def secure_dir(create: bool = False, base: str | None = None) -> str:
    """The journal directory, verified: a real directory owned by us (root when root), 0700.

    Why: undo restores files as root from what this directory holds; a directory another
    account can write is an instruction list from that account.
    """
    d = state_dir(base)
    if create and not os.path.lexists(d):
        os.makedirs(d, mode=0o700, exist_ok=True)
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return d
    if not _stat.S_ISDIR(st.st_mode):
        raise JournalError(T("fix journal {dir} is not a directory (a symlink?); refusing it", dir=d))
    if st.st_uid != os.geteuid():
        raise JournalError(T("fix journal {dir} is owned by uid {uid}, not {euid}; refusing it",
                             dir=d, uid=st.st_uid, euid=os.geteuid()))
    if st.st_mode & 0o077:
        raise JournalError(T("fix journal {dir} has mode {mode} (must be 0700); refusing it",
                             dir=d, mode=f"{st.st_mode & 0o7777:04o}"))
    # an ancestor another account can write lets it swap the whole directory
    a = os.path.dirname(d)
    while True:
        ast = os.stat(a)
        if ast.st_uid not in (0, os.geteuid()) or (ast.st_mode & 0o022 and
                                                  not ast.st_mode & _stat.S_ISVTX):
            raise JournalError(T("fix journal {dir}: {parent} is writable by another account "
                                 "(owner uid {uid}, mode {mode}); refusing it", dir=d, parent=a,
                                 uid=ast.st_uid, mode=f"{ast.st_mode & 0o7777:04o}"))
        if a == os.path.dirname(a):
            return d
        a = os.path.dirname(a)


def validate_id(jid: str) -> str:
    if not isinstance(jid, str) or ".." in jid or "/" in jid or not ID_RE.match(jid):
        raise JournalError(T("{id} is not a fix journal id", id=repr(jid)))
    return jid


def _seq(jid: str) -> int:
    return int(jid.split("-", 1)[0])


def new_id(recipe: str, base: str | None = None) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    seq = max((_seq(j) for j in list_ids(base)), default=0) + 1
    safe = re.sub(r"[^a-z0-9._-]", "-", recipe.lower()).replace("..", "-")[:64] or "fix"
    return f"{seq:06d}-{stamp}-{safe}-{secrets.token_hex(3)}"


class Journal:
    def __init__(self, jid: str, data: dict[str, Any], base: str | None = None) -> None:
        self.id = validate_id(jid)
        self.base = base
        self.home = state_dir(base)
        self.dir = os.path.join(self.home, jid)
        self.data = data

    @classmethod
    def create(cls, recipe: str, doc: dict[str, Any], base: str | None = None) -> "Journal":
        if base:
            os.makedirs(os.path.dirname(base), mode=0o700, exist_ok=True)
        secure_dir(create=True, base=base)
        jid = new_id(recipe, base)
        j = cls(jid, {**doc, "seq": _seq(jid), "state": "started", "targets": []}, base)
        os.mkdir(j.dir, 0o700)
        os.mkdir(os.path.join(j.dir, "backups"), 0o700)
        j.save()
        return j

    @classmethod
    def load(cls, jid: str | None = None, root: str | None = None, base: str | None = None
             ) -> "Journal":
        """A journal by id, or the newest one not yet undone (of ``root`` when given).

        Without ``jid`` and ``root``, fixes of an overlay that no longer exists (a demo
        that was quit) are not candidates: there is nothing left to restore."""
        d = secure_dir(base=base)
        want = os.path.abspath(root) if root else None
        if jid:
            validate_id(jid)
            if not os.path.exists(os.path.join(d, jid, "journal.json")):
                raise DoctorError(T("no fix journal {id} under {dir}", id=repr(jid), dir=d))
            j = cls(jid, cls._read(jid, base), base)
            if want and j.data.get("write_root") != want:
                raise JournalError(T("fix {id} was applied to {applied}, not {want}", id=jid,
                                     applied=str(j.data.get("write_root")), want=want))
            return j
        docs = [(j, Journal._read(j, base)) for j in list_ids(base)]
        cands = [j for j, doc in docs if doc.get("state") != "undone"
                 and (doc.get("write_root") == want if want is not None else
                      not (doc.get("kind") == "overlay"
                           and not os.path.isdir(str(doc.get("write_root")))))]
        if not cands:
            if want:
                raise DoctorError(T("no fix to undo for {root} (journal {dir})", root=want,
                                    dir=d))
            raise DoctorError(T("no fix to undo (journal {dir})", dir=d))
        return cls(cands[-1], cls._read(cands[-1], base), base)

    @staticmethod
    def _read(jid: str, base: str | None = None) -> dict[str, Any]:
        path = os.path.join(state_dir(base), validate_id(jid), "journal.json")
        try:
            data = confine.read_file(state_dir(base), f"{jid}/journal.json")
            doc = json.loads(data or b"")
        except (OSError, ValueError, RecursionError, DoctorError) as exc:
            raise JournalError(T("fix journal {path} is unreadable: {reason}", path=path, reason=str(exc))) from None
        if not isinstance(doc, dict):
            raise JournalError(T("fix journal {path} is not a journal object", path=path))
        return doc

    def save(self) -> None:
        confine.write_file(self.home, f"{self.id}/journal.json",
                           json.dumps(self.data, indent=1, sort_keys=True).encode(), 0o600)

    def set_state(self, state: str, **extra: Any) -> None:
        self.data["state"] = state
        self.data.update(extra)
        self.save()

    def backup(self, host_path: str, resolved: str, root: str, created_dirs: list[str]) -> None:
        """Copy the target's bytes, mode and owner into the journal (fsync'd) before it
        changes; read through the same confinement the write will use."""
        n = len(self.data["targets"])
        self._writable(host_path, resolved)
        entry: dict[str, Any] = {"path": host_path, "resolved": resolved,
                                 "real": os.path.join(root, resolved.lstrip("/")),
                                 "existed": False, "created_dirs": created_dirs}
        st = confine.lstat(root, resolved)
        if st is not None:
            data = confine.read_file(root, resolved) or b""
            confine.write_file(self.home, f"{self.id}/backups/{n}", data, 0o600)
            entry.update(existed=True, backup=str(n), mode=st.st_mode & 0o777, uid=st.st_uid,
                         gid=st.st_gid, size=len(data),
                         sha256=hashlib.sha256(data).hexdigest())
        self.data["targets"].append(entry)
        self.save()

    def _writable(self, host_path: str, resolved: str) -> None:
        """Refuse, before any byte changes, a target whose write would land (through a link
        of the target tree, maybe swapped in since the plan) on a path its recipe does not
        write: undo may only restore declared paths, so such a write could never be undone.
        What is recorded, and later undone, is the path really written (``resolved``)."""
        from . import FixRegistry

        spec = FixRegistry.discover().recipes.get(self.data.get("recipe"))  # type: ignore[arg-type]
        if spec is not None and resolved != host_path and not spec.may_write(resolved):
            raise JournalError(T("{path} now resolves to {real} (through a link), which {recipe} "
                                 "does not write; nothing was changed there", path=host_path,
                                 real=resolved, recipe=spec.id))

    def backup_bytes(self, n: Any) -> bytes:
        if not isinstance(n, str) or not n.isdigit():
            raise JournalError(T("fix journal {id}: backup {n} is not a backup number", id=self.id,
                                    n=repr(n)))
        data = confine.read_file(self.home, f"{self.id}/backups/{n}")
        if data is None:
            raise JournalError(T("fix journal {id}: backup {n} is missing", id=self.id, n=n))
        return data


def list_ids(base: str | None = None) -> list[str]:
    """Valid journal ids, oldest first (by sequence number)."""
    d = secure_dir(base=base)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    ok = [n for n in names if ID_RE.match(n) and ".." not in n
          and os.path.exists(os.path.join(d, n, "journal.json"))]
    return sorted(ok, key=lambda n: (_seq(n), n))
