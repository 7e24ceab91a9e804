"""The lints (credprovider/tool/kubeconfig/lint.py) in process, case by case: each warning the kubelet does
not give appears for its config. tests/integration/cli/test_validate.py runs a few of them through
``credprovider validate --json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from credprovider.aws.registry import MATCH_IMAGES as ECR_PATTERNS
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.kubeconfig.lint import lint_providers
from credprovider.tool.kubeconfig.validate import load_config
from tests.helpers import config_file, provider_entry

LINTS = [
    (
        "scheme in a pattern",
        [
            provider_entry(
                matchImages=[*PLUGINS["aws"].match_images, "https://*.dkr.ecr.*.amazonaws.com"]
            )
        ],
        "matchImages 'https://*.dkr.ecr.*.amazonaws.com' has a URL scheme, which the kubelet does "
        "not strip: it never matches an image (remove 'https://': '*.dkr.ecr.*.amazonaws.com')",
    ),
    (
        "a long pattern, quoted as an excerpt",
        [provider_entry(matchImages=[*PLUGINS["aws"].match_images, "r.example.com/" + "*" * 5000])],
        f"matchImages 'r.example.com/{'*' * 50}…(5014 bytes)' has '*' in its path",
    ),
    (
        "empty pattern",
        [provider_entry(matchImages=[*PLUGINS["aws"].match_images, ""])],
        "matchImages has an empty pattern '': it never matches an image",
    ),
    (
        "a NUL byte in env",
        [provider_entry(env=[{"name": "AWS_PROFILE", "value": "prod\u0000"}])],
        "env 'AWS_PROFILE' holds a NUL byte, which no environment can: the kubelet cannot run the "
        "plugin with it, and every pull it matches fails",
    ),
    (
        "a NUL byte in args",
        [provider_entry(args=["--v=2\u0000"])],
        "args '--v=2\\x00' holds a NUL byte, which no program's arguments can: the kubelet "
        "cannot run the plugin with it, and every pull it matches fails",
    ),
    (
        "a path from '~' in args",
        [
            provider_entry(
                name="acr-credential-provider",
                matchImages=["*.azurecr.io"],
                args=["~/azure.json"],
            )
        ],
        "args '~/azure.json' names a path from '~', which no shell expands between the kubelet "
        "and the plugin: the plugin is given '~' as it is (a directory of that name); give the "
        "full path",
    ),
    (
        "a path from '~' in an option's value",
        [provider_entry(name="registry-credential-provider", args=["--ca-file=~/ca.pem"])],
        "args '--ca-file=~/ca.pem' names a path from '~'",
    ),
    (
        "a deadline past the kubelet's kill",
        [provider_entry(args=["--deadline", "90s"])],
        "its deadline is 90s, and the kubelet kills a plugin after 60s: a slow call is killed "
        "before the plugin says why (no line in the kubelet's log); leave it under that (default "
        "50s)",
    ),
    (
        "a deadline past the kubelet's kill, from env",
        [provider_entry(env=[{"name": "CREDPROVIDER_DEADLINE", "value": "60"}])],
        "its deadline is 60s, and the kubelet kills a plugin after 60s",
    ),
    (
        "'=' in an env name",
        [provider_entry(env=[{"name": "AWS_REGION=us-east-1", "value": ""}])],
        "env name 'AWS_REGION=us-east-1' is not a variable's name: the kubelet passes "
        "'AWS_REGION=us-east-1=', so the plugin sees 'AWS_REGION' set to 'us-east-1='",
    ),
    (
        "'=' in an env name, its value quoted as an excerpt",
        [provider_entry(env=[{"name": "A=B", "value": "x" * 1000}])],
        f"so the plugin sees 'A' set to 'B={'x' * 62}…(1002 bytes)'",
    ),
    (
        "an empty env name",
        [provider_entry(env=[{"name": "", "value": "x"}])],
        "env name '' is not a variable's name: the plugin sees nothing set",
    ),
    (
        "placeholder in env",
        [provider_entry(env=[{"name": "AWS_ROLE_ARN", "value": "arn:aws:iam::ACCOUNT_ID:role/x"}])],
        "ACCOUNT_ID looks like a placeholder left from an example",
    ),
    (
        "an env name two letters swapped",
        [provider_entry(env=[{"name": "AWS_REGOIN", "value": "us-east-1"}])],
        "env 'AWS_REGOIN' is read by no plugin, and 'AWS_REGION', which this one reads, differs "
        "from it only by one slip of a letter: did you mean 'AWS_REGION'? (as given, it does "
        "nothing)",
    ),
    (
        "an env name, a letter added",
        [provider_entry(env=[{"name": "AWS_PROFFILE", "value": "x"}])],
        "did you mean 'AWS_PROFILE'?",
    ),
    (
        "an env name in lower case",
        [provider_entry(env=[{"name": "aws_role_arn", "value": "x"}])],
        "env 'aws_role_arn' is read by no plugin, and 'AWS_ROLE_ARN', which this one reads, "
        "differs from it only in case",
    ),
    (
        "an env name of the runtime's, a letter left out",
        [
            provider_entry(
                name="auth-provider-gcp",
                matchImages=list(PLUGINS["gcp"].match_images),
                args=["get-credentials"],
                env=[{"name": "CREDPROVIDER_DEADLIN", "value": "10s"}],
            )
        ],
        "did you mean 'CREDPROVIDER_DEADLINE'?",
    ),
    (
        "an env name of the plugin's SDK, a letter changed",
        [
            provider_entry(
                name="auth-provider-gcp",
                matchImages=list(PLUGINS["gcp"].match_images),
                args=["get-credentials"],
                env=[{"name": "GCE_METADATA_HOSY", "value": "x"}],
            )
        ],
        "did you mean 'GCE_METADATA_HOST'?",
    ),
    (
        "a name with two letters swapped",
        [provider_entry(name="ecr-credential-provdier")],
        "the name is one slip from 'ecr-credential-provider'",
    ),
    (
        "a name in another case",
        [provider_entry(name="ECR-credential-provider")],
        "the name is one slip from 'ecr-credential-provider'",
    ),
    (
        "a name one letter off",
        [provider_entry(name="ecr-credentials-provider")],
        "the name is one slip from 'ecr-credential-provider': the kubelet runs the file named "
        "'ecr-credentials-provider' in the bin dir, so did you mean 'ecr-credential-provider'?",
    ),
    (
        "star in path",
        [provider_entry(matchImages=[*PLUGINS["aws"].match_images, "registry.io/*"])],
        "matchImages 'registry.io/*' has '*' in its path",
    ),
    (
        "question mark",
        [provider_entry(matchImages=[*PLUGINS["aws"].match_images, "reg?stry.io"])],
        "uses '?' or a leading '['",
    ),
    (
        "zero default cache",
        [provider_entry(defaultCacheDuration="0s")],
        "defaultCacheDuration is 0",
    ),
    (
        "missing FIPS and China",
        [
            provider_entry(
                matchImages=["*.dkr.ecr.*.amazonaws.com", "public.ecr.aws", "ecr-public.aws.com"]
            )
        ],
        "matchImages do not cover FIPS, dual-stack, dual-stack FIPS, China",
    ),
    (
        "gcp without get-credentials",
        [provider_entry(name="auth-provider-gcp", matchImages=list(PLUGINS["gcp"].match_images))],
        "args lack get-credentials",
    ),
    (
        "gcp impersonating something that is not an account",
        [
            provider_entry(
                name="auth-provider-gcp-partner",
                args=["get-credentials", "--impersonate-service-account=partner-puller"],
                matchImages=["us-docker.pkg.dev/partner-project"],
            )
        ],
        "every pull through it fails: the plugin refuses these args: "
        "--impersonate-service-account: 'partner-puller' is not a service account email "
        "(name@project.iam.gserviceaccount.com) or unique id",
    ),
    (
        "gcp other port",
        [
            provider_entry(
                name="auth-provider-gcp",
                args=["get-credentials"],
                matchImages=[*PLUGINS["gcp"].match_images, "*.gcr.io:8443"],
            )
        ],
        "KUBE_SIDECAR_CACHE_TYPE=registry",
    ),
    (
        "azure without azure.json",
        [
            provider_entry(
                name="acr-credential-provider", matchImages=list(PLUGINS["azure"].match_images)
            )
        ],
        "args lack the azure.json path",
    ),
    (
        "azure with a relative azure.json",
        [
            provider_entry(
                name="acr-credential-provider",
                matchImages=list(PLUGINS["azure"].match_images),
                args=["--registry-mirror", "mcr.microsoft.com:myreg.azurecr.io", "azure.json"],
            )
        ],
        "args name the azure.json 'azure.json', a relative path: the plugin reads it from the "
        "kubelet's working directory (/ under systemd)",
    ),
    (
        "azure geo replicas",
        [
            provider_entry(
                name="acr-credential-provider",
                args=["/etc/kubernetes/azure.json"],
                matchImages=["*.azurecr.io", "*.azurecr.cn", "*.azurecr.us"],
            )
        ],
        "do not cover geo-replica registries",
    ),
    (
        "no :443 forms",
        [provider_entry(matchImages=list(ECR_PATTERNS))],  # the shipped patterns without :443
        "do not cover images that name the port :443 (e.g. "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app)",
    ),
    (
        "unread annotation",
        [
            provider_entry(
                tokenAttributes={
                    "serviceAccountTokenAudience": "sts.amazonaws.com",
                    "cacheType": "ServiceAccount",
                    "requireServiceAccount": False,
                    "optionalServiceAccountAnnotationKeys": [
                        "eks.amazonaws.com/ecr-role",
                        "eks.amazonaws.com/role-arn",
                    ],
                }
            )
        ],
        "annotation 'eks.amazonaws.com/ecr-role' is not read by ecr-credential-provider",
    ),
    (
        "pod identity without a token",
        [provider_entry(env=[{"name": "AWS_EKS_POD_IDENTITY_CLUSTER", "value": "demo"}])],
        "env AWS_EKS_POD_IDENTITY_CLUSTER turns on EKS Pod Identity (EKS Auth "
        "AssumeRoleForPodIdentity), but without tokenAttributes the kubelet sends no service "
        "account token",
    ),
    (
        "pod identity with another audience",
        [
            provider_entry(
                env=[{"name": "AWS_EKS_POD_IDENTITY_CLUSTER", "value": "demo"}],
                tokenAttributes={
                    "serviceAccountTokenAudience": "sts.amazonaws.com",
                    "cacheType": "ServiceAccount",
                    "requireServiceAccount": False,
                },
            )
        ],
        "which refuses a token of audience 'sts.amazonaws.com': set "
        "tokenAttributes.serviceAccountTokenAudience: pods.eks.amazonaws.com",
    ),
    (
        "gcp: a host that is no Google registry",
        [
            provider_entry(
                name="auth-provider-gcp",
                args=["get-credentials"],
                matchImages=["gcr.io", "*.gcr.io", "*.pkg.dev", "gcr.oi", "gcr.io:5000"],
            )
        ],
        "matchImages gcr.oi name no Google registry (gcr.io, *.gcr.io, *.pkg.dev, "
        "container.cloud.google.com): the plugin sends no token for them",
    ),
    (
        "gcp: a Google registry on another port",
        [
            provider_entry(
                name="auth-provider-gcp",
                args=["get-credentials"],
                matchImages=["gcr.io", "gcr.oi", "*.gcr.io:5000"],
            )
        ],
        "matchImages *.gcr.io:5000 name a Google registry form the plugin's Global answer does "
        "not cover (another port)",
    ),
    (
        "relative cache dir",
        [provider_entry(args=["--cache-dir", "cache"])],
        "the cache directory 'cache' is relative: the plugin makes it in the kubelet's working "
        "directory (/ under systemd)",
    ),
    (
        "relative cache dir in the env",
        [provider_entry(env=[{"name": "CREDPROVIDER_CACHE_DIR", "value": "var/cache"}])],
        "the cache directory 'var/cache' is relative",
    ),
]


def test_an_absolute_azure_json_after_a_mirror_is_no_warning(tmp_path: Path) -> None:
    """The mirror flag's value is no azure.json path: only the positional one is looked at."""
    entry = provider_entry(
        name="acr-credential-provider",
        matchImages=list(PLUGINS["azure"].match_images),
        args=["--registry-mirror", "mcr.microsoft.com:myreg.azurecr.io", "/etc/azure.json"],
    )
    warnings = lint_providers(load_config(str(config_file(tmp_path, entry))))
    assert not any("azure.json" in text for text in warnings), warnings


