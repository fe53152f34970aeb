"""Unpack a kustomize archive (tar: gzip, bzip2, xz or uncompressed) in a child process (ADR 0098).

`python -I -m fleetwave.delivery.unpack DEST` reads the archive on stdin and writes its regular files
and directories under DEST (which it creates). The controller starts it through `bounded.run`, so it
has rlimits, a deadline and no network, and the controller's event loop only waits for it. Every
allocation is bounded before it is made, since `tarfile` trusts the sizes an archive declares (a GNU
long-name header declaring 3 GiB is read whole) and parses pax records with a regular expression
that is quadratic in a run of digits (CVE-2024-6232):

- decompression reads at most `_CHUNK` bytes at a time and stops once the tar stream passes
  `MAX_TAR_BYTES`;
- each 512-byte header is checked as soon as it is decompressed, before `tarfile` sees it: extended
  headers (GNU long name and long link, pax) of at most `MAX_EXTENDED_HEADER_BYTES`, pax records well
  formed and never changing the layout (`size`, GNU sparse), names of at most `MAX_NAME_BYTES`, at
  most `MAX_ENTRIES` entries and `MAX_UNPACKED_BYTES` of content, regular files and directories only;
- `tarfile` then reads only the stream checked, and each member is checked again as it is written:
  its name stays inside DEST, nothing but files and directories is created (so no link can be
  followed).

A refusal is one line on stderr, a predicate of the archive's name ("is damaged (...)"), naming what
is wrong without quoting the archive, and exit code 2. Only the standard library is imported.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import posixpath
import re
import shutil
import sys
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

MAX_ENTRIES = 2000
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
MAX_NAME_BYTES = 1024
MAX_EXTENDED_HEADER_BYTES = 4096  # what a long name or a pax record set needs, with room to spare
# The stream is the files' content plus, per entry, its headers and padding: at most about 6 KiB
# with the extended headers allowed.
MAX_TAR_BYTES = MAX_UNPACKED_BYTES + MAX_ENTRIES * 8 * 1024
MAX_HEADERS = 4 * MAX_ENTRIES  # extended headers included: each entry has at most three
# Extended headers in a row before one entry (a global pax header, then a pax header, a GNU long
# name and long link at most): tarfile reads a chain of them by recursion, about three frames each,
# and a few hundred end in RecursionError.
MAX_CHAINED_HEADERS = 4
# The longest run of ASCII digits a pax header may hold (an mtime with nanoseconds has 20): tarfile's
# record and hdrcharset regular expressions are quadratic in such a run (CVE-2024-6232), and 2,000
# headers of 4 KiB of digits, each well formed, cost its parser 10 s of CPU.
MAX_PAX_DIGITS = 64
REFUSED = 2  # the exit code of a refusal

_BLOCK = 512
_CHUNK = 1024 * 1024
_REGULAR = (b"0", b"\0", b"7")  # tarfile's regular types without GNU sparse ('S')
_EXTENDED = {b"L": "GNU long-name", b"K": "GNU long-link", b"x": "pax", b"X": "pax", b"g": "pax global"}
_OTHER_KINDS = {
    b"1": "a hard link",
    b"2": "a symbolic link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a FIFO",
    b"S": "a sparse file",
}
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (MAX_PAX_DIGITS + 1))  # a bounded repeat: linear to search
_NOT_TAR = "is not a tar archive (gzip, bzip2, xz or uncompressed)"


class Refused(Exception):
    """The archive is refused; the message is a predicate of its name and never quotes it."""


def unpack(archive: bytes, root: Path) -> None:
    """Check `archive` whole, then write its files and directories under `root` (created here)."""
    if len(archive) > MAX_TAR_BYTES:
        raise Refused(f"is larger than {MAX_TAR_BYTES} bytes")
    stream = checked_stream(archive)
    root.mkdir(mode=0o700)
    try:
        with tarfile.open(fileobj=io.BytesIO(stream), mode="r:") as tar:
            _extract(tar, root)
    except tarfile.TarError:  # the scan agrees with tarfile on the layout, so this is a bug, not an attack
        raise Refused("is damaged (tarfile could not read what was checked)") from None


def checked_stream(archive: bytes) -> bytes:
    """The decompressed tar stream, each header checked as it arrives (see the module's docstring)."""
    data = bytearray()
    scan = _Scan()
    try:
        for piece in _inflate(archive):
            data += piece
            scan.advance(data, final=False)
            if scan.ended:  # tarfile stops at the first zero block too: the rest is never read
                break
        else:
            scan.advance(data, final=True)
    except (OSError, EOFError, lzma.LZMAError, zlib.error):
        raise Refused("is damaged (its compressed stream is broken or truncated)") from None
    return bytes(data)


def _inflate(archive: bytes) -> Iterator[bytes]:
    produced = 0
    with _opened(archive) as stream:
        # read(n) decompresses at most n bytes: the decompressor never sees a size from the archive.
        while piece := stream.read(_CHUNK):
            produced += len(piece)
            if produced > MAX_TAR_BYTES:
                raise Refused(f"unpacks to a tar stream of more than {MAX_TAR_BYTES} bytes")
            yield piece


def _opened(archive: bytes) -> io.BufferedIOBase:
    raw = io.BytesIO(archive)
    if archive.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if archive.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if archive.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


class _Scan:
    """Walks the headers of a tar stream as it grows, the way tarfile will, refusing before it reads."""

    def __init__(self) -> None:
        self.offset = 0  # where the next header starts
        self.headers = 0
        self.entries = 0
        self.total = 0
        self.extended = False  # the last header extends the next one
        self.chained = 0  # extended headers since the last entry
        self.ended = False

    def advance(self, data: bytearray, *, final: bool) -> None:
        """Check every header `data` now holds; with `final`, `data` is the whole stream."""
        while not self.ended:
            if self.offset + _BLOCK > len(data):
                if final:
                    self._end(data)
                return
            info = _header(bytes(data[self.offset : self.offset + _BLOCK]), first=self.offset == 0)
            if info is None:  # tarfile's end of archive
                self._end(data)
                return
            if info.type in _EXTENDED:
                if not self._extension(data, info.type, info.size, final=final):
                    return
            else:
                self._entry(info)

    def _end(self, data: bytearray) -> None:
        if self.extended:
            raise Refused("is damaged (it ends after an extended header)")
        if self.offset > len(data):
            raise Refused("is damaged (it ends inside an entry)")
        if self.offset == 0 and len(data) < _BLOCK:
            raise Refused(_NOT_TAR)
        self.ended = True

    def _count_header(self) -> None:
        self.headers += 1
        if self.headers > MAX_HEADERS:
            raise Refused(f"holds more than {MAX_HEADERS} headers")

    def _extension(self, data: bytearray, kind: bytes, size: int, *, final: bool) -> bool:
        """Check an extended header once its payload is here; False while it is not."""
        if size > MAX_EXTENDED_HEADER_BYTES:
            label = _EXTENDED[kind]
            raise Refused(f"has a {label} header of {size} bytes (at most {MAX_EXTENDED_HEADER_BYTES})")
        start = self.offset + _BLOCK
        end = start + _padded(size)
        if end > len(data):
            if final:
                raise Refused("is damaged (it ends inside an extended header)")
            return False
        self._count_header()
        self.chained += 1
        if self.chained > MAX_CHAINED_HEADERS:
            raise Refused(f"entry {self.entries + 1} has more than {MAX_CHAINED_HEADERS} extended headers")
        payload = bytes(data[start:end])  # what tarfile reads: the records and their padding
        if kind in (b"L", b"K"):
            _check_name(len(payload.split(b"\0", 1)[0]), self.entries + 1)
        else:
            _check_pax(payload, size, self.entries + 1)
        self.offset, self.extended = end, True
        return True

    def _entry(self, info: tarfile.TarInfo) -> None:
        self._count_header()
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise Refused(f"holds more than {MAX_ENTRIES} entries")
        self.extended, self.chained = False, 0
        # A directory has no data blocks whatever its size says: tarfile skips none.
        if info.isdir():
            self.offset += _BLOCK
            return
        if info.type not in _REGULAR:
            what = _OTHER_KINDS.get(info.type, "of a type fleetwave does not unpack")
            raise Refused(f"entry {self.entries} is not a regular file or directory ({what})")
        self.total += info.size
        if self.total > MAX_UNPACKED_BYTES:
            raise Refused(f"unpacks to more than {MAX_UNPACKED_BYTES} bytes")
        self.offset += _BLOCK + _padded(info.size)


def _header(block: bytes, *, first: bool) -> tarfile.TarInfo | None:
    """One header block as tarfile reads it (its own parser: the scan must agree with it on every
    size and type), or None for the block of zeros that ends the archive."""
    if block.count(0) == _BLOCK:  # frombuf's own test for the end
        return None
    try:
        info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except tarfile.HeaderError:  # a wrong checksum or a number that is not one
        raise Refused(_NOT_TAR if first else "is damaged (a header is invalid)") from None
    if info.size < 0:
        raise Refused("is damaged (a header declares a negative size)")
    return info


def _check_pax(payload: bytes, size: int, entry: int) -> None:
    """Records "<length> <keyword>=<value>\\n" that tile the header exactly, NUL padding after.

    tarfile matches each record with a regular expression and searches the whole block for
    hdrcharset with another, both slow over long runs of digits: only well-formed records, in a
    small block, reach them."""
    if payload[size:].count(0) != len(payload) - size:
        raise Refused("is damaged (a pax header is malformed)")
    pos = 0
    while pos < size:
        space = payload.find(b" ", pos, pos + 8)
        digits = payload[pos:space] if space > pos else b""
        end = pos + int(digits) if digits.isdigit() else 0
        if end <= space or end > size or payload[end - 1] != ord("\n"):
            raise Refused("is damaged (a pax header is malformed)")
        keyword, equals, value = payload[space + 1 : end - 1].partition(b"=")
        if not keyword or not equals:
            raise Refused("is damaged (a pax header is malformed)")
        if keyword == b"size" or keyword.startswith(b"GNU.sparse"):
            # Both move where tarfile looks for the next header: refused, so the scan and tarfile
            # can never disagree on the layout (no file here needs either).
            raise Refused("has a pax header that sets a size or sparse map, which fleetwave does not accept")
        if keyword in (b"path", b"linkpath"):
            _check_name(len(value), entry)
        pos = end
    if _LONG_DIGITS.search(payload):  # well formed, yet slow for tarfile's regular expressions
        raise Refused(f"has a pax header with a run of more than {MAX_PAX_DIGITS} digits")


def _check_name(length: int, entry: int) -> None:
    if length > MAX_NAME_BYTES:
        raise Refused(f"entry {entry} has a name longer than {MAX_NAME_BYTES} bytes")


def _padded(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


def _extract(tar: tarfile.TarFile, root: Path) -> None:
    total = 0
    for number, member in enumerate(tar, start=1):
        if number > MAX_ENTRIES:
            raise Refused(f"holds more than {MAX_ENTRIES} entries")
        name = _inside(member.name, number)
        if name == ".":
            continue
        target = root / name
        if member.isdir():
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            continue
        if not member.isfile() or member.sparse is not None:
            raise Refused(f"entry {number} is not a regular file or directory")
        total += member.size
        if total > MAX_UNPACKED_BYTES:
            raise Refused(f"unpacks to more than {MAX_UNPACKED_BYTES} bytes")
        _write(tar, member, target, number)


def _inside(name: str, number: int) -> str:
    _check_name(len(name.encode(errors="surrogateescape")), number)
    norm = posixpath.normpath(name.strip() or ".")
    if "\0" in norm or posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        raise Refused(f"entry {number} must stay inside the archive")
    return norm


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, number: int) -> None:
    source = tar.extractfile(member)
    if source is None:
        raise Refused(f"entry {number} cannot be read")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # O_NOFOLLOW although nothing here makes links: the tree is ours alone until kustomize runs.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out, source:
            shutil.copyfileobj(source, out, _CHUNK)
    except OSError as e:  # a file where the archive wants a directory, say
        raise Refused(f"entry {number} cannot be written: {e.strerror or 'input/output error'}") from None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -I -m fleetwave.delivery.unpack DEST < archive\n")
        return REFUSED
    try:
        unpack(sys.stdin.buffer.read(MAX_TAR_BYTES + 1), Path(argv[1]))
    except Refused as e:
        message = str(e)
    except MemoryError:
        message = "needs more memory than the unpacker's budget"
    except OSError as e:
        message = f"cannot be unpacked: {e.strerror or 'input/output error'}"
    else:
        return 0
    sys.stderr.write(message + "\n")
    return REFUSED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
