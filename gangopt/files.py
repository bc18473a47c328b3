"""Writing output files atomically, with the permissions any other file would get.

``tempfile.mkstemp`` creates its file 0600 whatever the umask (it is meant for secrets), and
renaming it over the target kept that mode: a plan written with ``-o`` could not be read by
the scheduler's other user or group although ``> plan.json`` could (issue 14). The temporary
file is therefore given ``0666 & ~umask`` before the rename, as ``open()`` would have done.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (reading it means setting it: done under a lock, restored at once)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_atomic(text: str, output: str | Path) -> None:
    """Write ``text`` to ``output`` through a temporary file in the same directory and a rename,
    so a reader never sees a partial file even if the process is killed mid-write."""
    target = Path(output)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:  # name the file the user asked for, not our temporary one
        raise OSError(error.errno, error.strerror, str(target)) from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
