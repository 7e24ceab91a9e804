"""The release recipe's pure parts: Debian source facts, the SBOM, reproducible tarballs."""

from __future__ import annotations

import email.parser
import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from release import layout, package, sbom, sources
from release.sources import SourcePackage


@pytest.mark.parametrize(
    ("version", "upstream"),
    [
        ("3.11.2-6+deb12u8", "3.11.2"),
        ("1:1.2.13.dfsg-1", "1.2.13"),
        ("3.0.20-1~deb12u2", "3.0.20"),
        ("5.4.1-1+deb12u1", "5.4.1"),
        ("2.5.0-1+deb12u2", "2.5.0"),
        ("1.0.8-5", "1.0.8"),
    ],
)
def test_upstream_version(version: str, upstream: str) -> None:
    assert SourcePackage("p", version, "pool/main/p/p", {}, None).upstream_version == upstream


SERIES = "deb-setup.diff\n# a comment\nmultiarch.diff -p1\nshutdown-deadlock.diff\nCVE-2024-0450.patch\n\n"


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (None, []),
        ("shutdown-deadlock.diff", ["shutdown-deadlock.diff", "CVE-2024-0450.patch"]),
        (
            "deb-setup.diff",
            ["deb-setup.diff", "multiarch.diff", "shutdown-deadlock.diff", "CVE-2024-0450.patch"],
        ),
    ],
)
def test_patch_series(first: str | None, expected: list[str]) -> None:
    assert sources.patch_series(SERIES, first) == expected


def test_a_patch_missing_from_the_series_stops_the_build() -> None:
    with pytest.raises(sources.SourceError, match="not in the series"):
        sources.patch_series(SERIES, "gone.patch")


def test_parse_sources_index() -> None:
    index = (
        "Package: zlib\nVersion: 1:1.2.13.dfsg-1\nDirectory: pool/main/z/zlib\nChecksums-Sha256:\n"
        " aa 10 zlib_1.2.13.dfsg-1.dsc\n bb 20 zlib_1.2.13.dfsg.orig.tar.bz2\n\n"
        "Package: bzip2\nVersion: 1.0.8-5\nDirectory: pool/main/b/bzip2\n"
    )
    parsed = sources.parse_sources(index)
    assert parsed["zlib"][0]["Version"] == "1:1.2.13.dfsg-1"
    assert (
        parsed["zlib"][0]["Checksums-Sha256"].splitlines()[1]
        == "bb 20 zlib_1.2.13.dfsg.orig.tar.bz2"
    )
    assert parsed["bzip2"][0]["Directory"] == "pool/main/b/bzip2"


def test_the_lock_pins_every_native_library_the_sbom_names() -> None:
    lock = sources.load_lock()
    for native in sbom.NATIVE:
        package_entry = lock.packages[native.package]
        assert package_entry.file_matching(r"\.orig\.tar\.")
        assert all(len(digest) == 64 for digest in package_entry.files.values())


def test_a_download_that_does_not_match_the_lock_is_refused(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.write_bytes(b"not the tarball")
    with pytest.raises(sources.SourceError, match="is not the locked"):
        sources.fetch(served.as_uri(), tmp_path / "cache" / "x.tar.gz", "0" * 64)
    assert not (tmp_path / "cache" / "x.tar.gz").exists()


def metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text, headersonly=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Name: a\nLicense-Expression: MIT\nLicense: ignored\n", "MIT"),
        ("Name: a\nLicense: Apache 2.0\n", "Apache 2.0"),
        (
            "Name: a\nLicense: UNKNOWN\nClassifier: License :: OSI Approved :: BSD License\n",
            "BSD License",
        ),
        (
            "Name: a\nClassifier: License :: OSI Approved :: MIT License\n"
            "Classifier: License :: OSI Approved :: Apache Software License\n",
            "MIT License OR Apache Software License",
        ),
        ("Name: a\n", ""),
    ],
)
def test_distribution_license(text: str, expected: str) -> None:
    assert sbom.distribution_license(metadata(text)) == expected


