"""What every command writes, and the exit codes: the contract scripts rely on.

Output is built completely in memory before anything is written, and ``-o`` writes a
temporary file in the target directory and renames it over the target, so a reader never
sees a partial plan even if gangopt is killed mid-write.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2


def emit(text: str, output: str | None) -> None:
    """Write complete ``text`` to ``output`` atomically (temp file + rename), or to stdout."""
    if output is None or output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(output)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:  # name the file the user asked for, not our temporary one
        raise OSError(error.errno, error.strerror, str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def one_line(error: BaseException) -> str:
    """``TypeName: first line of the message`` -- enough to grep for, never a traceback."""
    text = str(error).strip().splitlines()
    if isinstance(error, OSError) and error.strerror:
        name = f" {error.filename}" if error.filename else ""
        return f"{error.strerror}{':' if name else ''}{name}"
    if isinstance(error, NotImplementedError):
        return f"not implemented yet{': ' + text[0] if text else ''}"
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
