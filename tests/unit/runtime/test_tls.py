"""A CA directory (OpenSSL's ``capath``, which requests and botocore accept for a CA bundle
variable) is read as every node file is (runtime/tls.py ``directory_pem``): the hashed entries
OpenSSL would open, bounded, a FIFO or a device among them refused by name before any handshake
could open it. Each case drives a real TLS handshake in memory against a server whose certificate
the test CA signed."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import pytest

from credprovider.runtime.tls import (
    MAX_CA_BUNDLE_BYTES,
    MAX_CA_DIRECTORY_ENTRIES,
    CaBundleError,
    verified_context,
)
from emulators.tls import CertAuthority, make_test_ca

HOST = "registry.example.test"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return make_test_ca(tmp_path_factory.mktemp("ca"))


def subject_hash(ca: CertAuthority) -> str:
    """The name OpenSSL's capath lookup opens for this CA (what c_rehash links)."""
    done = subprocess.run(
        ["openssl", "x509", "-noout", "-subject_hash", "-in", str(ca.bundle)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def handshake(client: ssl.SSLContext, ca: CertAuthority) -> None:
    """A TLS handshake over memory buffers: raises as a connection would."""
    server = ca.server_context(HOST)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    ours = client.wrap_bio(c_in, c_out, server_hostname=HOST)
    theirs = server.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(20):
        for index, (side, out, into) in enumerate(((ours, c_out, s_in), (theirs, s_out, c_in))):
            if not done[index]:
                try:
                    side.do_handshake()
                    done[index] = True
                except ssl.SSLWantReadError:
                    pass
            into.write(out.read())
        if all(done):
            return
    raise AssertionError("the handshake did not finish")


def rehashed(directory: Path, ca: CertAuthority) -> Path:
    """A CA directory as update-ca-certificates leaves one: the certificate under its own name and
    a hash link to it."""
    directory.mkdir()
    (directory / "test-ca.pem").write_bytes(ca.bundle.read_bytes())
    (directory / f"{subject_hash(ca)}.0").symlink_to("test-ca.pem")
    return directory


def test_a_rehashed_directory_verifies_its_certificates(tmp_path: Path, ca: CertAuthority) -> None:
    context = verified_context(str(rehashed(tmp_path / "certs", ca)), "REQUESTS_CA_BUNDLE")
    handshake(context, ca)
    stranger = make_test_ca(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, stranger)


def test_a_dangling_hash_link_is_skipped_as_openssl_skips_it(
    tmp_path: Path, ca: CertAuthority
) -> None:
    directory = rehashed(tmp_path / "certs", ca)
    (directory / "0badc0de.0").symlink_to("removed-by-a-package.pem")
    handshake(verified_context(str(directory), "REQUESTS_CA_BUNDLE"), ca)


@pytest.mark.parametrize("kind", ["a FIFO", "a directory"])
def test_a_special_file_at_a_hashed_name_is_refused_by_name(
    tmp_path: Path, ca: CertAuthority, kind: str
) -> None:
    """OpenSSL would open it during the handshake that looked the issuer up: a FIFO held that
    handshake to the kubelet's kill. It is refused before, naming the entry and the variable."""
    directory = rehashed(tmp_path / "certs", ca)
    entry = directory / f"{subject_hash(ca)}.1"
    os.mkfifo(entry) if kind == "a FIFO" else entry.mkdir()
    with pytest.raises(CaBundleError) as raised:
        verified_context(str(directory), "REQUESTS_CA_BUNDLE")
    assert str(raised.value) == (
        f"CA bundle {directory} named by REQUESTS_CA_BUNDLE cannot be used: its entry "
        f"{entry.name} is {kind}, not a regular file; fix or unset REQUESTS_CA_BUNDLE"
    )


def test_a_directory_without_hashed_names_is_refused(tmp_path: Path, ca: CertAuthority) -> None:
    """Certificates copied in without c_rehash: OpenSSL would find none of them at verification."""
    directory = tmp_path / "certs"
    directory.mkdir()
    (directory / "test-ca.pem").write_bytes(ca.bundle.read_bytes())
    with pytest.raises(CaBundleError, match=r"holds no certificate under a hashed name"):
        verified_context(str(directory), "AWS_CA_BUNDLE")


def test_a_directory_is_read_within_the_bundles_bounds(tmp_path: Path, ca: CertAuthority) -> None:
    huge = rehashed(tmp_path / "huge", ca)
    with open(huge / "ffffffff.0", "wb") as sparse:
        sparse.truncate(MAX_CA_BUNDLE_BYTES + 1)
    with pytest.raises(CaBundleError, match=r"cannot be used: holds more than 16 MiB"):
        verified_context(str(huge), "REQUESTS_CA_BUNDLE")
    crowded = rehashed(tmp_path / "crowded", ca)
    for index in range(MAX_CA_DIRECTORY_ENTRIES):
        (crowded / f"n{index}").touch()
    with pytest.raises(CaBundleError, match=r"holds more than 10,000 entries"):
        verified_context(str(crowded), "REQUESTS_CA_BUNDLE")


def test_a_plugin_argument_never_names_a_directory(tmp_path: Path, ca: CertAuthority) -> None:
    """``--ca-file`` is a file, as upstream's: a directory there is refused as one."""
    directory = rehashed(tmp_path / "certs", ca)
    with pytest.raises(CaBundleError, match=r"--ca-file .* cannot be used: is a directory"):
        verified_context(str(directory), "--ca-file")
