"""Facts about the running kubelet that doctor and the agent both read: its version (its own
binary, ``/proc/PID/exe --version``), the hash of the credential provider config it loaded
(``kubelet_credential_provider_config_info{hash}``) and the defaults that depend on its version.

Pure but for :func:`kubelet_version`, which runs the binary bounded in time and output.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Final

from credprovider.runtime.child import run_bounded
from credprovider.tool.node.kubelet_proc import KUBELET_NAME, KubeletProcess
from credprovider.tool.node.layouts import KUBELET_BINARIES

VERSION_TIMEOUT_SECONDS: Final = 5.0
CONFIG_INFO_METRIC: Final = "kubelet_credential_provider_config_info"
# A config directory (--image-credential-provider-config naming a directory) and service account
# tokens for plugins on by default (KubeletServiceAccountTokenForCredentialProviders, beta).
CONFIG_DIRECTORY_SINCE: Final = (1, 34)
SA_TOKENS_ON_SINCE: Final = (1, 34)
SA_TOKEN_GATE: Final = "KubeletServiceAccountTokenForCredentialProviders"
# KEP-2395: from 1.31 the kubelet has no built-in cloud provider (--cloud-provider takes only
# "external" or nothing) and the gate that turned off the built-in registry logins is locked on;
# the gate is gone after 1.32.
BUILT_IN_CLOUDS_GONE_SINCE: Final = (1, 31)
CLOUD_LOGIN_GATE: Final = "DisableKubeletCloudCredentialProviders"
CLOUD_LOGIN_GATE_GONE_AFTER: Final = (1, 32)
# The environment of every program the tool runs of the node's (the kubelet binary, journalctl,
# crictl).
SYSTEM_ENV: Final = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
_VERSION = re.compile(r"\bv(\d{1,9})\.(\d{1,9})\.(\d{1,9})(?!\d)\S*")
# A sample line is a few hundred bytes: a longer one is not read (nor can it cost a regex time).
_MAX_SAMPLE_LINE: Final = 4096


def config_hash(contents: Sequence[bytes]) -> str:
    """The kubelet's hash of its credential provider config (v1.34+): sha256 over each file, in
    the order it reads them, as a big-endian 64-bit length then the bytes."""
    digest = hashlib.sha256()
    for data in contents:
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return f"sha256:{digest.hexdigest()}"


def _sample_hash(line: str) -> str | None:
    """The ``hash`` label of one ``kubelet_credential_provider_config_info{...} 1`` sample line,
    parsed in one pass (no backtracking, whatever the line holds)."""
    prefix = CONFIG_INFO_METRIC + "{"
    if not line.startswith(prefix) or len(line) > _MAX_SAMPLE_LINE:
        return None
    labels, closed, value = line[len(prefix) :].partition("}")
    if not closed or value.strip() not in ("1", "1.0"):
        return None
    for label in labels.split(","):
        name, _, quoted = label.strip().partition("=")
        if name == "hash" and len(quoted) >= 2 and quoted[0] == quoted[-1] == '"':
            return quoted[1:-1]
    return None


def reported_config_hashes(metrics: str) -> list[str]:
    """Every ``hash`` the kubelet's ``kubelet_credential_provider_config_info`` samples name."""
    found = (_sample_hash(line) for line in metrics.splitlines())
    return [value for value in found if value is not None]


def parse_version(text: str) -> tuple[str, tuple[int, int]] | None:
    """``Kubernetes v1.36.4`` -> ``("v1.36.4", (1, 36))``."""
    match = _VERSION.search(text)
    if match is None:
        return None
    return match.group(0), (int(match.group(1)), int(match.group(2)))


def kubelet_version(kubelet: KubeletProcess) -> tuple[str, tuple[int, int]] | None:
    """What the running binary says of itself (as :func:`parse_version`), when it is a kubelet
    (never another program)."""
    exe = (kubelet.exe or "").removesuffix(" (deleted)")
    if os.path.basename(exe) != KUBELET_NAME:
        return None
    # /proc/PID/exe runs the very binary, even if the file was replaced since
    return _ask_version(f"/proc/{kubelet.pid}/exe")


def installed_kubelet_version(path: str) -> tuple[str, tuple[int, int]] | None:
    """What the kubelet binary at ``path`` says of itself, for a node whose kubelet is not
    running (stopped, or crash-looping): ``None`` unless it is named kubelet and only root could
    have put it there (``node.trust``), when it does not answer, or when it is not there."""
    from credprovider.tool.node.trust import untrusted

    if os.path.basename(path) != KUBELET_NAME or not os.path.isfile(path) or untrusted(path):
        return None
    return _ask_version(path)


def installed_kubelet() -> tuple[str, tuple[str, tuple[int, int]]] | None:
    """For a node whose kubelet is not running: the first binary of ``layouts.KUBELET_BINARIES``
    (where the node's unit runs it from) that is trusted and answers, and what it says."""
    for path in KUBELET_BINARIES:
        found = installed_kubelet_version(path)
        if found is not None:
            return path, found
    return None


def takes_token_attributes(gates: Mapping[str, bool], version: tuple[int, int] | None) -> bool:
    """Whether a kubelet of ``version`` started with the feature ``gates`` takes a provider's
    ``tokenAttributes``: its gate as given, else the version's default."""
    return gates.get(SA_TOKEN_GATE, sa_tokens_by_default(version))


def node_kubelet_version(kubelet: KubeletProcess | None) -> tuple[str, tuple[int, int]] | None:
    """This node's kubelet's version, as doctor finds it: the running one's (``kubelet``), else,
    with none running, that of the binary its unit runs (:func:`installed_kubelet`)."""
    if kubelet is not None:
        return kubelet_version(kubelet)
    installed = installed_kubelet()
    return installed[1] if installed else None


def stamped(found: tuple[str, tuple[int, int]] | None) -> tuple[int, int] | None:
    """The release of a version a kubelet said; ``None`` for one built without a version stamp
    (``v0.0.0-master``), from which no rule of a release follows."""
    return found[1] if found is not None and found[1][0] > 0 else None


def _ask_version(program: str) -> tuple[str, tuple[int, int]] | None:
    try:
        done = run_bounded(
            [program, "--version"], SYSTEM_ENV, b"", VERSION_TIMEOUT_SECONDS, cap=4096
        )
    except (OSError, ValueError):
        return None
    return parse_version(done.stdout.decode("utf-8", "replace"))


def sa_tokens_by_default(version: tuple[int, int] | None) -> bool:
    """KubeletServiceAccountTokenForCredentialProviders' default: beta and on from v1.34, alpha
    and off in v1.33 (unknown version: the current default, on)."""
    return version is None or version >= SA_TOKENS_ON_SINCE
