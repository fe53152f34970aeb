"""The kustomize archive unpacker (ADR 0098), in process: what it writes and what it refuses.

These call `unpack.unpack` directly, as the child does; tests/unit/delivery/test_delivery_unpack_child.py
runs it as the controller does, in a child process.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from tar_archives import file, long_name_bomb, member, pax_header, pax_record, raw_header, tar

from fleetwave.delivery import unpack
from fleetwave.delivery.unpack import Refused

COMPRESSIONS: dict[str, Callable[[bytes], bytes]] = {
    "plain": lambda b: b,
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
}


@pytest.mark.parametrize("compress", COMPRESSIONS.values(), ids=COMPRESSIONS.keys())
def test_files_and_directories_unpack_from_every_compression(
    compress: Callable[[bytes], bytes], tmp_path: Path
) -> None:
    long = "deep/" + "d" * 150 + "/file.yaml"  # a GNU long-name header
    archive = tar(
        (member("base", kind=tarfile.DIRTYPE), b""),
        file("base/kustomization.yaml", "resources: [cm.yaml]\n"),
        file(long, "kind: ConfigMap\n"),
    )
    unpack.unpack(compress(archive), tmp_path / "tree")
    assert (tmp_path / "tree/base/kustomization.yaml").read_text() == "resources: [cm.yaml]\n"
    assert (tmp_path / "tree" / long).read_text() == "kind: ConfigMap\n"


def test_pax_names_and_a_git_archive_global_header_unpack(tmp_path: Path) -> None:
    # `git archive` writes a pax global header with the commit; non-ASCII names need a pax path.
    archive = tar(
        file("überlay/kustomization.yaml", "x: 1\n"), fmt=tarfile.PAX_FORMAT, pax_headers={"comment": "ab12"}
    )
    assert b"ab12" in archive
    unpack.unpack(gzip.compress(archive), tmp_path / "tree")
    assert (tmp_path / "tree/überlay/kustomization.yaml").read_text() == "x: 1\n"


def test_a_directory_declaring_a_size_has_no_data_as_tarfile_reads_it(tmp_path: Path) -> None:
    # The scan must skip exactly what tarfile skips, or the two would read different headers.
    directory = raw_header("base/", tarfile.DIRTYPE, 1 << 30)
    archive = directory + tar(file("base/a.yaml", "a: 1\n"))
    unpack.unpack(archive, tmp_path / "tree")
    assert (tmp_path / "tree/base/a.yaml").read_text() == "a: 1\n"


def refusal(archive: bytes, tmp_path: Path) -> str:
    with pytest.raises(Refused) as info:
        unpack.unpack(archive, tmp_path / "tree")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_long_name_bomb_is_refused_at_its_header(tmp_path: Path) -> None:
    bomb = long_name_bomb()
    assert len(bomb) < 16 * 1024
    assert refusal(bomb, tmp_path) == "has a GNU long-name header of 3221225472 bytes (at most 4096)"
    assert not (tmp_path / "tree").exists()  # refused before anything is written


def test_a_pax_header_of_a_long_run_of_digits_is_refused_by_its_size(tmp_path: Path) -> None:
    # CVE-2024-6232: tarfile's pax regular expressions are quadratic in a run of digits.
    archive = pax_header(b"1" * 65536) + tar(file("a.yaml", "a: 1\n"))
    assert refusal(archive, tmp_path) == "has a pax header of 65536 bytes (at most 4096)"


@pytest.mark.parametrize(
    "payload",
    [
        b"1" * 4000,  # digits and nothing else
        b"9" * 7 + b" path=x\n",  # a length past the header
        b"0 path=x\n",  # a length of zero
        pax_record("path", "a.yaml")[:-1] + b"X",  # no newline where the length ends
        b"8 path\n",  # no '='
    ],
)
def test_a_malformed_pax_header_is_refused_before_tarfile_parses_it(payload: bytes, tmp_path: Path) -> None:
    archive = pax_header(payload) + tar(file("a.yaml", "a: 1\n"))
    assert refusal(archive, tmp_path) == "is damaged (a pax header is malformed)"


def test_pax_records_that_move_the_next_header_are_refused(tmp_path: Path) -> None:
    for keyword in ("size", "GNU.sparse.size"):
        archive = pax_header(pax_record(keyword, "1")) + tar(file("a.yaml", "a: 1\n"))
        assert "sets a size or sparse map" in refusal(archive, tmp_path)


def test_a_pax_header_followed_by_garbage_in_its_padding_is_refused(tmp_path: Path) -> None:
    record = pax_record("comment", "x")
    header = raw_header("././@PaxHeader", tarfile.XHDTYPE, len(record))
    padding = pax_record("size", "99").ljust(512 - len(record), b"\0")
    archive = header + record + padding + tar(file("a.yaml", "a: 1\n"))
    assert refusal(archive, tmp_path) == "is damaged (a pax header is malformed)"


def test_too_many_entries_are_refused_before_any_is_written(tmp_path: Path) -> None:
    archive = tar(*(file(f"f{i}.yaml", "") for i in range(unpack.MAX_ENTRIES + 1)))
    assert refusal(archive, tmp_path) == "holds more than 2000 entries"
    assert not (tmp_path / "tree").exists()


def test_content_over_the_total_is_refused_at_the_header_that_declares_it(tmp_path: Path) -> None:
    archive = raw_header("big.yaml", tarfile.REGTYPE, unpack.MAX_UNPACKED_BYTES + 1)  # no data follows
    assert refusal(archive, tmp_path) == f"unpacks to more than {unpack.MAX_UNPACKED_BYTES} bytes"


def test_a_tar_stream_past_its_cap_stops_decompressing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unpack, "MAX_TAR_BYTES", 2 << 20)
    archive = gzip.compress(tar(file("a.yaml", "a" * (3 << 20))))
    assert refusal(archive, tmp_path) == f"unpacks to a tar stream of more than {2 << 20} bytes"


def test_a_name_past_the_bound_is_refused(tmp_path: Path) -> None:
    archive = tar(file("n" * 2000, "a: 1\n"))  # a GNU long-name header of 2001 bytes
    assert refusal(archive, tmp_path) == "entry 1 has a name longer than 1024 bytes"


@pytest.mark.parametrize("name", ["../evil.yaml", "/etc/evil.yaml", "a/../../evil.yaml"])
def test_a_name_leaving_the_root_is_refused_without_quoting_it(name: str, tmp_path: Path) -> None:
    archive = tar(file("ok.yaml", "a: 1\n"), file(name, "x"))
    assert refusal(archive, tmp_path) == "entry 2 must stay inside the archive"
    assert not (tmp_path / "evil.yaml").exists()


def test_a_global_pax_path_leaving_the_root_is_refused(tmp_path: Path) -> None:
    archive = pax_header(pax_record("path", "../evil.yaml"), tarfile.XGLTYPE) + tar(file("a.yaml", "x"))
    assert refusal(archive, tmp_path) == "entry 1 must stay inside the archive"


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (tarfile.SYMTYPE, "a symbolic link"),
        (tarfile.LNKTYPE, "a hard link"),
        (tarfile.FIFOTYPE, "a FIFO"),
        (tarfile.CHRTYPE, "a character device"),
        (tarfile.GNUTYPE_SPARSE, "a sparse file"),
        (b"V", "of a type fleetwave does not unpack"),
    ],
)
def test_anything_but_files_and_directories_is_refused(kind: bytes, what: str, tmp_path: Path) -> None:
    link = member("base/link", kind=kind)
    link.linkname = "/etc/passwd"
    archive = tar(file("base/a.yaml", "a: 1\n"), (link, b""))
    assert refusal(archive, tmp_path) == f"entry 2 is not a regular file or directory ({what})"


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (b"not an archive", "is not a tar archive (gzip, bzip2, xz or uncompressed)"),
        (b"x" * 2048, "is not a tar archive (gzip, bzip2, xz or uncompressed)"),
        (b"", "is not a tar archive (gzip, bzip2, xz or uncompressed)"),
        (gzip.compress(b"x" * 4096)[:-12], "is damaged (its compressed stream is broken or truncated)"),
        (b"BZh9 not bzip2", "is damaged (its compressed stream is broken or truncated)"),
    ],
)
def test_what_is_not_a_tar_archive_says_so(archive: bytes, message: str, tmp_path: Path) -> None:
    assert refusal(archive, tmp_path) == message


def test_damage_after_the_first_header_is_refused(tmp_path: Path) -> None:
    good = tar(file("a.yaml", "a: 1\n"), file("b.yaml", "b: 2\n"))
    broken = bytearray(good)
    broken[1024 + 10] ^= 0xFF  # the second header's name: its checksum no longer matches
    assert refusal(bytes(broken), tmp_path) == "is damaged (a header is invalid)"


def test_an_archive_ending_inside_an_entry_or_after_an_extension_is_refused(tmp_path: Path) -> None:
    whole = tar(file("a.yaml", "a" * 2000))
    assert refusal(whole[:1024], tmp_path) == "is damaged (it ends inside an entry)"
    assert (
        refusal(pax_header(pax_record("comment", "x")), tmp_path)
        == "is damaged (it ends after an extended header)"
    )


def test_the_child_entry_point_reports_one_line_and_code_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(long_name_bomb(1 << 30))))
    assert unpack.main(["unpack", str(tmp_path / "tree")]) == unpack.REFUSED
    assert capsys.readouterr().err == "has a GNU long-name header of 1073741824 bytes (at most 4096)\n"


def test_a_well_formed_pax_record_of_a_long_run_of_digits_is_refused(tmp_path: Path) -> None:
    """Found by bench/bench_artifact_fuzz.py: 2,000 entries each after a well-formed 4 KiB record of
    digits cost tarfile's parser 10 s of CPU (CVE-2024-6232's regular expressions)."""
    archive = pax_header(pax_record("comment", "7" * 4000)) + tar(file("a.yaml", "a: 1\n"))
    assert (
        refusal(archive, tmp_path)
        == f"has a pax header with a run of more than {unpack.MAX_PAX_DIGITS} digits"
    )
    mtime = pax_header(pax_record("mtime", "1764320000.123456789")) + tar(file("b.yaml", "b: 1\n"))
    unpack.unpack(mtime, tmp_path / "ok")  # what real archives hold passes
    assert (tmp_path / "ok" / "b.yaml").read_text() == "b: 1\n"


def test_a_chain_of_extended_headers_before_one_entry_is_refused(tmp_path: Path) -> None:
    """Found by the fuzzer: tarfile reads chained extended headers by recursion, and 340 of them
    ended the unpacker in RecursionError (a traceback, not a refusal)."""
    chain = b"".join(pax_header(pax_record("comment", "x")) for _ in range(unpack.MAX_CHAINED_HEADERS + 1))
    archive = chain + tar(file("a.yaml", "a: 1\n"))
    expected = f"entry 1 has more than {unpack.MAX_CHAINED_HEADERS} extended headers"
    assert refusal(archive, tmp_path) == expected
    allowed = pax_header(pax_record("comment", "x"), tarfile.XGLTYPE) + pax_header(
        pax_record("path", "c.yaml")
    )
    unpack.unpack(allowed + tar(file("ignored.yaml", "c: 1\n")), tmp_path / "ok")
    assert (tmp_path / "ok" / "c.yaml").read_text() == "c: 1\n"
