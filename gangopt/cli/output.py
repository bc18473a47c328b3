"""What every command writes, and the exit codes: the contract scripts rely on.

Output is built completely in memory before anything is written, and ``-o`` writes a
temporary file in the target directory and renames it over the target, so a reader never
sees a partial plan even if gangopt is killed mid-write.
"""

from __future__ import annotations

import sys

from gangopt.files import write_atomic

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2


def emit(text: str, output: str | None) -> None:
    """Write complete ``text`` to ``output`` atomically (temp file + rename), or to stdout."""
    if output is None or output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(text, output)


def one_line(error: BaseException) -> str:
    """``TypeName: first line of the message`` -- enough to grep for, never a traceback."""
    text = str(error).strip().splitlines()
    if isinstance(error, OSError) and error.strerror:
        name = f" {error.filename}" if error.filename else ""
        return f"{error.strerror}{':' if name else ''}{name}"
    if isinstance(error, NotImplementedError):
        return f"not implemented yet{': ' + text[0] if text else ''}"
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
