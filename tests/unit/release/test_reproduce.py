"""make reproduce's comparison (release/reproduce.py): for two releases, each file that differs,
the first byte that does, and in a tarball the member; nothing for identical releases."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from release.reproduce import compare, first_byte


def tarball(members: dict[str, bytes], mtime: int = 0) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def release(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    (directory / "SHA256SUMS").write_text(
        "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in sorted(files.items()))
    )
    return directory


def test_identical_releases_compare_equal(tmp_path: Path) -> None:
    files = {"a.tar.gz": tarball({"x/bin": b"1"}), "SBOM.json": b"{}"}
    assert compare(release(tmp_path / "one", files), release(tmp_path / "two", files)) == []


def test_a_difference_is_named_by_file_byte_and_member(tmp_path: Path) -> None:
    one = release(tmp_path / "one", {
        "a.tar.gz": tarball({"x/bin": b"1", "x/lib": b"same"}), "n.json": b'{"t": 1}',
        "gone.txt": b"",
    })  # fmt: skip
    two = release(tmp_path / "two", {
        "a.tar.gz": tarball({"x/bin": b"2", "x/lib": b"same"}), "n.json": b'{"t": 2}',
    })  # fmt: skip
    said = compare(one, two)
    assert said[0].startswith("a.tar.gz: differs at byte ") and said[0].endswith(
        ", in its member x/bin"
    )
    assert said[1] == f"gone.txt: only in {one}"
    assert said[2] == "n.json: differs at byte 6 (0x31 then 0x32)"
    # a member's time alone is a difference too
    three = release(tmp_path / "three", {"a.tar.gz": tarball({"x/bin": b"1"}, mtime=5)})
    four = release(tmp_path / "four", {"a.tar.gz": tarball({"x/bin": b"1"}, mtime=6)})
    assert compare(three, four)[0].endswith(", in its member x/bin")


def test_first_byte_of_a_shorter_file() -> None:
    assert first_byte(b"abc", b"abcd") == "their sizes (3 then 4 bytes)"
