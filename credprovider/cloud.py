"""What the ``credprovider`` tool needs to know about a cloud's plugin, as one value per cloud.

Each cloud folder has a pure ``descriptor.py`` holding its :class:`CloudPlugin`: names, default
config, sample images, and the cloud's own parts of ``explain`` and ``validate``. The tool
(``catalog``, ``explain``, ``install``, ``migrate``, the config lints) reads only these values, so
adding a cloud is one new folder and one line in ``entry.PLUGIN_PACKAGES``. Nothing here imports a
cloud SDK. Not on the exec path.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

# The kubelet matches ports exactly: a pattern without a port never matches an image that names one,
# and `host:443/...` is common (copied registry URLs, some mirrors). Every shipped pattern and every
# pattern `install` writes has both forms, and validate warns about a config without them.
DEFAULT_HTTPS_PORT: Final = "443"


@dataclass(frozen=True)
class Explanation:
    """What a plugin would do for an image on a registry: whether the host is one of its cloud's
    (``recognized``), the action in one sentence, and the cloud's own facts for ``--json``
    (``region``, ``loginServer``, ...)."""

    recognized: bool
    action: str
    facts: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"recognized": self.recognized, **self.facts, "action": self.action}


class Explainer(Protocol):
    """``(host, registry, args) -> Explanation``: what the plugin would do for an image on that
    registry, given the provider entry's args when they are known (a config's) and ``()`` when not
    (the shipped entries)."""

    def __call__(self, host: str, registry: str, args: Sequence[str] = ()) -> Explanation: ...


Linter = Callable[[Sequence[str], Sequence[str], Collection[str]], list[str]]
"""``(matchImages, args, env names) -> warnings``: the cloud's own checks of a provider entry."""


@dataclass(frozen=True)
class IdentityProbe:
    """One request that shows the endpoint a plugin's identity comes from is reachable (``doctor``),
    built by the cloud's descriptor from the node's environment; sent by the tool, never retried."""

    what: str  # "the instance role through IMDSv2 (http://169.254.169.254/)"
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    expect_status: int = 200
    expect_header: tuple[str, str] | None = None  # (name, value) a real endpoint always sends
    expect_header_start: bool = False  # the value is how it starts, in any case (a challenge)
    show_body: bool = False  # the answer is a fact worth showing (an account's email), no secret
    silence: str = ""  # what no answer at all most likely means here, and the fix
    # What the plugin turns that identity into before it pulls (impersonated accounts), if anything.
    then: str = ""
    # For an https:// URL: the CA bundle its certificate is checked against, as the plugin checks
    # it ("": certifi's bundle, the plugins' default), and the setting that names it (an
    # argument such as "--ca-file", or an environment variable), for the line if it is unusable.
    ca_file: str = ""
    ca_setting: str = ""


IdentityFinder = Callable[
    [Mapping[str, str], Sequence[str], Callable[[str], str | None], Callable[[str], bool]],
    "IdentityProbe | str",
]
"""``(environment, args, read, exists) -> probe``: what to send to reach the endpoint the plugin's
identity comes from with this environment and these args (``read(path)`` is a node file's text, or
``None``; ``exists(path)`` whether the node has that path), or one sentence saying why there is no
endpoint to reach (static keys, a key file)."""


SecretFiles = Callable[
    [Sequence[str], Mapping[str, str], Callable[[str], str | None]], list[tuple[str, str]]
]
"""``(args, env, read) -> [(path, secret)]``: each file the plugin reads with these args and this
env (its node file, a key or token file) that holds a secret, and what that secret is (a key's
name: ``aadClientSecret``, ``private_key``). ``read(path)`` is a node file's text, or ``None``; the
tool warns of those others than their owner may read."""


AnnotationLinter = Callable[[Sequence[str], Sequence[str]], list[str]]
"""``(args, annotation keys tokenAttributes passes) -> warnings``: for a plugin whose annotations
depend on its args (in place of the check against ``annotation_keys``)."""


def no_lints(match_images: Sequence[str], args: Sequence[str], env: Collection[str]) -> list[str]:
    return []


