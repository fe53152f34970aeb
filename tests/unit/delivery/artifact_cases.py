"""Hostile Flux artifacts by category, for the artifact fuzzer (`artifact_fuzz`).

Shared by tests/unit/delivery/test_delivery_artifact_fuzz.py (a small seeded subset) and
bench/bench_artifact_fuzz.py (the long run), which imports this folder by path.

Every shape is a function of a seeded `random.Random` and the `Aim`s of one case: the places outside
the unpack root that a hostile archive tries to reach. They are the case's own sentinel tree, a
canary directory and names carrying `MARKER` in /tmp, never anything else of the machine, so an
escape, if there were one, lands where the harness looks and harms nothing.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import itertools
import lzma
import random
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from tar_archives import file, long_name_bomb, member, pax_header, pax_record, raw_header, tar

MARKER = "fwzmark"  # in every name a shape aims outside the root, so a stray one can be found
Entry = tuple[tarfile.TarInfo, bytes]


@dataclass(frozen=True, slots=True)
class Aim:
    """Where one case's archive aims: outside its unpack root, all of it watched by the harness."""

    canary: str  # an absolute directory no case may touch
    sentinel: str  # an absolute directory beside the unpack directory's parent
    to_parent: str  # the parent of the unpack directory, relative to the unpack root ("../..")
    to_canary: str  # the canary, relative to the unpack root

    def outside(self, rnd: random.Random) -> str:
        """A path outside the root (absolute or relative) naming a file."""
        return rnd.choice(
            [
                f"{self.canary}/{MARKER}-{rnd.randrange(100)}.yaml",
                f"{self.sentinel}/victim.yaml",
                f"/tmp/{MARKER}-abs-{rnd.randrange(100)}.yaml",
                f"../{MARKER}-sibling.yaml",
                f"{self.to_parent}/sentinel/victim.yaml",
                f"{self.to_canary}/{MARKER}-rel.yaml",
                "../" * rnd.randint(1, 8) + f"{MARKER}-up.yaml",
                f"apps/../../{MARKER}-dotdot.yaml",
            ]
        )

    def absolute(self, rnd: random.Random) -> str:
        """An absolute path outside the root naming a file."""
        return rnd.choice(
            [
                f"{self.canary}/{MARKER}-{rnd.randrange(100)}.yaml",
                f"{self.sentinel}/victim.yaml",
                f"/tmp/{MARKER}-abs-{rnd.randrange(100)}.yaml",
            ]
        )

    def outside_dir(self, rnd: random.Random) -> str:
        """A directory outside the root (absolute or relative)."""
        return rnd.choice(
            [self.canary, f"{self.sentinel}/sub", "..", self.to_parent, f"{self.to_parent}/sentinel"]
        )


Shape = Callable[[random.Random, Aim], bytes]


@dataclass(frozen=True, slots=True)
class ShapeSpec:
    name: str
    make: Shape
    heavy: bool = False  # seconds of work (a bomb at a bound): left out of the unit test
    at_most: int = 0  # times in one run (0: as often as its turn comes)


# ---- building blocks ----


def ok_file(rnd: random.Random, directory: str = "apps") -> Entry:
    n = rnd.randrange(1000)
    return file(f"{directory}/cm-{n}.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{n}}}\n")


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> Entry:
    info = member(name, kind=kind)
    info.linkname = target
    return info, b""


def directory(name: str) -> Entry:
    return member(name, kind=tarfile.DIRTYPE), b""


def compress(rnd: random.Random, stream: bytes) -> bytes:
    """Mostly gzip, as source-controller serves; sometimes another format the unpacker reads."""
    pick = rnd.random()
    if pick < 0.7:
        return gzip.compress(stream, mtime=0)
    if pick < 0.8:
        return stream
    return bz2.compress(stream) if pick < 0.9 else lzma.compress(stream)


