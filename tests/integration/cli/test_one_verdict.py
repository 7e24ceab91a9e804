"""One verdict for one image, whichever command is asked: ``explain``, ``get`` and ``match`` (and, for
what is not an image, the plugins themselves), all through the built bundle, over one corpus of image
forms against the shipped config (config/, as a kubelet config directory).

For each image the table says what the kubelet would pass, which provider's matchImages claim it
(or none), and the hint a miss or a refusal must carry. ``get`` runs stand-in plugins that answer
under the image's registry (the real plugins' answers for every host form are the real kubelet's
test, tests/e2e): what is compared here is the selection, the normalisation and the hints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from credprovider.tool.catalog import PLUGINS
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import CONFIG_DIR, require_bundle
from tests.helpers import run_cli as cli

ECR, ACR, GCP = (PLUGINS[key].name for key in ("aws", "azure", "gcp"))
DIGEST = "sha256:" + "a" * 64


class Case(NamedTuple):
    given: str
    image: str | None  # as the kubelet passes it; None: refused, ``hint`` says why
    claim: str | None  # the provider whose matchImages match, in config order
    hint: str = ""  # in the miss reason (or the refusal) every command gives
    pattern: str = ""  # a pattern match is asked about (default: the nearest miss)


CORPUS = {
    "ecr with tag": Case(
        "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:v1",
        "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app",
        ECR,
        pattern="*.dkr.ecr.*.amazonaws.com",
    ),
    "ecr upper case": Case(
        "123456789012.DKR.ECR.US-EAST-1.AMAZONAWS.COM/app",
        "123456789012.DKR.ECR.US-EAST-1.AMAZONAWS.COM/app",
        None,
        "host label 2 'DKR' does not match 'dkr': the kubelet compares host names "
        "case-sensitively, so write the host in lower case",
    ),
    "ecr :443": Case(
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app",
        ECR,
        pattern="*.dkr.ecr.*.amazonaws.com:443",
    ),
    "ecr :8443": Case(
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:8443/app",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:8443/app",
        None,
        "add '*.dkr.ecr.*.amazonaws.com:8443'",
    ),
    "ecr china by digest": Case(
        f"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app@{DIGEST}",
        "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app",
        ECR,
        pattern="*.dkr.ecr.*.amazonaws.com.cn",
    ),
    "ecr public": Case("public.ecr.aws/nginx/nginx", "public.ecr.aws/nginx/nginx", ECR),
    "acr": Case("myreg.azurecr.io/app", "myreg.azurecr.io/app", ACR, pattern="*.azurecr.io"),
    "acr punycode": Case("xn--mnchen-3ya.azurecr.io/app", "xn--mnchen-3ya.azurecr.io/app", ACR),
    "gcr": Case("gcr.io/project/app", "gcr.io/project/app", GCP, pattern="gcr.io"),
    "artifact registry": Case(
        "us-central1-docker.pkg.dev/p/r/app", "us-central1-docker.pkg.dev/p/r/app", GCP
    ),
    "artifact registry :8443": Case(
        "europe-west1-docker.pkg.dev:8443/p/r/app",
        "europe-west1-docker.pkg.dev:8443/p/r/app",
        None,
        "add '*.pkg.dev:8443'",
    ),
    "docker hub short name": Case("nginx:1.25", "docker.io/library/nginx", None),
    "quay": Case("quay.io/org/app", "quay.io/org/app", None),
    "bare ecr host": Case(
        "123456789012.dkr.ecr.us-west-2.amazonaws.com",
        None,
        None,
        "names only a registry host, no repository (as an image, the kubelet would pull "
        "docker.io/library/123456789012.dkr.ecr.us-west-2.amazonaws.com from Docker Hub): did you "
        "mean 123456789012.dkr.ecr.us-west-2.amazonaws.com/<repository>?",
    ),
    "bare acr host with port": Case(
        "myreg.azurecr.io:443", None, None, "did you mean myreg.azurecr.io:443/<repository>?"
    ),
    "empty": Case("", None, None, "empty"),
    "url": Case("https://gcr.io/p/app", None, None, "has a URL scheme"),
    "unicode host": Case("münchen.azurecr.io/app", None, None, "non-ASCII"),
    "upper-case path": Case("gcr.io/P/App", None, None, "repository path component 'P'"),
}

# A stand-in for every plugin in get's bin dir: answers under the registry it was asked about.
STAND_IN = f"""#!{sys.executable}
import json, sys
image = json.load(sys.stdin)["image"]
print(json.dumps({{"kind": "CredentialProviderResponse",
    "apiVersion": "credentialprovider.kubelet.k8s.io/v1", "cacheKeyType": "Registry",
    "auth": {{image.split("/")[0]: {{"username": "u", "password": "p"}}}}}}))
