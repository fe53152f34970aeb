"""Reading the files a user names on the command line, as untrusted input.

`-` is standard input. Otherwise only regular files are read (`/dev/zero`, a FIFO or a directory
would hang or mislead). At most MAX_BYTES are read, and text must be UTF-8 without NUL bytes.
Every refusal is an `InputError` whose message names the option and the file and says what is
wrong, never the content.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

MAX_BYTES = 8 * 1024 * 1024


class InputError(Exception):
    """Bad user input; the message already names the file, option or field."""


STDIN = "-"


def read_bytes(path: Path, option: str, *, limit: int = MAX_BYTES) -> bytes:
    """The file's bytes; `-` reads standard input (`kubectl apply -f -` habits), with the same cap."""
    where = f"{option} {path}"
    if str(path) == STDIN:
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"{option} -: standard input is larger than {limit // (1024 * 1024)} MiB")
        return data
    try:
        # Non-blocking open: a FIFO must not wait for a writer before it is refused.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(f"{where}: not a regular file")
            data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"{where}: {e.strerror or e}") from None
    if len(data) > limit:
        raise InputError(f"{where}: larger than {limit // (1024 * 1024)} MiB")
    return data


def read_text(path: Path, option: str, *, limit: int = MAX_BYTES) -> str:
    data = read_bytes(path, option, limit=limit)
    where = f"{option} {path}"
    if b"\x00" in data:
        raise InputError(f"{where}: a binary file (NUL bytes), not YAML or JSON text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not UTF-8 text (invalid byte at offset {e.start})") from None


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
MAX_FILES = 1000


def manifest_files(path: Path, option: str, *, recursive: bool) -> list[Path]:
    """`path` itself, or, for a directory, its .yaml, .yml and .json files in name order (with
    `recursive`, those of its subdirectories too), as `kubectl apply -f DIR [-R]` reads them.
    Symbolic links to directories are not followed (a loop would never end)."""
    if str(path) == STDIN or not path.is_dir():
        return [path]
    pattern = "**/*" if recursive else "*"
    found = sorted(
        p
        for p in path.glob(pattern)
        if p.suffix in MANIFEST_SUFFIXES and p.is_file() and not _under_link(p, path)
    )
    if len(found) > MAX_FILES:
        raise InputError(f"{option} {path}: more than {MAX_FILES} manifest files")
    return found


def _under_link(found: Path, root: Path) -> bool:
    return any(parent.is_symlink() for parent in found.relative_to(root).parents if str(parent) != ".")


def write_private(path: Path, data: bytes) -> None:
    """Write a credential to `path`, readable by its owner alone (created 0600, never wider)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
