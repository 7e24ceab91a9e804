"""A Workload Identity Federation config with an X.509 source (``credential_source.certificate``):
the workload's certificate is the subject token and the client certificate of an mTLS call to STS.
google-auth's protocol, every file it reads (the certificate config, the certificate, the key, the
trust chain) read or checked first as a node file (credprovider/gcp/sources.py): none of them can
hold the plugin to its deadline or fill its memory, and each fault is one line naming the file."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
    load_pem_private_key,
)

from emulators.gcp import FakeSts
from emulators.http import FakeServer, serve
from emulators.kubelet_exec import PluginRun
from emulators.tls import CertAuthority
from tests.helpers import SPECIAL_FILES, make_special, require_bundle
from tests.integration.gcp.test_identities import run_with_wif_file

MTLS = "urn:ietf:params:oauth:token-type:mtls"


@pytest.fixture
def mtls_sts(test_ca: CertAuthority) -> Iterator[tuple[FakeSts, FakeServer]]:
    """STS that completes a handshake only with a client certificate the test CA signed."""
    fake = FakeSts()
    context = test_ca.server_context("sts.googleapis.com")
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(str(test_ca.bundle))
    with serve(fake, tls=context) as server:
        yield fake, server


class Workload:
    """The node's files for an X.509 source: a certificate config naming a certificate and key the
    test CA issued, and a trust chain holding the CA."""

    def __init__(self, tmp_path: Path, test_ca: CertAuthority) -> None:
        self.cert, self.key = test_ca.issue("workload")
        self.chain = tmp_path / "chain.pem"
        self.chain.write_bytes(test_ca.bundle.read_bytes())
        self.config = tmp_path / "certificate_config.json"
        self.write_config({"cert_path": str(self.cert), "key_path": str(self.key)})

    def write_config(self, workload: object) -> None:
        self.config.write_text(json.dumps({"cert_configs": {"workload": workload}}))

    def source(self, chain: bool = True) -> dict[str, object]:
        certificate: dict[str, object] = {"certificate_config_location": str(self.config)}
        if chain:
            certificate["trust_chain_path"] = str(self.chain)
        return {"certificate": certificate}


def _run(
    tmp_path: Path,
    server: FakeServer,
    test_ca: CertAuthority,
    source: dict[str, object],
    *args: str,
    use_bundle: bool = False,
    **env: str,
) -> PluginRun:
    return run_with_wif_file(
        tmp_path, server, test_ca, source, *args, use_bundle=use_bundle, subject_type=MTLS, **env
    )


def _der(pem: bytes) -> str:
    certificate = x509.load_pem_x509_certificate(pem)
    return base64.b64encode(certificate.public_bytes(Encoding.DER)).decode()


def test_the_workload_certificate_is_exchanged_over_mtls(
    tmp_path: Path,
    mtls_sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    use_bundle: bool,
) -> None:
    """The working path: STS is reached with the workload's certificate (its handshake requires
    one), and asked to exchange the certificate and its chain, as google-auth sends them."""
    files = Workload(tmp_path, test_ca)
    fake, server = mtls_sts
    run = _run(tmp_path, server, test_ca, files.source(), use_bundle=use_bundle)
    assert run.code == 0, run.stderr
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    form = fake.forms[-1]
    assert form["subject_token_type"] == MTLS
    assert json.loads(form["subject_token"]) == [
        _der(files.cert.read_bytes()),
        _der(test_ca.bundle.read_bytes()),
    ]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_each_file_is_read_once_by_the_plugin(
    tmp_path: Path, mtls_sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    """google-auth asks for the certificate's and key's paths and for the certificate's bytes in
    turn: the plugin reads the config, the certificate and the key once for both (its reads are
    the O_NONBLOCK ones; OpenSSL then loads the certificate and key by their paths itself)."""
    files = Workload(tmp_path, test_ca)
    fake, server = mtls_sts
    trace = tmp_path / "trace"
    strace = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace)]
    run = _run(tmp_path, server, test_ca, files.source(), wrapper=strace)
    assert run.code == 0, run.stderr
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    opened = trace.read_text().splitlines()
    for path in (files.config, files.cert, files.key):
        ours = [line for line in opened if f'"{path}"' in line and "O_NONBLOCK" in line]
        assert len(ours) == 1, (path, ours)


def test_the_config_is_found_where_google_auth_looks(
    tmp_path: Path, mtls_sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    """``use_default_certificate_config``: GOOGLE_API_CERTIFICATE_CONFIG names the config."""
    files = Workload(tmp_path, test_ca)
    fake, server = mtls_sts
    source: dict[str, object] = {"certificate": {"use_default_certificate_config": True}}
    run = _run(tmp_path, server, test_ca, source, GOOGLE_API_CERTIFICATE_CONFIG=str(files.config))
    assert run.code == 0, run.stderr
    assert json.loads(fake.forms[-1]["subject_token"]) == [_der(files.cert.read_bytes())]


FAULTS = [*SPECIAL_FILES, "missing"]
FILES = {
    "config": "the certificate config",
    "cert": "the certificate file",
    "key": "the key file",
    "chain": "the trust chain file",
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("which", sorted(FILES))
def test_a_file_that_cannot_be_read_is_one_line_about_it(
    tmp_path: Path,
    mtls_sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    which: str,
    fault: str,
) -> None:
    """Before: a FIFO held the plugin to its deadline, whose line blamed the network; /dev/zero
    and a 2 GiB file were read into memory; a directory or a missing file was "Failed to retrieve
    or parse certificate for external account credentials"."""
    files = Workload(tmp_path, test_ca)
    path: Path = getattr(files, which)
    path.unlink()
    if fault != "missing":
        make_special(path, fault)
    _, server = mtls_sts
    run = _run(tmp_path, server, test_ca, files.source(), "--deadline", "8s")
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    says = SPECIAL_FILES.get(fault, "is not there" if which == "config" else "cannot be read: no")
    assert f"{FILES[which]} {path} {says}" in line, line
    assert run.seconds < 5, run.seconds
    fake, _ = mtls_sts
    assert fake.forms == []


