"""What the real-kubelet run pulls, and what each pull must carry: pure data and decisions.

Pods come in two waves. The first starts every registry form the shipped configs claim at once
(three pods share one ECR image: the kubelet's singleflight must make that one exec); the second,
started after the first has pulled, names other repositories on the same registries (and the
other Google registries) and must cost no exec at all: the kubelet's cache, keyed as the plugins
asked (cacheKeyType) and kept for cacheDuration, answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulators.azure import ACR_USERNAME

ECR_ACCOUNT = "111122223333"
ACR_LOGIN_SERVER = "contoso.azurecr.io"
ACR_GEO_REPLICA = "contoso.eastus.geo.azurecr.io"
ACR_REGISTRIES = (ACR_LOGIN_SERVER, ACR_GEO_REPLICA)

# provider name -> (the shipped config file, the username its answers carry)
PROVIDERS = {
    "ecr-credential-provider": ("aws.yaml", "AWS"),
    "acr-credential-provider": ("azure.yaml", ACR_USERNAME),
    "auth-provider-gcp": ("gcp.yaml", "_token"),
}


@dataclass(frozen=True)
class Pull:
    """One image the kubelet pulls, and the provider whose credentials it must carry (None: no
    provider matches it, so it must carry none)."""

    image: str
    provider: str | None
    wave: int
    pods: int = 1


def _ecr(
    region: str,
    suffix: str = "amazonaws.com",
    port: str = "",
    service: str = "dkr.ecr",
    account: str = ECR_ACCOUNT,
) -> str:
    return f"{account}.{service}.{region}.{suffix}{port}"


PULLS = (
    # wave 1: every registry form at once
    Pull(f"{_ecr('us-west-2')}/team/app:v1", "ecr-credential-provider", 1, pods=3),
    Pull(f"{_ecr('us-east-1', port=':443')}/team/app:v1", "ecr-credential-provider", 1),
    Pull(f"{_ecr('cn-north-1', 'amazonaws.com.cn')}/team/app:v1", "ecr-credential-provider", 1),
    Pull(f"{_ecr('us-gov-west-1')}/team/app:v1", "ecr-credential-provider", 1),
    Pull(f"{_ecr('us-east-2', service='dkr.ecr-fips')}/team/app:v1", "ecr-credential-provider", 1),
    Pull(
        f"{_ecr('eu-west-1', 'on.aws', service='dkr-ecr')}/team/app:v1",
        "ecr-credential-provider",
        1,
    ),
    Pull("public.ecr.aws/nginx/nginx:1.27", "ecr-credential-provider", 1),
    Pull("public.ecr.aws:443/docker/library/redis:7", "ecr-credential-provider", 1),
    Pull(f"{ACR_LOGIN_SERVER}/team/app:v1", "acr-credential-provider", 1),
    Pull(f"{ACR_GEO_REPLICA}/team/app:v1", "acr-credential-provider", 1),
    Pull("gcr.io/team-project/app:v1", "auth-provider-gcp", 1),
    Pull("docker.io/library/busybox:1.37", None, 1),
    # wave 2: the same registries (and, for Google's Global key, the others) from the cache
    Pull(f"{_ecr('us-west-2')}/team/other:v2", "ecr-credential-provider", 2),
    Pull(f"{_ecr('us-east-1', port=':443')}/team/other:v2", "ecr-credential-provider", 2),
    Pull("public.ecr.aws/nginx/other:1", "ecr-credential-provider", 2),
    Pull(f"{ACR_LOGIN_SERVER}/team/other:v2", "acr-credential-provider", 2),
    Pull(f"{ACR_GEO_REPLICA}/team/other:v2", "acr-credential-provider", 2),
    Pull("us.gcr.io/team-project/other:v2", "auth-provider-gcp", 2),
    Pull("us-central1-docker.pkg.dev/team-project/repo/app:v2", "auth-provider-gcp", 2),
    Pull("quay.io/team/tool:v3", None, 2),
)


def served(pull: Pull, providers: set[str]) -> bool:
    """Does a run with ``providers`` configured owe ``pull`` credentials?"""
    return pull.provider is not None and pull.provider in providers


def expected_execs(providers: set[str], wave: int) -> dict[str, int]:
    """Plugin execs the kubelet makes in ``wave`` (cumulative): one per image in wave 1 (each is
    alone on its registry; the pods sharing one image share one exec), none in wave 2."""
    return {
        name: sum(1 for pull in PULLS if pull.provider == name and pull.wave == 1)
        for name in providers
    }


# --- one plugin as several providers (#33) -------------------------------------------------------
# One config, two providers of each plugin under suffixed names, each with its own identity and its
# own registry. Team A's pods start first; team B's after, on registries of the same clouds, so a
# provider answered from the other's credentials (a shared cache entry, a shared Global key) would
# show as a pull carrying the wrong identity.
ECR_ACCOUNT_B = "444455556666"
ACR_TEAM_B = "fabrikam.azurecr.io"
ECR_KEYS = {"team-a": "AKIAEXAMPLETEAMAAAAA", "team-b": "AKIAEXAMPLETEAMBBBBB"}
ACR_CLIENT_IDS = {"team-a": "kubelet-identity-client-id", "team-b": "team-b-identity-client-id"}
GCP_ACCOUNTS = {
    "team-a": "team-a-puller@team-a-project.iam.gserviceaccount.com",
    "team-b": "partner-puller@partner-project.iam.gserviceaccount.com",
}
AZURE_JSON_TEAM_B = "/etc/kubernetes/azure-team-b.json"


@dataclass(frozen=True)
class Identity:
    """One provider of the identities run: its name, the plugin it suffixes, its cloud's key in
    the emulators' issued maps, the registry it claims, and the identity it must pull as."""

    name: str
    plugin: str
    cloud: str
    match: str
    identity: str
    team: str


