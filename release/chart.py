"""The fleet chart in the release: ``charts/credprovider`` packaged as Helm packages it
(``credprovider-<version>.tgz``, the chart directory under ``credprovider/``, byte-reproducible),
and its plain manifests for ``kubectl apply``, one file per mode, rendered by Helm (built from the Go
module proxy, cached) with the release's image pinned by the digest of its multi-architecture index.
The manifests name the image ``credprovider@sha256:...``: push the OCI archive to a registry of
yours (``make release REGISTRY=host/repo``) and put that repository in front of the ``@``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

from release import bundle, tarball

CHART: Final = bundle.REPO / "charts" / "credprovider"
NAMESPACE: Final = "kube-system"
MODES: Final = ("files", "flags")
# The Kubernetes the plain manifests are rendered for: the oldest whose service-account tokens name
# their pod's node, which the own-node admission policy of mode flags reads.
KUBE_VERSION: Final = "1.32.0"
# The platform the plain manifest of mode flags is rendered for (the chart's flags.platform): the
# most common layout of nodes whose kubelet flags are the operator's to set.
FLAGS_PLATFORM: Final = "kubeadm"


def package_name(version: str) -> str:
    return f"credprovider-{version}.tgz"


def manifests_name(version: str, mode: str) -> str:
    return f"credprovider-{version}-manifests-{mode}.yaml"


def package(out: Path, version: str, epoch: int) -> Path:
    """The chart as ``helm package`` lays it out (every file under ``credprovider/``)."""
    target = out / package_name(version)
    files = sorted(path for path in CHART.rglob("*") if path.is_file())
    tarball.write(
        target,
        [(path, f"credprovider/{path.relative_to(CHART).as_posix()}") for path in files],
        epoch,
    )
    return target


def helm() -> Path:
    """Helm from the Go module proxy (the version the chart's tests use), built once."""
    from release import gobuild

    return gobuild.released(gobuild.HELM)


def manifests(out: Path, version: str, index_digest: str, providers: str = "aws") -> list[Path]:
    """The chart rendered for ``kubectl apply``: one file per mode, the image by digest."""
    written = []
    for mode in MODES:
        done = subprocess.run(
            [
                # no hooks: kubectl apply would run helm uninstall's pre-delete Job at once
                str(helm()), "template", "credprovider", str(CHART), "--namespace", NAMESPACE,
                "--kube-version", KUBE_VERSION, "--no-hooks",
                "--set", "image.repository=credprovider", "--set", f"image.digest={index_digest}",
                "--set", f"mode={mode}", "--set", f"providers={{{providers}}}",
                *(["--set", f"flags.platform={FLAGS_PLATFORM}"] if mode == "flags" else []),
            ],
            capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        target = out / manifests_name(version, mode)
        target.write_text(
            f"# credprovider {version}, chart mode {mode}, providers {providers}, Kubernetes "
            f"{KUBE_VERSION}+: kubectl apply -f this file.\n"
            + (
                f"# Mode flags for {FLAGS_PLATFORM} nodes (flags.platform): for another platform, "
                "render the chart with\n# helm template --set flags.platform=... (docs/fleet.md).\n"
                if mode == "flags"
                else ""
            )
            + f"# First push credprovider-"
            f"{version}-oci.tar to your registry (make release REGISTRY=host/repo) and write that "
            "repository\n# in front of '@' in the image below (the digest stays). docs/fleet.md.\n"
            "# To remove it, apply it again with args --uninstall first (helm uninstall's hook does\n"
            "# that with the chart; this file has no hook), then kubectl delete -f this file.\n"
            + done.stdout
        )
        written.append(target)
    return written
