"""Signing a release with the operator's OpenPGP key (``make release SIGNING_KEY=key.asc``): the
key, an ASCII-armored secret key without a passphrase (``gpg --export-secret-keys --armor``), is
imported into a keyring of this run's own, never the user's, and every signature is made with it:
detached signatures (``SHA256SUMS.asc``, the provenance's, the RPM repository's ``repomd.xml.asc``),
the apt repository's ``InRelease`` and ``Release.gpg``, and each ``.rpm``'s own header signature
(``rpmsign --addsign``). Its public key is written beside them, armored for people and rpm,
binary for apt's ``signed-by``. Every verification is a standard tool's: docs/release.md shows each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PUBLIC_KEY: Final = "credprovider-release-key.asc"  # armored: gpg --import, rpm --import
KEYRING: Final = "credprovider-archive-keyring.gpg"  # binary: apt's signed-by


class SigningError(Exception):
    """The key cannot sign (not a secret key, protected by a passphrase, gpg missing)."""


@dataclass(frozen=True)
class Signer:
    home: Path  # the run's own GNUPGHOME
    fingerprint: str

    def _gpg(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            ["gpg", "--homedir", str(self.home), "--batch", "--yes", "--pinentry-mode",
             "error", "--local-user", self.fingerprint, *args],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise SigningError(f"gpg {args[0]}: {said[-1] if said else 'failed'}")
        return done

    def detach(self, path: Path, suffix: str = ".asc") -> Path:
        """``path.asc``: an armored detached signature (``gpg --verify path.asc path``)."""
        target = path.with_name(path.name + suffix)
        armor = ["--armor"] if suffix == ".asc" else []
        self._gpg(*armor, "--detach-sign", "--output", str(target), str(path))
        return target

    def clearsign(self, path: Path, target: Path) -> Path:
        """``target``: ``path`` clearsigned (apt's InRelease)."""
        self._gpg("--clearsign", "--output", str(target), str(path))
        return target

    def export(self, out: Path) -> list[Path]:
        """The public key, armored and binary."""
        armored, binary = out / PUBLIC_KEY, out / KEYRING
        armored.write_bytes(self._gpg("--armor", "--export", self.fingerprint).stdout)
        binary.write_bytes(self._gpg("--export", self.fingerprint).stdout)
        return [armored, binary]

    def sign_rpm(self, path: Path) -> None:
        """The package's own header signature (``rpm -K`` checks it)."""
        done = subprocess.run(
            ["rpmsign", "--addsign", "--define", f"__gpg {shutil.which('gpg')}",
             "--define", f"_gpg_name {self.fingerprint}",
             "--define", f"_gpg_path {self.home}",
             "--define", "_gpg_sign_cmd_extra_args --batch --pinentry-mode error",
             str(path)],
            capture_output=True, timeout=300, check=False,
            env={**os.environ, "GNUPGHOME": str(self.home)},
        )  # fmt: skip
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise SigningError(f"rpmsign {path.name}: {said[-1] if said else 'failed'}")


@contextmanager
def signer(key_file: Path) -> Iterator[Signer]:
    """A :class:`Signer` for the secret key in ``key_file``, in a keyring removed afterwards."""
    if shutil.which("gpg") is None:
        raise SigningError("gpg is missing: apt-get install gnupg")
    if not key_file.is_file():  # absent, or a FIFO or device gpg would wait on for ever
        raise SigningError(
            f"SIGNING_KEY {key_file} holds no OpenPGP secret key (it is not a regular file)"
        )
    home = Path(tempfile.mkdtemp(prefix="credprovider-signing-"))
    try:
        home.chmod(0o700)
        imported = subprocess.run(
            ["gpg", "--homedir", str(home), "--batch", "--import", str(key_file)],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        listed = subprocess.run(
            ["gpg", "--homedir", str(home), "--batch", "--with-colons",
             "--list-secret-keys"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        fingerprints = [
            line.split(":")[9] for line in listed.stdout.splitlines() if line.startswith("fpr:")
        ]
        if imported.returncode != 0 or not fingerprints:
            raise SigningError(
                f"SIGNING_KEY {key_file} holds no OpenPGP secret key (export one with "
                "gpg --export-secret-keys --armor KEYID)"
            )
        found = Signer(home, fingerprints[0])
        probe = home / "probe"
        probe.write_bytes(b"credprovider\n")
        try:
            found.detach(probe)
        except SigningError:
            raise SigningError(
                f"SIGNING_KEY {key_file} cannot sign without a passphrase: export a key without "
                "one for the release (a subkey of its own, say)"
            ) from None
        yield found
    finally:
        stop_agent(home)
        shutil.rmtree(home, ignore_errors=True)


def stop_agent(home: Path) -> None:
    """The gpg-agent gpg started for the keyring ``home``, stopped (it outlives gpg, and would
    outlive the run)."""
    if shutil.which("gpgconf") is not None:
        subprocess.run(
            ["gpgconf", "--homedir", str(home), "--kill", "all"],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
