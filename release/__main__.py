"""``python -m release``: build portable bundles and release artifacts (make build / make release).

    python -m release bundle [--arch ARCH] [--out DIR]   one bundle (default: this machine's arch,
                                                        into dist/credprovider)
    python -m release artifacts [--arch ARCH ...]         tarballs, SBOMs and SHA256SUMS in dist/release
    python -m release sign --signing-key KEY              signatures over dist/release
    python -m release reproduce [--arch ARCH ...]         build it again, compare byte for byte
    python -m release check-elf DIR ARCH                 the portability rules on a bundle
    python -m release fetch-debs [--arch ARCH ...]        the pinned Debian packages the tests use
                                                        (busybox-static), into the cache
    python -m release push --registry HOST/REPO           the OCI image archive of dist/release,
        [--cosign-key KEY]                              pushed as :<version> (make release REGISTRY=),
                                                        signed with cosign (COSIGN_KEY=)

Built interpreters, root filesystems and wheels are cached in $CREDPROVIDER_BUILD_CACHE
(default ~/.cache/credprovider-build), keyed by their recipe. Needs root (chroot, namespaces),
debootstrap, and qemu-user-static for arm64 on amd64.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Final

from release import bundle, elfcheck, image, oci
from release.targets import TARGETS, host_target, target

RELEASE_DIR: Final = bundle.REPO / "dist" / "release"


def _arch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--arch",
        action="append",
        choices=sorted(TARGETS),
        help="only these targets (repeatable; default: all)",
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m release",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("bundle", help="build one portable bundle")
    one.add_argument(
        "--arch",
        choices=sorted(TARGETS),
        default=host_target().arch,
        help="target (default: this machine's, %(default)s)",
    )
    one.add_argument(
        "--out",
        type=Path,
        default=bundle.BUNDLE_DIR,
        help="bundle directory (default: %(default)s)",
    )
    artifacts = sub.add_parser("artifacts", help="tarballs, SBOMs and SHA256SUMS for every target")
    _arch_option(artifacts)
    artifacts.add_argument(
        "--out",
        type=Path,
        default=RELEASE_DIR,
        help="output directory (default: %(default)s)",
    )
    sign = sub.add_parser(
        "sign",
        help="sign a built release with an OpenPGP key: its .rpm files, repositories, "
        "provenance and SHA256SUMS (make release SIGNING_KEY=key.asc)",
    )
    sign.add_argument(
        "--signing-key",
        type=Path,
        required=True,
        help="an ASCII-armored OpenPGP secret key without a passphrase (gpg --export-secret-keys "
        "--armor KEYID)",
    )
    sign.add_argument(
        "--out",
        type=Path,
        default=RELEASE_DIR,
        help="the release directory (default: %(default)s)",
    )
    again = sub.add_parser(
        "reproduce",
        help="build the release again into dist/reproduce and compare it with dist/release byte "
        "for byte (make reproduce)",
    )
    _arch_option(again)
    push = sub.add_parser(
        "push",
        help="push the release's OCI image (every architecture and their index)",
        description="Basic auth from CREDPROVIDER_REGISTRY_AUTH (user:password) when set; for "
        "registries that need a token, use: skopeo copy oci-archive:ARCHIVE docker://HOST/REPO:TAG",
    )
    push.add_argument("--registry", required=True, help="host[:port]/repository")
    push.add_argument(
        "--archive",
        type=Path,
        default=RELEASE_DIR / image.archive_name(bundle.project_version()),
        help="OCI layout archive (default: %(default)s)",
    )
    push.add_argument("--tag", default=bundle.project_version(), help="tag (default: %(default)s)")
    push.add_argument(
        "--cosign-key",
        type=Path,
        help="sign the pushed image (and each architecture's) with this cosign private key, its "
        "password in COSIGN_PASSWORD; the signature is stored beside the image (make release "
        "COSIGN_KEY=cosign.key; default: not signed)",
    )
    check = sub.add_parser(
        "check-elf", help="check a bundle's ELF files against the portability rules"
    )
    check.add_argument("dir", type=Path)
    check.add_argument("arch", choices=sorted(TARGETS))
    fetch = sub.add_parser(
        "fetch-debs", help="the pinned Debian packages (release/debs.lock.json), into the cache"
    )
    _arch_option(fetch)
    sub.add_parser(
        "go-tools",
        help="every Go binary the tests run (the kubelet, the control plane, containerd, the "
        "registry, crictl, Helm, cosign), built into the cache where missing",
    )
    args = parser.parse_args(argv)
    if args.command == "bundle":
        bundle.build(target(args.arch), args.out)
    elif args.command == "artifacts":
        from release import package

        package.release(args.arch or sorted(TARGETS), args.out)
    elif args.command == "sign":
        from release import publish
        from release.signing import SigningError

        try:
            publish.publish(
                args.out, publish.listed(args.out), publish.recorded(args.out), args.signing_key
            )
        except (OSError, ValueError, KeyError, SigningError) as exc:
            sys.stderr.write(f"release sign: {exc}\n")
            return 1
    elif args.command == "reproduce":
        from release import reproduce

        return reproduce.main(args.arch)
    elif args.command == "fetch-debs":
        from release import debs

        debs.fetch_all(args.arch or sorted(TARGETS))
    elif args.command == "go-tools":
        from release import gobuild

        try:
            built = gobuild.build_all()
        except gobuild.GoBuildError as exc:
            sys.stderr.write(f"release go-tools: {exc}\n")
            return 1
        sys.stderr.write(f"[release] {len(built)} Go binaries in {built[0].parent.parent}\n")
    elif args.command == "push":
        auth = os.environ.get("CREDPROVIDER_REGISTRY_AUTH", "")
        from release import cosign

        try:
            if args.cosign_key is not None:
                cosign.ready(args.cosign_key)  # before anything is pushed
            digest = image.push(args.archive, args.registry, args.tag, auth)
            sys.stderr.write(f"[release] pushed {args.registry}:{args.tag} ({digest})\n")
            if args.cosign_key is not None:
                cosign.sign(args.cosign_key, args.registry, digest, auth)
                sys.stderr.write(f"[release] signed {args.registry}@{digest} with cosign\n")
        except (OSError, oci.PushError, cosign.CosignError) as exc:
            sys.stderr.write(f"release push: {exc}\n")
            return 1
    else:
        return elfcheck.main([str(args.dir), args.arch])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
