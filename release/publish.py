"""What makes the built artifacts a release operators can verify and follow: the package
repositories (release/repo.py), the provenance (release/provenance.py) and ``SHA256SUMS`` over
it all, then, with the operator's key (``make release SIGNING_KEY=key.asc``, release/signing.py),
the signatures: each ``.rpm``'s own, the repositories', ``SHA256SUMS.asc`` and the provenance's.

``release artifacts`` ends here unsigned; ``release sign`` runs it again over the release's own
``SHA256SUMS`` list with the key, so a release built once can be signed afterwards.
"""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Final

from release import bundle, provenance, repo
from release.signing import KEYRING, PUBLIC_KEY, signer
from release.sources import sha256_file

SUMS: Final = "SHA256SUMS"
REPO: Final = "repo"


def digests(files: list[Path]) -> dict[str, str]:
    """Each file's name and sha256, in name order."""
    return {path.name: sha256_file(path) for path in sorted(files, key=lambda p: p.name)}


def write_checksums(out: Path, named: dict[str, str]) -> Path:
    sums = out / SUMS
    sums.write_text("".join(f"{digest}  {name}\n" for name, digest in sorted(named.items())))
    return sums


def read_checksums(release: Path) -> dict[str, str]:
    """A release's ``SHA256SUMS``: each name and its sha256."""
    found = {}
    for line in (release / SUMS).read_text().splitlines():
        digest, _, name = line.partition("  ")
        if name:
            found[name] = digest
    return found


def listed(out: Path) -> list[Path]:
    """The artifacts an earlier run listed in ``SHA256SUMS`` (not what this step writes)."""
    ours = {PUBLIC_KEY, KEYRING}
    return [
        out / name
        for name in read_checksums(out)
        if name not in ours and not name.endswith(".intoto.json")
    ]


def recorded(out: Path) -> bundle.BuildInfo:
    """The commit, time and version a release was built with, from its provenance."""
    found = sorted(out.glob("*.intoto.json"))
    if len(found) != 1:
        raise ValueError(
            f"{out} holds no one provenance statement: run python -m release artifacts"
        )
    predicate = json.loads(found[0].read_text())["predicate"]
    build = predicate["buildDefinition"]
    return bundle.BuildInfo(
        version=build["externalParameters"]["version"],
        commit=build["externalParameters"]["source"]["digest"]["gitCommit"],
        built=predicate["runDetails"]["metadata"]["startedOn"],
        epoch=build["internalParameters"]["SOURCE_DATE_EPOCH"],
        arch="",
    )


def publish(
    out: Path, artifacts: list[Path], info: bundle.BuildInfo, key: Path | None = None
) -> Path:
    """Repositories, provenance, ``SHA256SUMS`` and, with ``key``, every signature; ``info``:
    the commit and time the artifacts' bundles were built from."""
    for stale in (out / f"{SUMS}.asc", out / PUBLIC_KEY, out / KEYRING):
        stale.unlink(missing_ok=True)
    shutil.rmtree(out / REPO, ignore_errors=True)
    with signer(key) if key is not None else nullcontext() as sign:
        keys = sign.export(out) if sign is not None else []
        debs = [path for path in artifacts if path.suffix == ".deb"]
        rpms = [path for path in artifacts if path.suffix == ".rpm"]
        if sign is not None:
            for rpm in rpms:
                sign.sign_rpm(rpm)
        apt = repo.apt_repository(out / REPO / "apt", debs, info.epoch, sign)
        rpm_repo = repo.rpm_repository(out / REPO / "rpm", rpms, info.epoch, sign)
        for path in keys:  # beside each repository, as its users fetch it
            shutil.copyfile(path, out / REPO / path.name)
        named = digests(artifacts)  # after the .rpm files' signatures
        statement = provenance.write(out, named, info)
        sums = write_checksums(out, named | digests([statement, *keys]))
        if sign is not None:
            sign.detach(statement)
            sign.detach(sums)
    for path in (*apt, *rpm_repo):
        sys.stderr.write(f"[release] {path.relative_to(out)}\n")
    sys.stderr.write(f"[release] {sums}{' (signed)' if key is not None else ''}\n")
    return sums
