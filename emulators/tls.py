"""A throwaway test CA and server certificates, generated per test session (never committed)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


@dataclass
class CertAuthority:
    """A CA whose bundle file is handed to the plugin (``SSL_CERT_FILE``/``REQUESTS_CA_BUNDLE``)."""

    directory: Path
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def bundle(self) -> Path:
        return self.directory / "ca.pem"

    def server_context(self, *hosts: str) -> ssl.SSLContext:
        """A TLS server context with a certificate for ``hosts`` (names or IPs) signed by this CA."""
        cert_path, key_path = self.issue(hosts[0], hosts=hosts)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        return context

    def issue(
        self, common_name: str, organizations: tuple[str, ...] = (), hosts: tuple[str, ...] = ()
    ) -> tuple[Path, Path]:
        """A certificate (and its key) signed by this CA, valid for a day: for ``hosts`` (names or
        IPs) when given, and with ``organizations`` (Kubernetes reads them as groups)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        stem = self.directory / f"cert-{x509.random_serial_number()}"
        cert_path, key_path = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key_pem(key))
        key_path.chmod(0o600)
        return cert_path, key_path


def key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    """``key`` as an unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def self_signed(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, common_name: str, ca: bool = False
) -> x509.Certificate:
    """A certificate for ``key`` signed by itself, valid from five minutes ago for a day."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    return builder.sign(key, hashes.SHA256())


def make_test_ca(directory: Path) -> CertAuthority:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    # A name of its own: with two test CAs in one bundle, OpenSSL picks an issuer by name.
    cert = self_signed(key, f"credprovider test CA {os.urandom(4).hex()}", ca=True)
    ca = CertAuthority(directory, key, cert)
    ca.bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return ca