def archive(rnd: random.Random, *entries: Entry, fmt: int | None = None, lead: bool = True) -> bytes:
    """`entries` (after an ordinary file unless `lead` is False) in a random tar format, compressed."""
    chosen = fmt if fmt is not None else rnd.choice([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
    head = [ok_file(rnd)] if lead else []
    return compress(rnd, tar(*head, *entries, fmt=chosen))


def fix_checksum(block: bytearray) -> None:
    """Write the header checksum of `block` (its first 512 bytes) as tar does: a hostile header
    passes the checksum, so only its fields are wrong."""
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block[:512])


def ustar(name: str, data: bytes, prefix: str) -> bytes:
    """A ustar header whose prefix field is `prefix` (tarfile joins prefix/name), then `data`."""
    header = bytearray(member(name, data).tobuf(format=tarfile.USTAR_FORMAT))
    header[345:500] = prefix.encode()[:155].ljust(155, b"\0")
    fix_checksum(header)
    return bytes(header) + data + b"\0" * (-len(data) % 512)


def blocks(*entries: Entry, fmt: Literal[0, 1, 2] = tarfile.GNU_FORMAT) -> bytes:
    """`entries` as tar writes them (headers, data, padding) without the end-of-archive blocks."""
    out = b""
    for info, data in entries:
        out += info.tobuf(format=fmt, encoding="utf-8", errors="surrogateescape")
        out += data + b"\0" * (-len(data) % 512)
    return out


def end() -> bytes:
    return b"\0" * 1024


_PIECE = 16 << 20


@functools.cache
def zeros_squeezed(size: int, kind: str = "gzip") -> bytes:
    """`size` zero bytes as gzip members, bzip2 streams or xz streams of at most 16 MiB each, which
    each format's reader joins (to what comes before, too): a bomb is made in a fraction of a second."""
    whole, rest = divmod(size, _PIECE)
    return _squeezed(_PIECE, kind) * whole + (_squeezed(rest, kind) if rest else b"")


@functools.cache
def _squeezed(size: int, kind: str) -> bytes:
    zeros = b"\0" * size
    if kind == "gzip":
        return gzip.compress(zeros, compresslevel=9, mtime=0)
    return bz2.compress(zeros) if kind == "bzip2" else lzma.compress(zeros)


def zeros_entry(size: int, name: str) -> bytes:
    """A gzip of one tar entry holding `size` zero bytes, without the end blocks (gzip members join)."""
    header = gzip.compress(raw_header(name, tarfile.REGTYPE, size), mtime=0)
    return header + zeros_squeezed(size) + gzip.compress(b"\0" * (-size % 512), mtime=0)


# ---- links ----


def symlink_outside(rnd: random.Random, aim: Aim) -> bytes:
    return archive(rnd, link(f"apps/{MARKER}.yaml", aim.outside(rnd)))


def symlink_up(rnd: random.Random, aim: Aim) -> bytes:
    return archive(rnd, link("apps/up", rnd.choice(["..", "../..", "../../..", aim.to_parent])))


def symlink_dir_then_file(rnd: random.Random, aim: Aim) -> bytes:
    # The classic: a link to a directory outside, then a file written "inside" it.
    return archive(rnd, link("apps/d", aim.outside_dir(rnd)), file(f"apps/d/{MARKER}.yaml", "x: 1\n"))


def symlink_chain(rnd: random.Random, aim: Aim) -> bytes:
    return archive(
        rnd,
        link("apps/a.yaml", "b.yaml"),
        link("apps/b.yaml", "../c.yaml"),
        link("c.yaml", aim.outside(rnd)),
        file("apps/a.yaml", "x: written through the chain\n"),
    )


def symlink_long_target(rnd: random.Random, aim: Aim) -> bytes:
    # A target past 100 bytes: a pax linkpath record or a GNU long-link header carries it.
    target = "./" * 60 + aim.outside(rnd)
    return archive(rnd, link(f"apps/{MARKER}.yaml", target))


def symlink_then_overwrite(rnd: random.Random, aim: Aim) -> bytes:
    name = f"apps/{MARKER}.yaml"
    return archive(rnd, link(name, aim.outside(rnd)), file(name, "x: through the link\n"))


def hardlink_outside(rnd: random.Random, aim: Aim) -> bytes:
    return archive(rnd, link(f"apps/{MARKER}.yaml", aim.outside(rnd), tarfile.LNKTYPE))


def hardlink_then_overwrite(rnd: random.Random, aim: Aim) -> bytes:
    name = f"apps/{MARKER}.yaml"
    return archive(rnd, link(name, aim.outside(rnd), tarfile.LNKTYPE), file(name, "x: through the link\n"))


def hardlink_to_member_then_write(rnd: random.Random, aim: Aim) -> bytes:
    first = ok_file(rnd)
    return archive(
        rnd, first, link("apps/h.yaml", first[0].name, tarfile.LNKTYPE), file("apps/h.yaml", "x\n")
    )


def hardlink_chain(rnd: random.Random, aim: Aim) -> bytes:
    return archive(
        rnd,
        link("h1.yaml", aim.outside(rnd), tarfile.LNKTYPE),
        link("h2.yaml", "h1.yaml", tarfile.LNKTYPE),
        link("apps/h3.yaml", "h2.yaml", tarfile.LNKTYPE),
    )


# ---- names leaving the root ----


def absolute_name(rnd: random.Random, aim: Aim) -> bytes:
    name = rnd.choice(["", "/", "/.", "/..", "//"]) + aim.absolute(rnd)
    return archive(rnd, file(name, "x: 1\n"))


def absolute_directory(rnd: random.Random, aim: Aim) -> bytes:
    return archive(
        rnd, directory(f"{aim.canary}/{MARKER}-dir"), file(f"{aim.canary}/{MARKER}-dir/a.yaml", "x\n")
    )


def absolute_long_name(rnd: random.Random, aim: Aim) -> bytes:
    # Past 100 bytes: a GNU long-name header, or a pax path record.
    name = f"{aim.canary}/" + "./" * 60 + f"{MARKER}.yaml"
    return archive(rnd, file(name, "x: 1\n"))


def absolute_prefix(rnd: random.Random, aim: Aim) -> bytes:
    stream = ustar(f"{MARKER}.yaml", b"x: 1\n", rnd.choice([aim.canary, "/tmp", f"{aim.sentinel}"])) + end()
    return compress(rnd, stream)


def traversal_name(rnd: random.Random, aim: Aim) -> bytes:
    name = rnd.choice(
        [
            "../" * rnd.randint(1, 8) + f"{MARKER}.yaml",
            f"apps/{'../' * rnd.randint(2, 6)}{MARKER}.yaml",
            f"./../{MARKER}.yaml",
            f"apps/./.././../{MARKER}.yaml",
            aim.outside(rnd),
        ]
    )
    return archive(rnd, file(name, "x: 1\n"))


def traversal_pax_path(rnd: random.Random, aim: Aim) -> bytes:
    # The header's own name is harmless; the pax record that overrides it is not.
    kind = rnd.choice([tarfile.XHDTYPE, tarfile.XGLTYPE])
    stream = pax_header(pax_record("path", aim.outside(rnd)), kind) + tar(file("apps/ok.yaml", "x: 1\n"))
    return compress(rnd, stream)


def traversal_long_name(rnd: random.Random, aim: Aim) -> bytes:
    # A GNU long name that walks down, then up past the root.
    depth = rnd.randint(20, 40)
    name = "d/" * depth + "../" * (depth + rnd.randint(1, 4)) + f"{MARKER}.yaml"
    return archive(rnd, file(name, "x: 1\n"), fmt=tarfile.GNU_FORMAT)


def traversal_prefix(rnd: random.Random, aim: Aim) -> bytes:
    prefix = rnd.choice(["..", "../..", "apps/../..", aim.to_parent + "/sentinel"])
    return compress(rnd, ustar(f"{MARKER}.yaml", b"x: 1\n", prefix) + end())


def traversal_directory(rnd: random.Random, aim: Aim) -> bytes:
    return archive(rnd, directory(f"{aim.outside_dir(rnd)}/{MARKER}-dir"))


def traversal_after_nul(rnd: random.Random, aim: Aim) -> bytes:
    # A NUL in a pax path: a reader that stops at it and one that does not disagree on the name.
    record = pax_record("path", f"apps/ok.yaml\0/{aim.outside(rnd)}")
    return compress(rnd, pax_header(record) + tar(file("apps/ok.yaml", "x: 1\n")))


# ---- devices, FIFOs, sparse files ----


def special_file(rnd: random.Random, aim: Aim) -> bytes:
    kind = rnd.choice([tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
    info = member(rnd.choice([f"apps/{MARKER}", aim.outside(rnd)]), kind=kind)
    info.devmajor, info.devminor = rnd.choice([(1, 3), (8, 0), (0, 0)])  # /dev/null, sda
    return archive(rnd, (info, b""))


def odd_type(rnd: random.Random, aim: Aim) -> bytes:
    kind = rnd.choice([b"D", b"M", b"N", b"V", b"I", b"Z", b"A", b"9"])
    return compress(rnd, blocks(ok_file(rnd)) + raw_header(f"apps/{MARKER}", kind, 5) + b"x" * 512 + end())


def gnu_sparse(rnd: random.Random, aim: Aim) -> bytes:
    # An old GNU sparse header: the data on disk is a map of (offset, size) holes.
    header = bytearray(raw_header(f"apps/{MARKER}.yaml", tarfile.GNUTYPE_SPARSE, 512))
    header[386:398] = b"%011o\0" % (1 << 30)  # the first map entry's offset, far out
    header[398:410] = b"%011o\0" % 512
    header[483:495] = b"%011o\0" % ((1 << 30) + 512)  # realsize
    fix_checksum(header)
    return compress(rnd, bytes(header) + b"y" * 512 + end())


def pax_sparse(rnd: random.Random, aim: Aim) -> bytes:
    records = rnd.choice(
        [
            pax_record("GNU.sparse.size", str(1 << 34)) + pax_record("GNU.sparse.numblocks", "1"),
            pax_record("GNU.sparse.map", f"0,{1 << 33},{1 << 34},512"),
            pax_record("GNU.sparse.major", "1")
            + pax_record("GNU.sparse.minor", "0")
            + pax_record("GNU.sparse.realsize", str(1 << 40)),
        ]
    )
    return compress(rnd, pax_header(records) + tar(file(f"apps/{MARKER}.yaml", "1\n0\n512\nx")))


# ---- bombs: names, pax digits, entries, sizes, compression ----


@functools.cache
def bzip2_long_name_bomb() -> bytes:
    return long_name_bomb()  # 3 GiB declared in about 9 KiB


def gzip_long_name_bomb(rnd: random.Random, aim: Aim) -> bytes:
    kind = rnd.choice([tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK])
    declared = rnd.choice([1 << 30, 3 << 30, 1 << 40])
    return gzip.compress(raw_header("././@LongLink", kind, declared), mtime=0) + zeros_squeezed(64 << 20)


def name_over_bound(rnd: random.Random, aim: Aim) -> bytes:
    name = "apps/" + "/".join(["d" * 200] * rnd.randint(6, 20)) + ".yaml"  # 1,200-4,000 bytes
    return archive(rnd, file(name, "x: 1\n"))


def name_at_bound(rnd: random.Random, aim: Aim) -> bytes:
    # 1,024 bytes in components of at most 255 (NAME_MAX): accepted; one component of 1,000: refused.
    long = "apps/" + "/".join(["d" * 200] * 4) + "/" + "f" * (1024 - 5 - 804 - 5) + ".yaml"
    return archive(rnd, file(rnd.choice([long, "apps/" + "f" * 1000 + ".yaml"]), "x: 1\n"))


def chained_extensions(rnd: random.Random, aim: Aim) -> bytes:
    # Many extended headers in a row, all for the one entry after them.
    count = rnd.choice([50, 300, 400, 2000])
    if rnd.random() < 0.5:
        one = pax_header(pax_record("comment", "x"))
    else:
        one = raw_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 13) + b"apps/ok.yaml\0".ljust(512, b"\0")
    return compress(rnd, one * count + blocks(file("apps/ok.yaml", "x: 1\n")) + end())


def pax_digits_over_bound(rnd: random.Random, aim: Aim) -> bytes:
    digits = b"1" * rnd.choice([4097, 65536, 1 << 20])  # CVE-2024-6232: quadratic in a run of digits
    return compress(rnd, pax_header(digits) + tar(ok_file(rnd)))


def pax_digits_malformed(rnd: random.Random, aim: Aim) -> bytes:
    payload = rnd.choice([b"1" * 4000, b"0" * 4000 + b"12 path=x\n", b"9" * 7 + b" path=x\n", b"4 =\n"])
    return compress(rnd, pax_header(payload) + tar(ok_file(rnd)))


def pax_digits_within_bound(count: int) -> Shape:
    """`count` entries, each after a well-formed pax record of about 4 KiB of digits: every header is
    inside the unpacker's bounds, but tarfile's regular expressions pay for each."""

    def make(rnd: random.Random, aim: Aim) -> bytes:
        digits = "".join(rnd.choice("123456789") for _ in range(8)) * 508  # 4,064 digits
        header = pax_header(pax_record(rnd.choice(["comment", "mtime", "uname"]), digits))
        entries = b"".join(header + blocks(file(f"apps/f{i}.yaml", "x: 1\n")) for i in range(count))
        return compress(rnd, entries + end())

    return make


def too_many_entries(rnd: random.Random, aim: Aim) -> bytes:
    kind = rnd.choice(["files", "directories", "pax"])
    if kind == "files":
        return archive(rnd, *(file(f"apps/f{i}.yaml", "") for i in range(2001)), fmt=tarfile.GNU_FORMAT)
    if kind == "directories":
        return archive(rnd, *(directory(f"apps/d{i}") for i in range(2001)), fmt=tarfile.GNU_FORMAT)
    # 2,000 entries, but each with four pax headers: past the 8,000 headers.
    header = pax_header(pax_record("comment", "x"))
    return compress(rnd, b"".join(header * 4 + blocks(file(f"f{i}.yaml", "")) for i in range(2000)) + end())


def many_manifests(rnd: random.Random, aim: Aim) -> bytes:
    # Within the unpacker's 2,000 entries, past the 1,000 manifest files a path may hold (or at them).
    count = rnd.choice([1000, 1001, 1999])
    return archive(rnd, *(file(f"apps/f{i:04}.yaml", "k: v\n") for i in range(count)), fmt=tarfile.GNU_FORMAT)


def declared_size_bomb(rnd: random.Random, aim: Aim) -> bytes:
    header = bytearray(raw_header(f"apps/{MARKER}.yaml", tarfile.REGTYPE, 0))
    size = rnd.choice([(64 << 20) + 1, 1 << 70, -1, -(1 << 60)])
    if size == (64 << 20) + 1:
        header[124:136] = b"%011o\0" % size
    else:  # base-256: a leading 0x80 (positive) or 0xff (negative), then big-endian
        header[124:136] = (b"\x80" if size > 0 else b"\xff") + (size % (1 << 88)).to_bytes(11, "big")
    fix_checksum(header)
    return compress(rnd, blocks(ok_file(rnd)) + bytes(header) + end())


def content_over_total(rnd: random.Random, aim: Aim) -> bytes:
    """Two files of 40 MiB of zeros: each within the bound, the two past it; about 80 KiB gzipped."""
    parts = [gzip.compress(blocks(ok_file(rnd)), mtime=0)]
    parts += [zeros_entry(40 << 20, f"z{i}.bin") for i in range(2)]
    return b"".join([*parts, gzip.compress(end(), mtime=0)])


def content_at_total(rnd: random.Random, aim: Aim) -> bytes:
    """One file of 64 MiB (the unpacker's total, so it is written) beside a manifest."""
    name = rnd.choice(["zeros.bin", "apps/zeros.yaml"])
    head = gzip.compress(blocks(ok_file(rnd)), mtime=0)
    return head + zeros_entry((64 << 20) - 512, name) + gzip.compress(end(), mtime=0)


def manifests_over_path_bound(rnd: random.Random, aim: Aim) -> bytes:
    line = "key: " + "v" * 59 + "\n"  # 65 bytes
    if rnd.random() < 0.5:
        return archive(rnd, file("apps/big.yaml", line * (3 << 20 >> 6)))
    return archive(rnd, *(file(f"apps/part{i}.yaml", line * (1 << 14)) for i in range(3)))


def not_utf8(rnd: random.Random, aim: Aim) -> bytes:
    return archive(rnd, (member("apps/latin1.yaml", b"k: \xe9t\xe9\n"), b"k: \xe9t\xe9\n"))


def gzip_declared_huge(rnd: random.Random, aim: Aim) -> bytes:
    return zeros_entry(256 << 20, "zeros.bin")  # 256 KiB gzipped; the header alone is refused


def gzip_past_stream_cap(rnd: random.Random, aim: Aim) -> bytes:
    """Every entry, header and size inside its bound, the tar stream past MAX_TAR_BYTES (~80 MiB):
    60 MiB of zeros, then 1,998 entries of three 4 KiB pax headers each."""
    head = gzip.compress(blocks(ok_file(rnd)), mtime=0) + zeros_entry(60 << 20, "zeros.bin")
    pax = pax_header(pax_record("comment", "c" * 4080)) * 3
    entries = b"".join(pax + blocks(file(f"e{i}.yaml", "")) for i in range(1998))
    return head + gzip.compress(entries + end(), mtime=0)


def zeros_after_the_end(rnd: random.Random, aim: Aim) -> bytes:
    # tarfile stops at the first zero block; 256 MiB of zeros after it are never decompressed.
    return gzip.compress(tar(ok_file(rnd)), mtime=0) + zeros_squeezed(256 << 20)


def other_compression_bomb(rnd: random.Random, aim: Aim) -> bytes:
    """48 MiB of zeros in a file that is not a manifest, bzip2 or xz: unpacked, written, not read."""
    kind = rnd.choice(["bzip2", "xz"])
    squeeze = bz2.compress if kind == "bzip2" else lzma.compress
    head = squeeze(blocks(ok_file(rnd)) + raw_header("zeros.bin", tarfile.REGTYPE, 48 << 20))
    return head + zeros_squeezed(48 << 20, kind) + squeeze(end())


def truncated_or_trailing(rnd: random.Random, aim: Aim) -> bytes:
    good = gzip.compress(blocks(ok_file(rnd), ok_file(rnd)), mtime=0)  # no end blocks: read to EOF
    return rnd.choice(
        [good[: rnd.randrange(10, len(good))], good + bytes(rnd.randbytes(64)), good + b"\x1f\x8b"]
    )


# ---- the same name twice ----


def duplicate_names(rnd: random.Random, aim: Aim) -> bytes:
    name = f"apps/{MARKER}.yaml"
    pairs: list[tuple[Entry, ...]] = [
        (file(name, "first: 1\n"), directory(name)),  # a file, then a directory of its name
        (directory(name), file(name, "x: 1\n")),
        (directory("apps/d"), link("apps/d", aim.outside_dir(rnd))),  # a directory, then a link
        (directory("apps/d"), link("apps/d", "apps/d", tarfile.LNKTYPE)),
        (file(name, "first: 1\n"), file(name, "second: 2\n")),  # accepted: the last one wins
        (file("apps/a", "x\n"), file("apps/a/b.yaml", "x: 1\n")),  # a file where a directory goes
        (file(name, "a: 1\n"), file(f"./{name}", "b: 2\n"), file(name.replace("/", "//"), "c: 3\n")),
        (file(name, "a: 1\n"), link(name, aim.outside(rnd))),
    ]
    return archive(rnd, *rnd.choice(pairs))


# ---- random mutations of valid archives ----


@functools.cache
def corpus() -> tuple[tuple[bytes, tuple[int, ...]], ...]:
    """Valid tar streams of three formats, each with the offsets of its header blocks."""
    entries = [
        directory("base"),
        file("base/kustomization.yaml", "resources: [cm.yaml]\n"),
        file("base/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
        file("apps/" + "long-directory-name/" * 6 + "deployment.yaml", "kind: Deployment\n"),
        file("apps/überlay.yaml", "kind: Namespace\n"),
        file("README.md", "# not a manifest\n"),
    ]
    out = []
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT):
        usable = entries if fmt != tarfile.USTAR_FORMAT else [e for e in entries if "ü" not in e[0].name]
        options: dict[str, object] = (
            {"pax_headers": {"comment": "ab12" * 4}} if fmt == tarfile.PAX_FORMAT else {}
        )
        stream = tar(*usable, fmt=fmt, **options)
        with tarfile.open(fileobj=io.BytesIO(stream)) as parsed:
            headers = [at for m in parsed for at in range(m.offset, m.offset_data, 512)]
        out.append((stream, tuple(headers)))
    return tuple(out)


_FIELDS = {"name": (0, 100), "mode": (100, 108), "size": (124, 136), "type": (156, 157)}
_FIELDS |= {"linkname": (157, 257), "magic": (257, 265), "prefix": (345, 500)}


def _field_value(rnd: random.Random, aim: Aim, field: str) -> bytes:
    if field in ("name", "linkname", "prefix"):
        text = rnd.choice([aim.outside(rnd), aim.outside_dir(rnd), ".", "", "apps/cm.yaml", "a/../../b"])
        return text.encode() if rnd.random() < 0.8 else rnd.randbytes(rnd.randint(1, 100))
    if field == "size":
        size = rnd.choice([0, 1, 511, 512, 513, 1 << 20, 64 << 20, rnd.randrange(1 << 33)])
        return b"%011o\0" % size if rnd.random() < 0.7 else b"\x80" + rnd.randbytes(11)
    if field == "type":
        return bytes([rnd.choice(b"0123456789gxLKSDVMNA\0")])
    if field == "magic":
        return rnd.choice([b"ustar  \0", b"ustar\x0000", b"\0" * 8, rnd.randbytes(8)])
    return b"%07o\0" % rnd.randrange(0o10000)


def _set_field(rnd: random.Random, aim: Aim, data: bytearray, headers: list[int]) -> None:
    at = rnd.choice(headers)
    field = rnd.choice(list(_FIELDS))
    start, stop = _FIELDS[field]
    data[at + start : at + stop] = _field_value(rnd, aim, field)[: stop - start].ljust(stop - start, b"\0")
    if rnd.random() < 0.9:  # mostly a header that passes its checksum, so the fields themselves are tried
        block = bytearray(data[at : at + 512])
        fix_checksum(block)
        data[at : at + 512] = block


def _flip(rnd: random.Random, data: bytearray, start: int, stop: int, count: int) -> None:
    for _ in range(count):
        if stop > start:
            data[rnd.randrange(start, stop)] ^= 1 << rnd.randrange(8)


def _mutate_stream(rnd: random.Random, aim: Aim, data: bytearray, headers: list[int]) -> None:
    op = rnd.choice(["field", "field", "header-bytes", "bits", "insert", "delete", "splice"])
    if op == "field":
        _set_field(rnd, aim, data, headers)
    elif op == "header-bytes":
        at = rnd.choice(headers)
        _flip(rnd, data, at, at + 512, rnd.randint(1, 8))
    elif op == "bits":
        _flip(rnd, data, 0, len(data), rnd.randint(1, 16))
    elif op == "insert":
        at = rnd.randrange(len(data) + 1)
        data[at:at] = rnd.randbytes(rnd.choice([1, 7, 511, 512, 513]))
    elif op == "delete":
        at = rnd.randrange(len(data))
        del data[at : at + rnd.choice([1, 100, 512, 1024])]
    else:  # a header block copied elsewhere, on a block boundary
        source, to = rnd.choice(headers), rnd.choice(headers)
        data[to:to] = data[source : source + 512]


def _mutate_compressed(rnd: random.Random, data: bytearray) -> None:
    op = rnd.choice(["bits", "insert", "truncate"])
    if op == "bits":
        _flip(rnd, data, 10, len(data), rnd.randint(1, 4))  # after gzip's own header, mostly
    elif op == "insert":
        at = rnd.randrange(10, len(data) + 1)
        data[at:at] = rnd.randbytes(rnd.randint(1, 64))
    else:
        del data[rnd.randrange(10, len(data)) :]
    if rnd.random() < 0.7:
        _fix_trailer(data)


def _fix_trailer(data: bytearray) -> None:
    """Rewrite gzip's CRC and length after a change to its deflate stream, when the change still
    inflates: what the unpacker then reads is a garbled tar stream, not a checksum error."""
    inflate = zlib.decompressobj(-15)
    try:
        out = inflate.decompress(bytes(data[10:]), 16 << 20)
    except zlib.error:
        return
    if not inflate.eof:
        return
    used = len(data) - 10 - len(inflate.unused_data)
    data[10 + used :] = (zlib.crc32(out) & 0xFFFFFFFF).to_bytes(4, "little") + len(out).to_bytes(4, "little")


def mutated(rnd: random.Random, aim: Aim) -> bytes:
    """A valid archive with up to three changes to its tar stream, then (or only) to its gzip stream."""
    stream, offsets = rnd.choice(corpus())
    data, headers = bytearray(stream), list(offsets)
    changes = 0 if rnd.random() < 0.25 else rnd.randint(1, 3)
    for _ in range(changes):
        _mutate_stream(rnd, aim, data, headers)
    squeezed = bytearray(gzip.compress(bytes(data), mtime=0))
    if changes == 0 or rnd.random() < 0.3:
        _mutate_compressed(rnd, squeezed)
    return bytes(squeezed)


# ---- the catalogue ----

S = ShapeSpec
CATEGORIES: dict[str, tuple[ShapeSpec, ...]] = {
    "symlinks": (
        S("to a path outside", symlink_outside),
        S("to ..", symlink_up),
        S("a directory link, then a file through it", symlink_dir_then_file),
        S("a chain", symlink_chain),
        S("a long target (pax linkpath / GNU long link)", symlink_long_target),
        S("a link, then a file of its name", symlink_then_overwrite),
    ),
    "hard links": (
        S("to a path outside", hardlink_outside),
        S("a link outside, then a file of its name", hardlink_then_overwrite),
        S("to an earlier member, then written", hardlink_to_member_then_write),
        S("a chain", hardlink_chain),
    ),
    "absolute names": (
        S("a file", absolute_name),
        S("a directory", absolute_directory),
        S("a long name", absolute_long_name),
        S("the ustar prefix", absolute_prefix),
    ),
    "traversal": (
        S("../ in the name", traversal_name),
        S("a pax path record (x or g)", traversal_pax_path),
        S("a GNU long name", traversal_long_name),
        S("the ustar prefix", traversal_prefix),
        S("a directory", traversal_directory),
        S("after a NUL in a pax path", traversal_after_nul),
    ),
    "devices and FIFOs": (S("a device or FIFO", special_file), S("another type", odd_type)),
    "sparse files": (S("old GNU sparse", gnu_sparse), S("pax GNU.sparse records", pax_sparse)),
    "long-name bombs": (
        S("bzip2, 3 GiB declared", lambda rnd, aim: bzip2_long_name_bomb()),
        S("gzip, a long name or link declaring GiBs", gzip_long_name_bomb),
        S("a name over 1,024 bytes", name_over_bound),
        S("a name at the bound", name_at_bound),
        S("chained extended headers", chained_extensions),
    ),
    "pax digit bombs": (
        S("a pax header of digits over 4 KiB", pax_digits_over_bound),
        S("malformed digit runs", pax_digits_malformed),
        S("4 KiB of digits before each of 20 entries", pax_digits_within_bound(20)),
        S(
            "4 KiB of digits before each of 2,000 entries",
            pax_digits_within_bound(2000),
            heavy=True,
            at_most=1,
        ),
    ),
    "entry-count bombs": (
        S("2,001 entries, or 8,000+ headers", too_many_entries),
        S("1,000-1,999 manifests", many_manifests),
    ),
    "total-size bombs": (
        S("a declared size over the total (octal, base-256, negative)", declared_size_bomb),
        S("two files of 40 MiB", content_over_total),
        S("64 MiB of content, at the total", content_at_total, heavy=True),
        S("manifests over the path's 2 MiB", manifests_over_path_bound),
        S("a manifest that is not UTF-8", not_utf8),
    ),
    "gzip bombs": (
        S("a header declaring 256 MiB of zeros", gzip_declared_huge),
        S("a tar stream past its cap", gzip_past_stream_cap, heavy=True),
        S("256 MiB of zeros after the end", zeros_after_the_end),
        S("48 MiB of zeros in bzip2 or xz", other_compression_bomb, heavy=True),
        S("truncated, or trailing bytes", truncated_or_trailing),
    ),
    "duplicate names": (S("the same name twice", duplicate_names),),
    "mutations": (S("a mutated valid archive", mutated),),
}
MUTATIONS = "mutations"


@dataclass(frozen=True, slots=True)
class Case:
    index: int
    category: str
    shape: str
    seed: int
    make: Shape

    def archive(self, aim: Aim) -> bytes:
        """The case's archive: the same for the same seed and index, wherever the case runs."""
        return self.make(random.Random(f"{self.seed}/{self.index}"), aim)


def cases(seed: int, count: int, *, heavy: bool = True) -> Iterator[Case]:
    """`count` cases: every other one a mutation, the rest the other categories in turn, each
    category's shapes in turn (a shape's `at_most` respected; no heavy shape without `heavy`)."""
    structured = [c for c in CATEGORIES if c != MUTATIONS]
    turns: dict[str, int] = {}
    runs: dict[str, int] = {}
    for index in range(count):
        category = MUTATIONS if index % 2 else structured[(index // 2) % len(structured)]
        spec = _next_shape(category, turns, runs, heavy=heavy)
        yield Case(index, category, spec.name, seed, spec.make)


def _next_shape(category: str, turns: dict[str, int], runs: dict[str, int], *, heavy: bool) -> ShapeSpec:
    shapes = CATEGORIES[category]
    while True:  # every category has shapes that are neither heavy nor limited
        spec = shapes[turns.get(category, 0) % len(shapes)]
        turns[category] = turns.get(category, 0) + 1
        if (heavy or not spec.heavy) and (not spec.at_most or runs.get(spec.name, 0) < spec.at_most):
            runs[spec.name] = runs.get(spec.name, 0) + 1
            return spec


def benign(count: int) -> bytes:
    """An ordinary artifact of `count` manifests under apps/ (and a README), gzipped as Flux does."""
    manifests = (
        file(
            f"apps/cm-{i:04}.yaml",
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\ndata: {{k: v}}\n",
        )
        for i in range(count)
    )
    return gzip.compress(tar(file("README.md", "# apps\n"), *manifests), mtime=0)


def archive_at(seed: int, count: int, index: int, aim: Aim, *, heavy: bool = True) -> bytes:
    """The archive of case `index` of `cases(seed, count)`, for a process that was handed no `Case`."""
    case = next(itertools.islice(cases(seed, count, heavy=heavy), index, None))
    return case.archive(aim)
