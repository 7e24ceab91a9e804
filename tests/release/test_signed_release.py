"""A release signed as an operator signs it (``python -m release sign --signing-key KEY``, what
``make release SIGNING_KEY=`` runs), with a throwaway key, on a copy of ``dist/release``; then
every verification docs/release.md shows, run with the standard tool it names: ``gpg --verify``
and ``sha256sum -c`` for SHA256SUMS, ``rpm -K`` for the .rpm files, gpg for the provenance and
the RPM repository's ``repomd.xml``, apt on Debian 11 following the apt repository from
``file://``, installing, then upgrading to a newer build, and dnf doing the same from the RPM
repository with both of its checks. Each passes on the release and fails on a changed byte."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.paths import PACKAGE_BIN_DIR
from release import bundle, distpackages, provenance, repo, toolchain
from release.signing import KEYRING, PUBLIC_KEY, signer, stop_agent
from release.targets import Target
from tests.release.conftest import missing
from tests.release.test_packages import EARLIER, release_of

RELEASE = bundle.REPO / "dist" / "release"
VERSION = bundle.project_version()


def gpg(home: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", *args],
        input=stdin, capture_output=True, timeout=120, check=False,
    )  # fmt: skip


def throwaway_key(directory: Path, passphrase: str = "") -> Path:
    """A fresh RSA signing key's secret half, armored (what an operator exports)."""
    home = directory / "keygen"
    home.mkdir(mode=0o700, parents=True)
    made = gpg(
        home, "--pinentry-mode", "loopback", "--passphrase", passphrase,
        "--quick-gen-key", "credprovider test release <release@example.invalid>",
        "rsa3072", "sign", "never",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr.decode()
    exported = gpg(
        home, "--pinentry-mode", "loopback", "--passphrase", passphrase, "--armor",
        "--export-secret-keys",
    )  # fmt: skip
    key = directory / "secret.asc"
    key.write_bytes(exported.stdout)
    return key


def release_copy(directory: Path) -> Path:
    """``dist/release`` as signing finds it, in ``directory``: what signing rewrites (the .rpm
    files, SHA256SUMS) copied, the rest linked."""
    if not (RELEASE / "SHA256SUMS").exists():
        missing(
            "the release", os.uname().machine.replace("x86_64", "amd64").replace("aarch64", "arm64")
        )
    if (RELEASE / "SHA256SUMS.asc").exists():
        pytest.skip("dist/release is signed already: these tests sign an unsigned one")
    copy = directory / "release"
    copy.mkdir()
    for path in RELEASE.iterdir():
        if path.is_file():
            if path.suffix == ".rpm" or path.name == "SHA256SUMS":
                shutil.copyfile(path, copy / path.name)
            else:
                os.link(path, copy / path.name)
    return copy


def changed(path: Path, at: int = -100) -> Path:
    """A copy of ``path`` with one byte changed."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    target = path.with_name(path.name + ".changed")
    target.write_bytes(bytes(data))
    return target


def stop_agents(directory: Path) -> None:
    """Every gpg-agent a keyring under ``directory`` started (the tests' keys, dnf's), stopped."""
    homes = {
        found.parent for name in ("pubring.kbx", "trustdb.gpg") for found in directory.rglob(name)
    }
    for home in homes:
        stop_agent(home)


@pytest.fixture(autouse=True)
def no_agent_left(tmp_path: Path) -> Iterator[None]:
    yield
    stop_agents(tmp_path)


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("signed")
    copy = release_copy(tmp)
    key = throwaway_key(tmp)
    done = subprocess.run(
        [sys.executable, "-m", "release", "sign", "--out", str(copy), "--signing-key", str(key)],
        cwd=bundle.REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    yield copy
    stop_agents(tmp)


def verifier(directory: Path, release: Path) -> Path:
    """A fresh keyring holding only the release's public key, as docs/release.md makes one."""
    home = directory / "verify-gnupg"
    home.mkdir(mode=0o700)
    imported = gpg(home, "--import", str(release / PUBLIC_KEY))
    assert imported.returncode == 0, imported.stderr.decode()
    return home


def test_sha256sums_is_signed_and_names_every_artifact(signed: Path, tmp_path: Path) -> None:
    home = verifier(tmp_path, signed)
    good = gpg(home, "--verify", str(signed / "SHA256SUMS.asc"), str(signed / "SHA256SUMS"))
    assert good.returncode == 0 and b"Good signature" in good.stderr, good.stderr.decode()
    checked = subprocess.run(
        ["sha256sum", "--check", "SHA256SUMS"], cwd=signed, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    names = {line.split("  ")[1] for line in (signed / "SHA256SUMS").read_text().splitlines()}
    assert provenance.name(VERSION) in names and PUBLIC_KEY in names
    assert {p.name for p in signed.glob("*.rpm")} <= names
    # a changed byte in SHA256SUMS: the signature fails
    bad = changed(signed / "SHA256SUMS", at=10)
    refused = gpg(home, "--verify", str(signed / "SHA256SUMS.asc"), str(bad))
    assert refused.returncode != 0 and b"BAD signature" in refused.stderr
    # a changed byte in an artifact: sha256sum fails
    work = tmp_path / "one"
    work.mkdir()
    shutil.copyfile(signed / "SHA256SUMS", work / "SHA256SUMS")
    [chart] = signed.glob("credprovider-*.tgz")
    shutil.copyfile(changed(chart), work / chart.name)
    failed = subprocess.run(
        ["sha256sum", "--check", "--ignore-missing", "SHA256SUMS"], cwd=work,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert failed.returncode != 0 and f"{chart.name}: FAILED" in failed.stdout


def rpm_db(directory: Path, release: Path) -> list[str]:
    """rpm's arguments for a database of its own holding only the release's key."""
    db = directory / "rpmdb"
    db.mkdir()
    args = ["--dbpath", str(db)]
    imported = subprocess.run(
        ["rpm", *args, "--import", str(release / PUBLIC_KEY)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    return args


def test_each_rpm_carries_a_signature_rpm_checks(signed: Path, tmp_path: Path) -> None:
    db = rpm_db(tmp_path, signed)
    for rpm in sorted(signed.glob("*.rpm")):
        checked = subprocess.run(
            ["rpm", *db, "-K", str(rpm)], capture_output=True, text=True, timeout=120, check=False
        )
        assert checked.returncode == 0 and "signatures OK" in checked.stdout, checked.stdout
        tampered = subprocess.run(
            ["rpm", *db, "-K", str(changed(rpm))],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert tampered.returncode != 0, tampered.stdout
    # the unsigned package of the same build is not taken for a signed one
    [unsigned] = sorted(RELEASE.glob("*.x86_64.rpm"))[:1] or [next(RELEASE.glob("*.rpm"))]
    plain = subprocess.run(
        ["rpm", *db, "-K", str(unsigned)], capture_output=True, text=True, timeout=120, check=False
    )
    assert "signatures OK" not in plain.stdout


def test_the_provenance_names_the_commit_the_inputs_and_every_artifact(
    signed: Path, tmp_path: Path
) -> None:
    statement_path = signed / provenance.name(VERSION)
    home = verifier(tmp_path, signed)
    good = gpg(home, "--verify", str(statement_path) + ".asc", str(statement_path))
    assert good.returncode == 0, good.stderr.decode()
    bad = gpg(home, "--verify", str(statement_path) + ".asc", str(changed(statement_path)))
    assert bad.returncode != 0
    statement = json.loads(statement_path.read_text())
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    listed = {
        line.split("  ")[1]: line.split("  ")[0]
        for line in (signed / "SHA256SUMS").read_text().splitlines()
    }
    # every artifact of the release, by the digest SHA256SUMS gives (the signed .rpm files')
    assert subjects == {
        name: digest
        for name, digest in listed.items()
        if name not in (provenance.name(VERSION), PUBLIC_KEY, KEYRING)
    }
    build = statement["predicate"]["buildDefinition"]
    commit = build["externalParameters"]["source"]["digest"]["gitCommit"]
    # the commit the bundles were built from (recorded beside each)
    from release import package

    assert commit == bundle.recorded_info(package.bundle_dir(_targets()[0].arch)).commit
    uris = [d["uri"] for d in build["resolvedDependencies"]]
    locked = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (bundle.REPO / "release/requirements.lock")
                        .read_text(), re.M)  # fmt: skip
    for name, version in locked:
        assert f"pkg:pypi/{re.sub(r'[-_.]+', '-', name).lower()}@{version}" in uris
    assert any(u.startswith("pkg:deb/debian/libc6@") for u in uris)
    assert any(u.startswith("pkg:deb/debian/openssl@") and "arch=source" in u for u in uris)
    assert any(u.startswith("pkg:golang/go@go") for u in uris)
    # the compiler of the interpreter and the pip that installed the wheels, as pinned
    assert f"pkg:pypi/ziglang@{toolchain.ZIG_VERSION}" in uris
    makefile_pip = re.search(r"^PIP := pip==(\S+)$", (bundle.REPO / "Makefile").read_text(), re.M)
    assert makefile_pip is not None and f"pkg:pypi/pip@{makefile_pip.group(1)}" in uris


def _targets() -> list[Target]:
    from release.targets import TARGETS

    return [TARGETS[name] for name in sorted(TARGETS)]


def test_the_rpm_repository_is_signed_and_lists_the_signed_packages(
    signed: Path, tmp_path: Path
) -> None:
    repodata = signed / "repo" / "rpm" / "repodata"
    home = verifier(tmp_path, signed)
    good = gpg(home, "--verify", str(repodata / "repomd.xml.asc"), str(repodata / "repomd.xml"))
    assert good.returncode == 0, good.stderr.decode()
    bad = gpg(
        home, "--verify", str(repodata / "repomd.xml.asc"), str(changed(repodata / "repomd.xml"))
    )
    assert bad.returncode != 0
    primary = gzip.decompress((repodata / "primary.xml.gz").read_bytes()).decode()
    for rpm in sorted(signed.glob("*.rpm")):
        digest = hashlib.sha256(rpm.read_bytes()).hexdigest()
        assert f'<checksum type="sha256" pkgid="YES">{digest}</checksum>' in primary
        assert f'<location href="{rpm.name}"/>' in primary
    # repomd.xml names primary.xml.gz by the digest it has
    repomd = (repodata / "repomd.xml").read_text()
    assert hashlib.sha256((repodata / "primary.xml.gz").read_bytes()).hexdigest() in repomd


def test_a_key_that_cannot_sign_is_one_line(tmp_path: Path) -> None:
    copy = release_copy(tmp_path)
    before = {p.name: p.read_bytes() for p in copy.glob("*.rpm")}
    protected = throwaway_key(tmp_path / "protected", passphrase="secret")
    public = tmp_path / "public.asc"
    public.write_bytes(gpg(tmp_path / "protected" / "keygen", "--armor", "--export").stdout)
    fifo = tmp_path / "key.fifo"  # gpg would wait on it for ever
    os.mkfifo(fifo)
    for key, said in (
        (protected, "cannot sign without a passphrase"),
        (public, "holds no OpenPGP secret key"),
        (tmp_path / "absent.asc", "holds no OpenPGP secret key (it is not a regular file)"),
        (fifo, "holds no OpenPGP secret key (it is not a regular file)"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "release", "sign", "--out", str(copy), "--signing-key",
             str(key)],
            cwd=bundle.REPO, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("release sign: SIGNING_KEY ") and said in done.stderr
        assert "Traceback" not in done.stderr
    assert {p.name: p.read_bytes() for p in copy.glob("*.rpm")} == before  # nothing signed


def test_the_release_writes_the_same_repositories_again(tmp_path: Path) -> None:
    """The repositories and provenance are written from the artifacts and the commit alone."""
    copy = release_copy(tmp_path)
    for path in ("repo",):
        assert (RELEASE / path).is_dir()
    artifacts = [copy / name for name in _listed(copy)]
    from release import publish

    publish.publish(copy, artifacts, publish.recorded(RELEASE))
    for made in sorted((RELEASE / "repo").rglob("*")):
        if made.is_file():
            again = copy / "repo" / made.relative_to(RELEASE / "repo")
            assert again.read_bytes() == made.read_bytes(), made
    assert (copy / "SHA256SUMS").read_bytes() == (RELEASE / "SHA256SUMS").read_bytes()
    assert (copy / provenance.name(VERSION)).read_bytes() == (
        RELEASE / provenance.name(VERSION)
    ).read_bytes()


def _listed(release: Path) -> list[str]:
    from release import publish

    return [p.name for p in publish.listed(release)]


# ---- apt on Debian 11, from file:// ----


def earlier_package(target: Target, tmp_path: Path, suffix: str) -> Path:
    """The release's bundle packaged again as an earlier version (``.deb`` or ``.rpm``): what a
    node has installed before the release reaches its repository."""
    tree = tmp_path / "tree"
    tree.mkdir()
    tarball = RELEASE / f"credprovider-{VERSION}-linux-{target.arch}.tar.gz"
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(tree)], check=True, timeout=300)
    older = tmp_path / "older"
    older.mkdir()
    built = distpackages.build(
        tree / f"credprovider-{VERSION}", release_of(EARLIER, target.arch), older, 0
    )
    [package] = [p for p in built if p.suffix == suffix]
    return package


APT = [
    "/usr/bin/apt-get", "-q", "-y",
    "-o", "Dir::Etc::SourceList=/etc/apt/sources.list.d/credprovider.list",
    "-o", "Dir::Etc::SourceParts=/nonexistent",  # no other source: nothing leaves the machine
]  # fmt: skip


def test_apt_adds_the_repository_installs_and_upgrades_on_debian_11(
    target: Target, tmp_path: Path
) -> None:
    """An earlier build in the repository, installed; then the release's, taken by apt-get
    upgrade; a changed byte in Packages or in InRelease makes apt-get update refuse it."""
    from tests.release.nodes import Node, host_unchanged

    if target.arch != _machine():
        pytest.skip("apt runs for this machine's architecture")
    from release import rootfs

    copy = release_copy(tmp_path)
    key = throwaway_key(tmp_path)
    earlier_deb = earlier_package(target, tmp_path, ".deb")
    current_deb = copy / distpackages.deb_name(release_of(VERSION, target.arch))
    served = tmp_path / "served"  # what the node's sources.list names
    with signer(key) as sign:
        keyring = sign.export(tmp_path)[1]
        repo.apt_repository(served, [earlier_deb], 1700000000, sign)
        upper = tmp_path / "layers"
        upper.mkdir()
        with host_unchanged(Node(target, rootfs.rootfs_dir(target), upper)) as node:
            rootfs.ensure(target)
            placed = node.path(f"/etc/apt/keyrings/{KEYRING}")
            placed.parent.mkdir(parents=True)
            shutil.copyfile(keyring, placed)
            listing = node.path("/etc/apt/sources.list.d/credprovider.list")
            listing.parent.mkdir(parents=True, exist_ok=True)
            listing.write_text(
                f"deb [signed-by=/etc/apt/keyrings/{KEYRING}] file://{served} stable main\n"
            )

            def apt(*args: str) -> subprocess.CompletedProcess[bytes]:
                # the host's /tmp is there read-only (the repository lies in it)
                return node.run([*APT, *args], env={"TMPDIR": "/var/tmp"})

            def installed() -> str:
                done = node.run(["/usr/bin/dpkg-query", "-W", "-f=${Version}", "credprovider"])
                return done.stdout.decode()

            updated = apt("update")
            assert updated.returncode == 0, updated.stderr.decode()
            first = apt("install", "credprovider")
            assert first.returncode == 0, first.stderr.decode()
            assert installed() == EARLIER
            # the next release in the repository: apt-get upgrade takes it
            shutil.rmtree(served)
            repo.apt_repository(served, [earlier_deb, current_deb], 1700000100, sign)
            assert apt("update").returncode == 0
            upgraded = apt("upgrade")
            assert upgraded.returncode == 0, upgraded.stderr.decode()
            assert installed() == VERSION
            # a changed byte in Packages: refused (its hash is not the one InRelease signs)
            packages = served / "dists/stable/main" / f"binary-{target.arch}" / "Packages"
            for index in (packages, packages.with_name("Packages.gz")):
                shutil.copyfile(index, index.with_name(index.name + ".good"))
            # (a version that parses: what a forger would offer), to a node that has no lists
            # yet (one that has them and an unchanged InRelease does not read Packages again)
            node.run(["/bin/sh", "-c", "rm -rf /var/lib/apt/lists/*"])
            forged = packages.read_text().replace(f"Version: {VERSION}", "Version: 9.9.9")
            packages.write_text(forged)
            packages.with_name("Packages.gz").write_bytes(gzip.compress(packages.read_bytes()))
            refused = apt("update")
            said = (refused.stdout + refused.stderr).decode()
            assert "Hash Sum mismatch" in said or "File has unexpected size" in said, said
            offered = node.run(["/usr/bin/apt-cache", "policy", "credprovider"]).stdout.decode()
            assert "9.9.9" not in offered, offered
            # a changed byte in InRelease: its signature fails
            for index in (packages, packages.with_name("Packages.gz")):
                shutil.copyfile(index.with_name(index.name + ".good"), index)
            inrelease = served / "dists/stable/InRelease"
            text = inrelease.read_text().replace("Label: credprovider", "Label: credprovideR")
            inrelease.write_text(text)
            (served / "dists/stable/Release.gpg").unlink()
            forged = apt("update")
            said = (forged.stdout + forged.stderr).decode()
            assert "NO_PUBKEY" in said or "BADSIG" in said or "not signed" in said, said


def _machine() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]


def shell_package(directory: Path) -> Path:
    """A package providing ``/bin/sh`` (the root's busybox, which no package installed), for
    dnf's dependency check; recorded in the root's database only."""
    spec = directory / "node-shell.spec"
    spec.write_text(
        "Name: node-shell\nVersion: 1\nRelease: 1\nSummary: the node's /bin/sh\nLicense: none\n"
        "BuildArch: noarch\nProvides: /bin/sh\n%description\nbusybox's /bin/sh\n%files\n"
    )
    built = subprocess.run(
        ["rpmbuild", "-bb", "--define", f"_topdir {directory / 'rpmbuild'}", str(spec)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [package] = (directory / "rpmbuild" / "RPMS" / "noarch").glob("*.rpm")
    return package


def test_dnf_adds_the_repository_installs_and_upgrades_with_both_checks(
    target: Target, tmp_path: Path
) -> None:
    """docs/release.md's .repo file (gpgcheck and repo_gpgcheck, the key from the release) read by
    dnf into a root holding only busybox, with no network at all: an earlier build installed from
    the repository, then the release's taken by dnf upgrade; a changed byte in repomd.xml (its
    signature) or in a package (its digest) makes dnf refuse it."""
    from release.targets import target as target_of
    from tests.release.nodes import busybox_root

    if target.arch != _machine():
        pytest.skip("dnf installs this machine's architecture")
    if shutil.which("dnf") is None:
        missing("dnf (apt-get install dnf)", target.arch)
    copy = release_copy(tmp_path)
    key = throwaway_key(tmp_path)
    earlier = earlier_package(target, tmp_path, ".rpm")
    current = copy / distpackages.rpm_name(release_of(VERSION, target.arch))
    served = tmp_path / "served"
    root = busybox_root(target_of(target.arch), tmp_path / "root")
    for args in (["--initdb"], ["-i", "--justdb", "--nodeps", str(shell_package(tmp_path))]):
        made = subprocess.run(["rpm", "--root", str(root), *args], capture_output=True, timeout=60)
        assert made.returncode == 0, made.stderr
    (tmp_path / "dnf.conf").write_text("[main]\n")
    (tmp_path / "repos").mkdir()
    (tmp_path / "repos" / "credprovider.repo").write_text(
        f"[credprovider]\nname=credprovider\nbaseurl=file://{served}\ngpgcheck=1\n"
        f"repo_gpgcheck=1\ngpgkey=file://{tmp_path / PUBLIC_KEY}\n"
    )  # docs/release.md's, with file:// for https://

    def dnf(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["unshare", "--net", "dnf", "-y", "--installroot", str(root), "--releasever", "1",
             "--config", str(tmp_path / "dnf.conf"), "--setopt", f"reposdir={tmp_path / 'repos'}",
             *args],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip

    def installed() -> str:
        query = ["rpm", "--root", str(root), "-q", "--qf", "%{VERSION}", "credprovider"]
        done = subprocess.run(query, capture_output=True, text=True, timeout=60)
        return done.stdout if done.returncode == 0 else ""

    with signer(key) as sign:
        sign.export(tmp_path)
        for package in (earlier, current):
            sign.sign_rpm(package)
        repo.rpm_repository(served, [earlier], 1700000000, sign)
        first = dnf("install", "credprovider")
        assert first.returncode == 0, first.stderr
        assert installed() == EARLIER
        assert (root / PACKAGE_BIN_DIR.lstrip("/") / "ecr-credential-provider").is_symlink()
        shutil.rmtree(served)  # the next release in the repository: dnf upgrade takes it
        repo.rpm_repository(served, [earlier, current], 1700000100, sign)
        upgraded = dnf("--refresh", "upgrade", "credprovider")
        assert upgraded.returncode == 0, upgraded.stderr
        assert installed() == VERSION
        # a changed byte in repomd.xml: its signature fails, nothing is read from the repository
        repomd = served / "repodata" / "repomd.xml"
        good = repomd.read_bytes()
        repomd.write_bytes(good.replace(b"<revision>", b"<revisioN>", 1))
        refused = dnf("--refresh", "makecache")
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "GPG signature verification error" in said, said
        # a changed byte in a package the signed metadata lists: its digest fails
        repomd.write_bytes(good)
        assert dnf("remove", "credprovider").returncode == 0
        changed_package = served / current.name
        shutil.copyfile(changed(current, at=-4096), changed_package)
        bad = dnf("--refresh", "install", "credprovider")
        said = bad.stdout + bad.stderr
        assert bad.returncode != 0 and installed() == "", said
        assert "has incorrect checksum" in said, said
