"""Builds what emulators/kubelet (one Go module, the emulators' Go source, every staging module pinned) provides: the kubelet
harness around the kubelet's credential-provider code, the real kubelet binary and the fake CRI.

Binaries are kept in the build cache (``~/.cache/credprovider-build/go/<digest>/``), keyed by every
source of the module, so a fresh clone on the same machine reuses them; Go's own module and build
caches (under the real HOME) make a rebuild after a change take about a minute instead of the ten
a cold kubelet build takes on 2 cores. Used by the test fixtures and by ``make bench``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from release.buildlock import one_builder
from release.native import cache_root

MODULE = Path(__file__).resolve().parent.parent / "emulators" / "kubelet"
HARNESS = "."
KUBELET = "k8s.io/kubernetes/cmd/kubelet"
FAKE_CRI = "./fakecri"
# The e2e sandbox's control plane, from the same module (go.mod's tool block pins them).
KUBE_APISERVER = "k8s.io/kubernetes/cmd/kube-apiserver"
# The fleet sandbox's DaemonSet controller (and the root CA config map its pods' tokens need), and
# the scheduler that binds a DaemonSet's pods to their nodes.
KUBE_CONTROLLER_MANAGER = "k8s.io/kubernetes/cmd/kube-controller-manager"
KUBE_SCHEDULER = "k8s.io/kubernetes/cmd/kube-scheduler"
ETCD = "go.etcd.io/etcd/server/v3"
# Go keeps its caches under HOME; the test session points HOME at an empty directory.
REAL_HOME = os.environ.get("HOME", "")


class GoBuildError(RuntimeError):
    """Go is missing, or a build failed."""


def kubelet_version() -> str:
    """The k8s.io/kubernetes version the module pins (``v1.36.4``)."""
    for line in (MODULE / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "k8s.io/kubernetes":
            return words[1]
    raise GoBuildError("emulators/kubelet/go.mod pins no k8s.io/kubernetes version")


def ldflags(package: str) -> list[str]:
    """The kubelet is stamped with its version as its release build is (``kubelet --version``
    says ``Kubernetes v1.36.4``, not ``v0.0.0-master``)."""
    if package not in (KUBELET, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER):
        return []
    version = kubelet_version()
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = "k8s.io/component-base/version"
    return [
        "-ldflags",
        f"-X {stamp}.gitVersion={version} -X {stamp}.gitMajor={major} -X {stamp}.gitMinor={minor}",
    ]


def module_digest() -> str:
    digest = hashlib.sha256()
    digest.update(repr(ldflags(KUBELET)).encode() + b"\0")
    for path in sorted(
        p for p in MODULE.rglob("*") if p.is_file() and p.suffix in (".go", ".mod", ".sum")
    ):
        digest.update(str(path.relative_to(MODULE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _go(args: list[str], env: dict[str, str], timeout: float, cwd: Path | None = None) -> None:
    """Run ``go ARGS`` with Go's caches under the real HOME; raise :class:`GoBuildError` if Go is
    missing or the command fails."""
    go = shutil.which("go")
    if go is None:
        raise GoBuildError(
            "Go >= 1.26 is needed to build emulators/kubelet (the real kubelet code) and crictl"
        )
    proc = subprocess.run(
        [go, *args],
        cwd=cwd,
        env={**os.environ, "CGO_ENABLED": "0", "HOME": REAL_HOME, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise GoBuildError(f"go {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


@contextmanager
def _one_builder(target: Path) -> Iterator[bool]:
    """Held while ``target`` is built (release/buildlock.py); yields whether it still has to
    be."""
    with one_builder(target.with_name(target.name + ".lock")):
        yield not target.exists()


def binary(package: str, name: str, timeout: float = 1800) -> Path:
    """``go build`` ``package`` of the module (once per module digest); the binary's path."""
    target = cache_root() / "go" / module_digest() / name
    if target.exists():
        return target
    with _one_builder(target) as needed:
        if needed:
            partial = target.with_suffix(".partial")
            _go(
                ["build", *ldflags(package), "-o", str(partial), package],
                {"GOFLAGS": "-mod=mod"},
                timeout,
                cwd=MODULE,
            )
            partial.replace(target)
    return target


# Released tools, built from the Go module proxy at pinned versions (not part of the module): each
# is its packages (installed together, the first one's name naming the set) and a version.
CRICTL = (("sigs.k8s.io/cri-tools/cmd/crictl",), "v1.34.0")
# The real-runtime sandbox (tests/e2e/runtime.py): Kubernetes 1.36 needs containerd 2.x (Debian's is
# 1.6), and distribution is the registry server behind each cloud's auth front.
CONTAINERD = (
    (
        "github.com/containerd/containerd/v2/cmd/containerd",
        "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        "github.com/containerd/containerd/v2/cmd/ctr",
    ),
    "v2.4.2",
)
REGISTRY = (("github.com/distribution/distribution/v3/cmd/registry",), "v3.1.2")
# The fleet chart's linting and rendering (charts/credprovider).
HELM = (("helm.sh/helm/v3/cmd/helm",), "v3.22.0")
# The OCI image's signature (make release COSIGN_KEY=...), and its verification in the tests.
COSIGN = (("github.com/sigstore/cosign/v2/cmd/cosign",), "v2.6.5")


def released(tool: tuple[tuple[str, ...], str], timeout: float = 1800) -> Path:
    """``go install PACKAGE...@VERSION`` into the build cache (once per version); the first
    package's binary (the others lie beside it)."""
    packages, version = tool
    name = packages[0].rsplit("/", 1)[1]
    directory = cache_root() / "go" / f"{name}-{version}"
    target = directory / name
    if target.exists():
        return target
    with _one_builder(target) as needed:
        if needed:
            partial = directory / "partial"
            partial.mkdir(parents=True, exist_ok=True)
            _go(
                ["install", *(f"{package}@{version}" for package in packages)],
                {"GOFLAGS": "", "GOBIN": str(partial)},
                timeout,
            )
            for package in packages[1:]:
                other = package.rsplit("/", 1)[1]
                (partial / other).replace(directory / other)
            (partial / name).replace(target)
    return target


# Everything the suite builds with Go: the module's binaries (package, name) and the released tools.
MODULE_BINARIES = (
    (HARNESS, "kubelet-harness"),
    (KUBELET, "kubelet"),
    (FAKE_CRI, "fakecri"),
    (ETCD, "etcd"),
    (KUBE_APISERVER, "kube-apiserver"),
    (KUBE_CONTROLLER_MANAGER, "kube-controller-manager"),
    (KUBE_SCHEDULER, "kube-scheduler"),
)
RELEASED_TOOLS = (CRICTL, CONTAINERD, REGISTRY, HELM, COSIGN)


def build_all() -> list[Path]:
    """Every Go binary the suite needs, built where missing (``make go-tools``: make test builds
    them beside the bundles, not one by one in the tests that first need them)."""
    built = [binary(package, name) for package, name in MODULE_BINARIES]
    return built + [released(tool) for tool in RELEASED_TOOLS]