def test_sbom_document(tmp_path: Path) -> None:
    contents = tmp_path / "_internal"
    (contents / "botocore-1.44.5.dist-info").mkdir(parents=True)
    (contents / "botocore-1.44.5.dist-info" / "METADATA").write_text(
        "Name: botocore\nVersion: 1.44.5\nLicense: Apache License 2.0\n"
    )
    (contents / "cffi.libs").mkdir()
    (contents / "cffi.libs" / "libffi-0c3c6a1f.so.8.1.2").write_bytes(b"\x7fELF")
    (contents / "libssl.so.3").write_bytes(b"")
    (contents / "libcrypto.so.3").write_bytes(b"")
    lock = sources.load_lock()
    components = [
        *sbom.native_components(contents, lock),
        *sbom.python_components(contents),
        *sbom.vendored_components(contents),
    ]
    doc = sbom.document(
        version="1.0.0",
        arch="arm64",
        commit="abc",
        built="2026-01-01T00:00:00Z",
        components=components + components[:1],
    )
    by_name = {c["name"]: c for c in doc["components"]}
    assert by_name["botocore"]["purl"] == "pkg:pypi/botocore@1.44.5"
    assert by_name["openssl"]["version"] == lock.packages["openssl"].upstream_version
    assert by_name["openssl"]["licenses"] == [{"expression": "Apache-2.0"}]
    assert [p["value"] for p in by_name["openssl"]["properties"]] == [
        "libcrypto.so.3",
        "libssl.so.3",
    ]
    assert by_name["libffi"]["version"] == "8.1.2"
    assert "cpython" not in by_name  # its files are not in this made-up bundle
    assert len(doc["components"]) == len(components)  # duplicates dropped
    assert doc["metadata"]["component"]["purl"] == "pkg:generic/credprovider@1.0.0?arch=arm64"
    again = sbom.document(
        version="1.0.0",
        arch="arm64",
        commit="abc",
        built="2026-01-01T00:00:00Z",
        components=components,
    )
    assert again["serialNumber"] == doc["serialNumber"]
    json.dumps(doc)


def test_tarballs_are_reproducible(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    (stage / "top" / "sub").mkdir(parents=True)
    (stage / "top" / "sub" / "file").write_text("x")
    (stage / "top" / "link").symlink_to("sub/file")
    first, second = tmp_path / "1.tar.gz", tmp_path / "2.tar.gz"
    package.write_tarball(stage, "top", first, 1700000000)
    (stage / "top" / "sub" / "file").touch()  # a newer mtime must not matter
    package.write_tarball(stage, "top", second, 1700000000)
    assert (
        hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    )
    with tarfile.open(first) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["top", "top/link", "top/sub", "top/sub/file"]
    assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, 1700000000)}
    assert members[1].issym() and members[1].linkname == "sub/file"


STDLIB_DIR = "/opt/python/lib/python3.11"


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        ("os", f"{STDLIB_DIR}/os.py", "lib/python3.11/os.pyc"),
        ("json", f"{STDLIB_DIR}/json/__init__.py", "lib/python3.11/json/__init__.pyc"),
        (
            "email.mime.text",
            f"{STDLIB_DIR}/email/mime/text.py",
            "lib/python3.11/email/mime/text.pyc",
        ),
        ("credprovider.entry", "/src/credprovider/entry.py", "credprovider/entry.pyc"),
        ("credprovider", "/src/credprovider/__init__.py", "credprovider/__init__.pyc"),
        ("botocore.data", "/opt/site/botocore/data/__init__.py", "botocore/data/__init__.pyc"),
        ("six", "/opt/site/six.py", "six.pyc"),
        ("legacy", "/opt/site/legacy.pyc", "legacy.pyc"),
        # a namespace package (google, azure): only a directory, made by what is placed inside it
        ("google", "-", None),
        ("azure", None, None),
        # a module beside the standard library directory is not part of it
        ("site_thing", "/opt/python/lib/python3.11-extra/site_thing.py", "site_thing.pyc"),
    ],
)
def test_module_destination(name: str, source: str | None, expected: str | None) -> None:
    assert layout.module_destination(name, source or "", STDLIB_DIR) == expected


@pytest.mark.parametrize(
    ("collected", "expected"),
    [
        ("python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
         "lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so"),
        ("lib-dynload/zlib.cpython-311-aarch64-linux-gnu.so",
         "lib/python3.11/lib-dynload/zlib.cpython-311-aarch64-linux-gnu.so"),
        ("libssl.so.3", "libssl.so.3"),
        ("cryptography/hazmat/bindings/_rust.abi3.so", "cryptography/hazmat/bindings/_rust.abi3.so"),
    ],
)  # fmt: skip
def test_binary_destination(collected: str, expected: str) -> None:
    assert layout.binary_destination(collected) == expected


def test_openssl_version_text_is_what_ssl_would_report(tmp_path: Path) -> None:
    """--version of a bundle reads this instead of loading OpenSSL: same text as _ssl gives."""
    from release.bundle import openssl_version_text

    header = tmp_path / "include" / "openssl" / "opensslv.h"
    header.parent.mkdir(parents=True)
    header.write_text(
        '# define OPENSSL_VERSION_STR "3.0.20"\n'
        '# define OPENSSL_VERSION_TEXT "OpenSSL 3.0.20 7 Apr 2026"\n'
    )
    assert openssl_version_text(tmp_path) == "3.0.20 7 Apr 2026"
