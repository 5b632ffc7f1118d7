"""The temporary names this project writes, and clearing the ones that interrupted processes left.

A temporary file or folder is named ``.tmp-<tag>-<host>-<pid>-<random>`` (``tag``: a run key, or
empty for notebooks), so a later run can tell whose it is:

* written on this host by a process that no longer exists: litter, removed at once;
* written on this host by a live process, or on another host (a shared network disk) and younger
  than :data:`STALE_S`: possibly still being written, left alone;
* written on another host and older than :data:`STALE_S`: litter;
* a ``.tmp-*`` name without host and pid (written before this scheme): litter.

Nothing else is ever removed: only names that start with ``.tmp-`` (and, for notebooks, end in
``.ipynb``) in the folders this project writes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

#: Age (seconds) after which a temporary name from another host counts as abandoned. A run folder
#: lives for the seconds it takes to write a finished run; a notebook for one execution.
STALE_S = 6 * 3600

_NAME = re.compile(r"^\.tmp-(?P<tag>[0-9a-f]{16}|)-?(?P<host>[A-Za-z0-9_.]+)-(?P<pid>\d+)-(?P<rand>[A-Za-z0-9_]+?)"
                   r"(?P<ext>\.ipynb)?$")


def host_name() -> str:
    """This machine's name with only ``[A-Za-z0-9_.]`` (the separator '-' is replaced by '_')."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname() or "host")


def temp_prefix(tag: str = "") -> str:
    """The prefix for ``tempfile.mkdtemp`` / ``mkstemp``: ``.tmp-[<tag>-]<host>-<pid>-``."""
    return f".tmp-{tag + '-' if tag else ''}{host_name()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True                     # exists (another user's) or cannot tell: keep it
    return True


def is_abandoned(path: Path, now: float | None = None) -> bool:
    """Whether the temporary ``path`` (one of this project's ``.tmp-`` names) is litter."""
    m = _NAME.match(path.name)
    if m is None:
        return True                     # an older ``.tmp-*`` name without host and pid
    if m["host"] == host_name():
        return not _pid_alive(int(m["pid"]))
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return False                    # gone already
    return age > STALE_S


def _remove(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        return True
    except FileNotFoundError:
        return False                    # someone else removed it first


def clear_partial_runs(root: Path) -> int:
    """Remove abandoned ``.tmp-*`` run folders directly under the store ``root``; return how many."""
    root = Path(root)
    if not root.is_dir():
        return 0
    return sum(_remove(p) for p in root.glob(".tmp-*") if p.is_dir() and is_abandoned(p))


def clear_partial_notebooks(folder: Path) -> int:
    """Remove abandoned ``.tmp-*.ipynb`` files anywhere under ``folder`` (the executed notebooks);
    return how many."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    return sum(_remove(p) for p in folder.rglob(".tmp-*.ipynb") if p.is_file() and is_abandoned(p))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: a temporary file in the same folder (mode 0644,
    flushed to disk), then a rename; the temporary file is removed if anything fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; these are ordinary shared files
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data) -> None:
    """``data`` as the project's JSON records keep it (indented by 1, keys sorted, a final newline), written with
    :func:`atomic_write_bytes` (the decisive tier's and the follow-ups' ``choices.json``)."""
    atomic_write_bytes(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