def test_an_absolute_cache_dir_is_no_warning(tmp_path: Path) -> None:
    for entry in (provider_entry(args=["--cache-dir=/var/cache/cp"]),
                  provider_entry(env=[{"name": "CREDPROVIDER_CACHE_DIR", "value": "/c"}])):  # fmt: skip
        warnings = lint_providers(load_config(str(config_file(tmp_path, entry))))
        assert not any("cache directory" in text for text in warnings), warnings


@pytest.mark.parametrize(
    ("case", "providers", "warning"), LINTS, ids=[case for case, _, _ in LINTS]
)
def test_lint(tmp_path: Path, case: str, providers: list[dict[str, Any]], warning: str) -> None:
    warnings = lint_providers(load_config(str(config_file(tmp_path, *providers))))
    assert any(warning in text for text in warnings), warnings


def test_a_deadline_under_the_kubelets_kill_is_no_warning(tmp_path: Path) -> None:
    under = [{"name": "CREDPROVIDER_DEADLINE", "value": "30s"}]
    for entry in (provider_entry(args=["--deadline=59s"]), provider_entry(args=["-v=2"]),
                  provider_entry(env=under)):  # fmt: skip
        warnings = lint_providers(load_config(str(config_file(tmp_path, entry))))
        assert not any("deadline" in text for text in warnings), warnings


