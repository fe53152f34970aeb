"""Length-prefixed JSON messages over a pipe (both ends of the sandbox use it).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Frames above `MAX_FRAME`
are refused, so a worker cannot make the controller buffer without bound.
"""

from __future__ import annotations

import json
import struct
from typing import IO, Any

MAX_FRAME = 16 * 1024 * 1024
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The other end closed the pipe or sent something that is not a frame."""


def encode(message: Any) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME:
        raise FrameError(f"message of {len(body)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(body)) + body


def length_of(header: bytes) -> int:
    if len(header) != _HEADER.size:
        raise FrameError("pipe closed")
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise FrameError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    return int(size)


def decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"not a JSON frame: {type(e).__name__}") from None


def read(stream: IO[bytes]) -> Any:
    """Blocking read of one frame (the worker's side)."""
    size = length_of(stream.read(_HEADER.size))
    body = stream.read(size)
    if len(body) != size:
        raise FrameError("pipe closed mid-frame")
    return decode(body)


def write(stream: IO[bytes], message: Any) -> None:
    stream.write(encode(message))
    stream.flush()


HEADER_SIZE = _HEADER.size