@pytest.mark.parametrize("which", sorted(FILES))
def test_through_the_bundle_a_fifo_is_one_line_at_once(
    tmp_path: Path, mtls_sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority, which: str
) -> None:
    """The same as the released bundle runs it (the hazard that held the plugin: a FIFO)."""
    require_bundle()
    files = Workload(tmp_path, test_ca)
    path: Path = getattr(files, which)
    path.unlink()
    make_special(path, "a FIFO")
    _, server = mtls_sts
    run = _run(tmp_path, server, test_ca, files.source(), "--deadline", "8s", use_bundle=True)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert f"{FILES[which]} {path} is a FIFO, not a regular file" in line, line
    assert run.seconds < 5, run.seconds


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("{", "is not JSON"),
        ("[" * 100_000, "is JSON nested more than 32 levels deep"),
        (json.dumps({"cert_configs": {}}), "names no workload cert_path and key_path"),
        (json.dumps({"cert_configs": {"workload": {"cert_path": 1}}}), "names no workload"),
        (json.dumps([1]), "names no workload cert_path and key_path"),
    ],
)
def test_a_config_that_names_no_workload_is_one_line_about_it(
    tmp_path: Path,
    mtls_sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    config: str,
    says: str,
) -> None:
    files = Workload(tmp_path, test_ca)
    files.config.write_text(config)
    _, server = mtls_sts
    run = _run(tmp_path, server, test_ca, files.source())
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert f"the certificate config {files.config} {says}" in line, line


@pytest.mark.parametrize(
    ("which", "text", "says"),
    [
        ("cert", "not a certificate\n", "the certificate file {} holds no PEM certificate"),
        (
            "cert",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "the certificate file {} holds no PEM certificate",
        ),
        ("key", "not a key\n", "the key file {} holds no PEM private key"),
        ("key", "other", "the key file {} is not the key of "),
        ("key", "encrypted", "the key file {} is encrypted: give a key without a passphrase"),
    ],
)
def test_a_file_that_holds_no_certificate_or_key_is_one_line_about_it(
    tmp_path: Path,
    mtls_sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    use_bundle: bool,
    which: str,
    text: str,
    says: str,
) -> None:
    """Before: OpenSSL's "PEM lib" inside requests' "Max retries exceeded", or google-auth's
    "Failed to retrieve or parse certificate"; an encrypted key had OpenSSL ask the terminal for
    its passphrase."""
    files = Workload(tmp_path, test_ca)
    path: Path = getattr(files, which)
    if text == "other":  # a key, but another certificate's
        path.write_bytes(test_ca.issue("another")[1].read_bytes())
    elif text == "encrypted":
        key = load_pem_private_key(path.read_bytes(), password=None)
        path.write_bytes(
            key.private_bytes(
                Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"passphrase")
            )
        )
    else:
        path.write_text(text)
    _, server = mtls_sts
    run = _run(tmp_path, server, test_ca, files.source(chain=False), use_bundle=use_bundle)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert says.format(path) in line, line
    assert "internal error" not in line and "Failed to retrieve" not in line