IDENTITIES = tuple(
    provider
    for team in ("team-a", "team-b")
    for provider in (
        Identity(
            f"ecr-credential-provider-{team}",
            "ecr-credential-provider",
            "ecr",
            _ecr("us-west-2", account=ECR_ACCOUNT_B if team == "team-b" else ECR_ACCOUNT),
            ECR_KEYS[team],
            team,
        ),
        Identity(
            f"acr-credential-provider-{team}",
            "acr-credential-provider",
            "acr",
            ACR_TEAM_B if team == "team-b" else ACR_LOGIN_SERVER,
            ACR_CLIENT_IDS[team],
            team,
        ),
        Identity(
            f"auth-provider-gcp-{team}",
            "auth-provider-gcp",
            "gcp",
            # one registry host, two projects: only the identity tells their cache entries apart
            f"us-docker.pkg.dev/{'partner' if team == 'team-b' else 'team-a'}-project",
            GCP_ACCOUNTS[team],
            team,
        ),
    )
)

IDENTITY_PULLS = (
    *(
        Pull(
            f"{provider.match}/{'repo/' if provider.cloud == 'gcp' else ''}app:v1",
            provider.name,
            wave,
        )
        for wave, team in ((1, "team-a"), (2, "team-b"))
        for provider in IDENTITIES
        if provider.team == team
    ),
    Pull("docker.io/library/busybox:1.37", None, 1),
)

# --- what only a real runtime shows (tests/e2e/test_real_runtime.py) -------------------------------
# Two providers claim account A's registry, each with its own key; the registry admits only team
# A's. The us-east-1 registry has a mirror in containerd's hosts.toml. Wave 2 starts once wave 1's
# ECR tokens have expired, on the same registry.
MIRROR_HOST = "mirror.registry.internal"
MIRRORED = _ecr("us-east-1")
CASE_PULLS = (
    Pull(f"{_ecr('us-west-2')}/team/app:v1", "ecr-credential-provider-team-a", 1),
    Pull(f"{MIRRORED}/team/app:v1", "ecr-credential-provider-team-a", 1),
    Pull(f"{_ecr('us-west-2')}/team/other:v2", "ecr-credential-provider-team-a", 2),
)
SCENARIOS = {"clouds": PULLS, "identities": IDENTITY_PULLS, "cases": CASE_PULLS}