def test_env_names_read_or_not_near_one_are_no_warning(tmp_path: Path) -> None:
    """Names a plugin reads (its own, its SDK's, the runtime's, another cloud's), and names near
    none, are left alone; a short name is no slip of another."""
    names = ["AWS_REGION", "https_proxy", "NO_PROXY", "AWS_CA_BUNDLE", "SSL_CERT_FILE",
             "GOOGLE_APPLICATION_CREDENTIALS", "IDENTITY_ENDPOINT", "MY_OWN_SETTING", "TZ",
             "LANG", "HTTP_PROXY"]  # fmt: skip
    entry = provider_entry(env=[{"name": name, "value": "x"} for name in names])
    warnings = lint_providers(load_config(str(config_file(tmp_path, entry))))
    assert not any("read by no plugin" in text for text in warnings), warnings


def test_an_entry_given_many_times_is_one_warning(tmp_path: Path) -> None:
    """A config repeating an entry (a generator's loop) says each thing once: 60,000 env
    entries printed 60,000 lines."""
    env = [{"name": "AWS_REGOIN", "value": "x"}, {"name": "A=B", "value": ""},
           {"name": "X", "value": "a\0b"}] * 1000  # fmt: skip
    entry = provider_entry(env=env, args=["a\0"] * 1000)
    warnings = lint_providers(load_config(str(config_file(tmp_path, entry))))
    for said in ("'AWS_REGOIN'", "'A=B'", "env 'X' holds a NUL byte", "NUL"):
        assert len([text for text in warnings if said in text]) >= 1, warnings
    assert len(warnings) == len(set(warnings)) and len(warnings) < 10, len(warnings)
