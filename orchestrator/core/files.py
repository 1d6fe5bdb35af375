"""Reading a file a user names (a workflow, ``--input-file``, ``--reference``, ``edit --output``)
without trusting what it is.

A FIFO blocks a plain ``open`` until a writer comes, and ``/dev/zero`` never ends: reading either
hangs, or grows the process until it is killed, deaf to Ctrl-C. So the file is opened without
blocking, refused unless it is a regular file, and read only up to a size cap.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_WORKFLOW_BYTES = 16 * 1024 * 1024
"""A workflow file larger than this is refused (the largest example is some 20 KB)."""

MAX_JSON_BYTES = 256 * 1024 * 1024
"""A JSON file of inputs, a reference answer or an edited output larger than this is refused."""


class UnreadableFileError(Exception):
    """The file is not a regular file, or it is larger than the cap; the message says which."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"


def read_capped(path: str | Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    Raises :class:`UnreadableFileError` for anything else, and ``OSError`` when the file cannot be
    opened (its ``strerror`` says why: no such file, permission denied).
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(descriptor)
        for test, kind in _KINDS:
            if test(mode.st_mode):
                raise UnreadableFileError(f"not a regular file: it is {kind}")
        if mode.st_size > limit:
            raise UnreadableFileError(f"larger than {_megabytes(limit)} ({_megabytes(mode.st_size)}); "
                                      "refusing to read it")
        chunks: list[bytes] = []
        total = 0
        while True:  # a file that grows while read stops at the cap too
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnreadableFileError(f"larger than {_megabytes(limit)}; refusing to read it")
    finally:
        os.close(descriptor)