@dataclass(frozen=True)
class CloudPlugin:
    key: str  # what --providers takes: aws | azure | gcp
    name: str  # the executable's name in the kubelet's bin dir
    match_images: tuple[str, ...]  # the shipped matchImages, both port forms
    default_cache_duration: str
    args: tuple[str, ...]  # the shipped args
    annotation_keys: tuple[str, ...]  # service-account annotations the plugin reads
    sample_images: Mapping[str, str]  # host form -> an image of that form (both port forms)
    explain: Explainer
    lints: Linter = no_lints
    # The first arg names a file on the node (azure.json): `install --azure-config` replaces it.
    node_file_arg: str | None = None
    # kubelet --cloud-provider values whose in-tree credentials this plugin replaces (migrate),
    # and the kubelet release that removed that built-in login (doctor).
    in_tree_clouds: tuple[str, ...] = ()
    in_tree_removed_in: tuple[int, int] = (1, 31)
    # The cloud controller manager that initializes the node once the kubelet runs
    # --cloud-provider=external (KEP-2395: migrate and doctor name it).
    controller_manager: str = ""
    # kubelet flags naming the node file, in the order migrate prefers them; a flag in
    # `implied_by_flags` also means the node used this cloud's in-tree credentials.
    node_file_flags: tuple[str, ...] = ()
    implied_by_flags: tuple[str, ...] = ()
    # Where the plugin's identity comes from on a node (doctor's reachability check).
    identity: IdentityFinder | None = None
    # Whether a credential request needs a registry of the operator's own (the plugin exchanges a
    # token at the registry itself), so that a sample image cannot stand in for a dry run.
    dry_run_needs_own_registry: bool = False
    # OpenShift: the cluster platform whose kubelet the MCO gives this plugin's config, that
    # config's file name under /etc/kubernetes/credential-providers, and the node file OpenShift's
    # entry gives it instead of node_file_arg (openshift/machine-config-operator
    # pkg/controller/template/render.go, credentialProviderConfigFlag; platforms.md)
    openshift_platform: str = ""
    # A mode the provider's env turns on that needs the kubelet's service-account token with a
    # given audience: env name -> (that audience, what the mode is). validate says when the
    # entry's tokenAttributes would not give it.
    token_audiences: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    openshift_config: str = ""
    openshift_node_file: str = ""
    # Installed only when --providers names it (its registries and backend are the operator's:
    # no shipped matchImages or args), and answering only with the kubelet's service-account
    # token (validate says so of an entry without tokenAttributes).
    opt_in: bool = False
    needs_token: bool = False
    annotation_lints: AnnotationLinter | None = None
    # env variables naming a file the plugin reads whole, without which it fails every pull (a
    # token file, a key): validate on a node says when the file is missing or not a regular file.
    file_env: tuple[str, ...] = ()
    # env variables the plugin (and the SDK it drives) reads that an operator sets in a provider's
    # env, besides the runtime's own (tool/kubeconfig/envnames.py): validate names a near miss.
    env_read: tuple[str, ...] = ()
    # ... of those, the ones whose value is a secret (a key, a token): a config that gives one is
    # a file only root may read (install and the agent write it 0600; validate warns otherwise).
    secret_env: tuple[str, ...] = ()
    # ... and the files it reads that hold one (validate and doctor on a node warn of one others
    # may read, as of a config giving a secret_env)
    secret_files: SecretFiles | None = None


def with_https_port(reference: str) -> str:
    """``host/path`` -> ``host:443/path`` (patterns and images alike)."""
    host, slash, path = reference.partition("/")
    return f"{host}:{DEFAULT_HTTPS_PORT}{slash}{path}"


def both_port_forms(patterns: Sequence[str]) -> tuple[str, ...]:
    return (*patterns, *(with_https_port(pattern) for pattern in patterns))


def samples_with_port(samples: Mapping[str, str]) -> dict[str, str]:
    return {
        **samples,
        **{
            f"{form} (:{DEFAULT_HTTPS_PORT})": with_https_port(image)
            for form, image in samples.items()
        },
    }