"""


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_bundle()
    directory = tmp_path_factory.mktemp("bin")
    for plugin in PLUGINS.values():
        (directory / plugin.name).write_text(STAND_IN)
        (directory / plugin.name).chmod(0o755)
    return directory


def _all_misses(by_provider: dict[str, list[dict[str, str]]]) -> list[dict[str, str]]:
    return [miss for misses in by_provider.values() for miss in misses]


def _reasons(misses: list[dict[str, str]]) -> str:
    return " | ".join(f"{miss['pattern']}: {miss['reason']}" for miss in misses)


@pytest.mark.parametrize("name", CORPUS, ids=list(CORPUS))
def test_every_command_gives_one_verdict(name: str, stand_ins: Path) -> None:
    case = CORPUS[name]
    explain = cli("explain", case.given, "--json", use_bundle=True)
    get = cli(
        "get",
        case.given,
        "--config",
        str(CONFIG_DIR),
        "--bin-dir",
        str(stand_ins),
        "--json",
        use_bundle=True,
    )
    if case.image is None:
        for command, result in (("explain", explain), ("get", get)):
            assert (result.returncode, result.stdout) == (2, ""), command
            assert result.stderr.startswith(f"credprovider {command}: "), result.stderr
            assert case.hint in result.stderr, (command, result.stderr)
        return
    explained = json.loads(explain.stdout)
    got = json.loads(get.stdout)
    assert explained["image"] == got["image"] == case.image
    assert explained["plugin"] == case.claim
    matched = [p["name"] for p in got["providers"] if p["matched"]]
    assert matched == ([case.claim] if case.claim else [])
    assert get.returncode == (0 if case.claim else 1)
    if case.claim:
        (claimed,) = (p for p in got["providers"] if p["matched"])
        assert claimed["appliedKeys"] == [case.image.split("/")[0]]
    # the same nearest misses, in the same words, from both
    from_get = {p["name"]: p["closestMisses"] for p in got["providers"] if not p["matched"]}
    for plugin in PLUGINS.values():
        if plugin.name != case.claim and not plugin.opt_in:  # opt-in: no shipped entry
            assert explained["misses"].get(plugin.name, []) == from_get[plugin.name]
    if case.hint:
        assert case.hint in _reasons(_all_misses(explained["misses"])), explained["misses"]


@pytest.mark.parametrize("name", CORPUS, ids=list(CORPUS))
def test_match_agrees(name: str) -> None:
    """match, asked about the claiming pattern or the nearest miss, says what the others said."""
    require_bundle()
    case = CORPUS[name]
    explained = cli("explain", case.given, "--json", use_bundle=True)
    pattern = case.pattern or "*.dkr.ecr.*.amazonaws.com"
    if case.image is not None and not case.pattern:
        misses = _all_misses(json.loads(explained.stdout)["misses"])
        pattern = misses[0]["pattern"] if misses else pattern
    result = cli("match", pattern, case.given, use_bundle=True)
    if case.image is None:
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr.startswith("credprovider match: ") and case.hint in result.stderr
        return
    if case.claim and case.pattern:
        assert (result.returncode, result.stdout.splitlines()[0]) == (0, "match")
        return
    assert result.returncode in (0, 1)
    if case.hint:
        assert result.returncode == 1 and case.hint in result.stdout


# a backend that is never reached: the image is refused first
REGISTRY_ARGS = ["--backend", "quay", "--url", "https://quay.example.test", "--robot", "a+b"]


@pytest.mark.parametrize(
    "name", [n for n, c in CORPUS.items() if c.image is None and c.given], ids=str
)
@pytest.mark.parametrize("plugin", [p.name for p in PLUGINS.values()])
def test_the_plugins_refuse_with_the_same_hint(name: str, plugin: str) -> None:
    """What no command accepts as an image, no plugin answers for (run by hand with it): one line,
    the same hint, nothing on stdout, before any cloud is asked."""
    require_bundle()
    case = CORPUS[name]
    args = (
        ["get-credentials"]
        if plugin == GCP
        else ["/nonexistent/azure.json"]
        if plugin == ACR
        else REGISTRY_ARGS
        if plugin == PLUGINS["registries"].name
        else []
    )
    run = run_plugin(
        plugin, request_bytes(case.given), args=args, use_bundle=True, own_network=True
    )
    assert (run.code, run.stdout) == (1, b"")
    (line,) = run.error_lines
    assert line.startswith(f"{plugin}: error: ") and case.hint in line, line
