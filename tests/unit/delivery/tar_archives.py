"""Tar archives for the unpacker's tests, made the way a hostile writer would make them."""

from __future__ import annotations

import bz2
import io
import tarfile


def member(
    name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, size: int | None = None
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if size is None else size
    return info


def tar(*entries: tuple[tarfile.TarInfo, bytes], fmt: int = tarfile.GNU_FORMAT, **options: object) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt, **options) as out:  # type: ignore[call-overload]
        for info, data in entries:
            out.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def file(name: str, text: str) -> tuple[tarfile.TarInfo, bytes]:
    return member(name, text.encode()), text.encode()


def raw_header(name: str, kind: bytes, size: int) -> bytes:
    """A header block as a hostile writer makes it: any type, any declared size, checksum right."""
    return member(name, kind=kind, size=size).tobuf(format=tarfile.GNU_FORMAT)


def pax_record(keyword: str, value: str) -> bytes:
    body = f" {keyword}={value}\n".encode()
    length = len(body) + len(str(len(body)))
    length = len(body) + len(str(length))
    return str(length).encode() + body


def pax_header(payload: bytes, kind: bytes = tarfile.XHDTYPE) -> bytes:
    """A pax header holding exactly `payload` (padded with NULs to its blocks)."""
    padding = b"\0" * (-len(payload) % 512)
    return raw_header("././@PaxHeader", kind, len(payload)) + payload + padding


def long_name_bomb(declared: int = 3 << 30) -> bytes:
    """A small bzip2 file of a tar whose GNU long-name header declares `declared` bytes of zeros.

    bzip2 squeezes 16 MiB of zeros into a 45-byte stream, and a reader joins concatenated streams:
    about 200 of them make the 3 GiB the header promises, in about 9 KiB."""
    zeros = bz2.compress(b"\0" * (16 << 20))
    return bz2.compress(raw_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, declared)) + zeros * (
        declared // (16 << 20) + 1
    )
