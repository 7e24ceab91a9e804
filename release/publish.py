"""What makes the built artifacts a release operators can verify and follow: the package
repositories (release/repo.py), the provenance (release/provenance.py) and ``SHA256SUMS`` over
it all, then, with the operator's key (``make release SIGNING_KEY=key.asc``, release/signing.py),
the signatures: each ``.rpm``'s own, the repositories', ``SHA256SUMS.asc`` and the provenance's.

``release artifacts`` ends here unsigned; ``release sign`` runs it again over the release's own
``SHA256SUMS`` list with the key, so a release built once can be signed afterwards.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Final

from release import bundle, provenance, repo
from release.signing import KEYRING, PUBLIC_KEY, Signer, signer

SUMS: Final = "SHA256SUMS"
REPO: Final = "repo"


def write_checksums(out: Path, files: list[Path]) -> Path:
    lines = [
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}"
        for path in sorted(files, key=lambda p: p.name)
    ]
    sums = out / SUMS
    sums.write_text("\n".join(lines) + "\n")
    return sums


def listed(out: Path) -> list[Path]:
    """The artifacts an earlier run listed in ``SHA256SUMS`` (not what this step writes)."""
    names = [line.split("  ", 1)[1] for line in (out / SUMS).read_text().splitlines() if line]
    ours = {PUBLIC_KEY, KEYRING}
    return [out / n for n in names if n not in ours and not n.endswith(".intoto.json")]


def recorded(out: Path) -> bundle.BuildInfo:
    """The commit, time and version a release was built with, from its provenance."""
    import json

    found = sorted(out.glob("*.intoto.json"))
    if len(found) != 1:
        raise ValueError(
            f"{out} holds no one provenance statement: run python -m release artifacts"
        )
    statement = found[0]
    build = json.loads(statement.read_text())["predicate"]["buildDefinition"]
    return bundle.BuildInfo(
        version=build["externalParameters"]["version"],
        commit=build["externalParameters"]["source"]["digest"]["gitCommit"],
        built=json.loads(statement.read_text())["predicate"]["runDetails"]["metadata"]["startedOn"],
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
        keys = _keys(out, sign)
        debs = [path for path in artifacts if path.suffix == ".deb"]
        rpms = [path for path in artifacts if path.suffix == ".rpm"]
        if sign is not None:
            for rpm in rpms:
                sign.sign_rpm(rpm)
        apt = repo.apt_repository(out / REPO / "apt", debs, info.epoch, sign)
        rpm_repo = repo.rpm_repository(out / REPO / "rpm", rpms, info.epoch, sign)
        for path in keys:  # beside each repository, as its users fetch it
            shutil.copyfile(path, out / REPO / path.name)
        statement = provenance.write(out, artifacts, info)
        sums = write_checksums(out, [*artifacts, statement, *keys])
        if sign is not None:
            sign.detach(statement)
            sign.detach(sums)
    for path in (*apt, *rpm_repo):
        sys.stderr.write(f"[release] {path.relative_to(out)}\n")
    sys.stderr.write(f"[release] {sums}{' (signed)' if key is not None else ''}\n")
    return sums


def _keys(out: Path, sign: Signer | None) -> list[Path]:
    return sign.export(out) if sign is not None else []
