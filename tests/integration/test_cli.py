"""The ``credprovider`` operator tool: validate, get, explain, match, install, migrate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from credprovider.aws.registry import MATCH_IMAGES as ECR_PATTERNS
from credprovider.catalog import PLUGINS
from tests.fakes.aws import FakeEcr
from tests.fakes.gcp import FakeMetadata
from tests.fakes.http import FakeServer, serve
from tests.helpers import BUNDLE_DIR, CONFIG_DIR, CONFIG_EXAMPLES, REPO
from tests.helpers import run_cli as cli
from tests.integration.conftest import REQUIRE_BUNDLE_ENV, Azure
from tests.integration.kubelet_config_cases import CASES, OK, P

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- validate -----------------------------------------------------------------------------------------


def test_validate_a_valid_config(tmp_path: Path) -> None:
    result = cli("validate", str(write(tmp_path / "c.yaml", CASES["valid"])))
    assert (result.returncode, result.stdout) == (0, "valid: 1 provider(s) from 1 file(s): a\n")


@pytest.mark.parametrize(
    "name",
    [
        "names and images",
        "unknown fields",
        "token attributes all wrong",
        "wrong group",
        "bad duration",
    ],
)
def test_validate_prints_the_kubelets_message(tmp_path: Path, name: str) -> None:
    from credprovider.config import ConfigError
    from credprovider.config_validate import load_config

    path = write(tmp_path / "c.yaml", CASES[name])
    with pytest.raises(ConfigError) as expected:
        load_config(str(path))
    result = cli("validate", str(path), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "valid": False,
        "error": str(expected.value),
        "errors": [str(expected.value)],
        "warnings": [],
    }


def test_validate_a_directory(tmp_path: Path) -> None:
    write(tmp_path / "b.yaml", P + "providers:\n" + OK.replace("name: a", "name: b"))
    write(tmp_path / "a.json", json.dumps(yaml.safe_load(P + "providers:\n" + OK)))
    result = cli("validate", str(tmp_path), "--json")
    report = json.loads(result.stdout)
    assert (result.returncode, report["providers"]) == (0, ["a", "b"])
    assert report["files"] == [str(tmp_path / "a.json"), str(tmp_path / "b.yaml")]


def _provider(**fields: Any) -> dict[str, Any]:
    entry = {
        "name": "ecr-credential-provider",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "defaultCacheDuration": "12h",
        "matchImages": list(PLUGINS["aws"].match_images),
    }
    entry.update(fields)
    return entry


def _config(tmp_path: Path, *providers: dict[str, Any]) -> Path:
    return write(
        tmp_path / "c.json",
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1",
                "kind": "CredentialProviderConfig",
                "providers": list(providers),
            }
        ),
    )


LINTS = [
    (
        "star in path",
        [_provider(matchImages=[*PLUGINS["aws"].match_images, "registry.io/*"])],
        "matchImages 'registry.io/*' has '*' in its path",
    ),
    (
        "question mark",
        [_provider(matchImages=[*PLUGINS["aws"].match_images, "reg?stry.io"])],
        "uses '?' or a leading '['",
    ),
    ("zero default cache", [_provider(defaultCacheDuration="0s")], "defaultCacheDuration is 0"),
    (
        "missing FIPS and China",
        [
            _provider(
                matchImages=["*.dkr.ecr.*.amazonaws.com", "public.ecr.aws", "ecr-public.aws.com"]
            )
        ],
        "matchImages do not cover FIPS, dual-stack, dual-stack FIPS, China",
    ),
    (
        "gcp without get-credentials",
        [_provider(name="auth-provider-gcp", matchImages=list(PLUGINS["gcp"].match_images))],
        "args lack get-credentials",
    ),
    (
        "gcp other port",
        [
            _provider(
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
            _provider(
                name="acr-credential-provider", matchImages=list(PLUGINS["azure"].match_images)
            )
        ],
        "args lack the azure.json path",
    ),
    (
        "azure geo replicas",
        [
            _provider(
                name="acr-credential-provider",
                args=["/etc/kubernetes/azure.json"],
                matchImages=["*.azurecr.io", "*.azurecr.cn", "*.azurecr.us"],
            )
        ],
        "do not cover geo-replica registries",
    ),
    (
        "no :443 forms",
        [_provider(matchImages=list(ECR_PATTERNS))],  # the shipped patterns without :443
        "do not cover images that name the port :443 (e.g. "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app)",
    ),
    (
        "unread annotation",
        [
            _provider(
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
]


@pytest.mark.parametrize(("case", "providers", "warning"), LINTS, ids=[c for c, _, _ in LINTS])
def test_validate_lints(
    tmp_path: Path, case: str, providers: list[dict[str, Any]], warning: str
) -> None:
    result = cli("validate", str(_config(tmp_path, *providers)), "--json")
    report = json.loads(result.stdout)
    assert (result.returncode, report["valid"]) == (0, True)
    assert any(warning in text for text in report["warnings"]), report["warnings"]


def test_validate_checks_binaries_in_the_bin_dir(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "auth-provider-gcp").write_text("not executable")
    config = _config(
        tmp_path,
        _provider(),
        _provider(
            name="auth-provider-gcp",
            args=["get-credentials"],
            matchImages=list(PLUGINS["gcp"].match_images),
        ),
        _provider(
            name="acr-credential-provider",
            args=["/etc/kubernetes/azure.json"],
            matchImages=list(PLUGINS["azure"].match_images),
        ),
    )
    (bin_dir / "acr-credential-provider").symlink_to(tmp_path / "gone")
    result = cli("validate", str(config), "--bin-dir", str(bin_dir), "--json")
    report = json.loads(result.stdout)
    assert (result.returncode, report["valid"]) == (1, False)
    assert report["errors"] == [
        f"provider 'ecr-credential-provider': {bin_dir}/ecr-credential-provider does not exist: the "
        "kubelet would NOT start (plugin binary executable did not exist)",
        f"provider 'auth-provider-gcp': {bin_dir}/auth-provider-gcp is not an executable file: the "
        "kubelet starts, but every pull it matches fails (chmod +x it, or link the bundle's "
        "executable there)",
        f"provider 'acr-credential-provider': {bin_dir}/acr-credential-provider is a symlink to "
        f"{tmp_path / 'gone'}, which does not exist: the kubelet would NOT start (plugin binary "
        "executable did not exist)",
    ]
    text = cli("validate", str(config), "--bin-dir", str(bin_dir))
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].startswith("invalid: the config is well-formed")
    missing = cli("validate", str(config), "--bin-dir", str(tmp_path / "nope"), "--json")
    assert (missing.returncode, len(json.loads(missing.stdout)["errors"])) == (1, 1)
    assert "the bin dir" in json.loads(missing.stdout)["error"]


def test_validate_on_a_node_warns_about_files_the_args_name(tmp_path: Path) -> None:
    """With --bin-dir (checking a node), a file an argument names must exist there; without it
    (checking a config anywhere) the file is not looked for."""
    azure_json = tmp_path / "azure.json"
    config = _config(
        tmp_path,
        _provider(
            name="acr-credential-provider",
            args=[str(azure_json)],
            matchImages=list(PLUGINS["azure"].match_images),
        ),
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "acr-credential-provider").symlink_to("/bin/true")
    on_node = json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)
    assert on_node["valid"] is True
    assert on_node["warnings"] == [
        f"provider 'acr-credential-provider': args name {azure_json}, which does not exist on this "
        "node: acr-credential-provider fails every pull it matches until it does"
    ]
    assert json.loads(cli("validate", str(config), "--json").stdout)["warnings"] == []
    azure_json.write_text("{}")
    again = json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)
    assert again["warnings"] == []


@pytest.mark.parametrize("example", CONFIG_EXAMPLES, ids=lambda p: p.name)
def test_examples_validate_without_warnings(example: Path) -> None:
    result = cli("validate", str(example), "--json")
    assert (result.returncode, json.loads(result.stdout)["warnings"]) == (0, [])


@pytest.mark.parametrize("key", sorted(PLUGINS))
def test_examples_carry_the_complete_match_images(key: str) -> None:
    plugin = PLUGINS[key]
    for path in CONFIG_EXAMPLES:
        for provider in yaml.safe_load(path.read_text())["providers"]:
            if provider["name"] == plugin.name:
                assert tuple(provider["matchImages"]) == plugin.match_images, path.name


def test_no_shipped_config_opts_every_irsa_role_into_image_pulls() -> None:
    """The generic IRSA annotation is opt-in (README): the shipped service-account configs list
    only eks.amazonaws.com/ecr-role-arn, which the plugin reads first."""
    from credprovider.aws.registry import ROLE_ARN_ANNOTATIONS, SHIPPED_ANNOTATIONS

    assert ROLE_ARN_ANNOTATIONS[0] == SHIPPED_ANNOTATIONS[0] == "eks.amazonaws.com/ecr-role-arn"
    seen = 0
    for path in CONFIG_EXAMPLES:
        for provider in yaml.safe_load(path.read_text())["providers"]:
            attributes = provider.get("tokenAttributes")
            if provider["name"] == PLUGINS["aws"].name and attributes:
                seen += 1
                listed = [
                    *attributes.get("requiredServiceAccountAnnotationKeys", []),
                    *attributes.get("optionalServiceAccountAnnotationKeys", []),
                ]
                assert listed == list(SHIPPED_ANNOTATIONS), path.name
    assert seen >= 1


def test_the_config_directory_validates_as_a_kubelet_config_directory() -> None:
    """--image-credential-provider-config=config/ (kubelet 1.34+): one provider per cloud, no
    duplicate names; the alternatives live in config/examples/, which the kubelet does not read."""
    result = cli("validate", str(CONFIG_DIR), "--json")
    report = json.loads(result.stdout)
    assert (result.returncode, report["warnings"]) == (0, [])
    assert sorted(report["providers"]) == sorted(p.name for p in PLUGINS.values())


# --- get ----------------------------------------------------------------------------------------------


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    if not (BUNDLE_DIR / "credprovider").exists():
        if os.environ.get(REQUIRE_BUNDLE_ENV) == "1":
            pytest.fail("the bundle is missing: run make build")
        pytest.skip("bundle not built (make build)")
    directory = tmp_path / "bin"
    directory.mkdir()
    for plugin in PLUGINS.values():
        (directory / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
    return directory


def aws_env(server: FakeServer, **extra: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "AKIDNODE",
        "AWS_SECRET_ACCESS_KEY": "node-secret-key",
        "AWS_ENDPOINT_URL_ECR": server.url,
        **extra,
    }


def test_get_ecr(tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer]) -> None:
    fake, server = ecr
    config = _config(tmp_path, _provider())
    result = cli(
        "get",
        f"{ECR_IMAGE}:v1",
        "--config",
        str(config),
        "--bin-dir",
        str(bin_dir),
        "--json",
        env=aws_env(server),
    )
    report = json.loads(result.stdout)
    assert (result.returncode, report["image"], report["credentialsFound"]) == (0, ECR_IMAGE, True)
    (provider,) = report["providers"]
    registry = ECR_IMAGE.split("/")[0]
    assert provider["appliedKeys"] == [registry]
    assert provider["response"]["auth"][registry] == {
        "username": "AWS",
        "password": "ecr…(29 chars)",
    }
    assert (provider["cacheKey"], 21590 < provider["cacheSeconds"] <= 21600) == (registry, True)
    assert fake.password not in result.stdout
    assert (
        "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment"
        in provider["decisions"]
    )
    shown = cli(
        "get",
        ECR_IMAGE,
        "--config",
        str(config),
        "--bin-dir",
        str(bin_dir),
        "--show-password",
        env=aws_env(server),
    )
    assert f"password {fake.password})" in shown.stdout


def test_get_reports_a_failing_provider_and_a_key_that_does_not_apply(
    tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer]
) -> None:
    _fake, server = ecr
    (bin_dir / "wrong-key-plugin").write_text(
        '#!/bin/sh\ncat >/dev/null\necho \'{"kind":"CredentialProviderResponse","apiVersion":'
        '"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Image","auth":'
        '{"123456789012.dkr.ecr.us-east-1.amazonaws.com:443":{"username":"u","password":"p"},'
        '"*.amazonaws.com":{"username":"u","password":"p"}}}\'\n'
    )
    (bin_dir / "wrong-key-plugin").chmod(0o755)
    config = _config(
        tmp_path,
        _provider(
            name="acr-credential-provider",
            args=[str(tmp_path / "missing-azure.json")],
            matchImages=["*.dkr.ecr.*.amazonaws.com"],
        ),
        _provider(name="wrong-key-plugin", matchImages=["*.dkr.ecr.*.amazonaws.com"]),
        _provider(name="auth-provider-gcp", matchImages=["gcr.io"], args=["get-credentials"]),
    )
    result = cli(
        "get",
        ECR_IMAGE,
        "--config",
        str(config),
        "--bin-dir",
        str(bin_dir),
        "--json",
        env=aws_env(server),
    )
    report = json.loads(result.stdout)
    assert (result.returncode, report["credentialsFound"]) == (1, False)
    acr, wrong, gcp = report["providers"]
    assert (acr["exitCode"], acr["response"]) == (1, None)
    assert f"cannot read the cloud config {tmp_path}/missing-azure.json" in acr["error"]
    assert wrong["appliedKeys"] == []
    assert wrong["ignoredKeys"] == {
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:443": "port differs: key has 443, image has no port (ports must be equal)",
        "*.amazonaws.com": "host label count differs (3 vs 6): each '*' matches exactly one label",
    }
    assert (gcp["matched"], gcp["ran"]) == (False, False)
    human = cli(
        "get", ECR_IMAGE, "--config", str(config), "--bin-dir", str(bin_dir), env=aws_env(server)
    )
    assert "result: the kubelet would pull WITHOUT credentials" in human.stdout
    assert "- auth-provider-gcp: matchImages do not match" in human.stdout


def test_get_with_service_account(
    tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    attributes = {
        "serviceAccountTokenAudience": "sts.amazonaws.com",
        "cacheType": "ServiceAccount",
        "requireServiceAccount": True,
        "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/ecr-role-arn"],
    }
    config = _config(tmp_path, _provider(tokenAttributes=attributes))
    env = aws_env(server, AWS_ENDPOINT_URL_STS=moto_server)
    without = json.loads(
        cli(
            "get", ECR_IMAGE, "--config", str(config), "--bin-dir", str(bin_dir), "--json", env=env
        ).stdout
    )
    assert (
        "requireServiceAccount is true and no service account token"
        in without["providers"][0]["skipped"]
    )
    token_file = write(tmp_path / "token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln\n")
    with_token = cli(
        "get",
        ECR_IMAGE,
        "--config",
        str(config),
        "--bin-dir",
        str(bin_dir),
        "--json",
        "--sa-token-file",
        str(token_file),
        "--sa-annotation",
        "eks.amazonaws.com/ecr-role-arn=arn:aws:iam::123456789012:role/r",
        env=env,
    )
    report = json.loads(with_token.stdout)
    assert report["credentialsFound"] is True
    assert fake.calls[-1].access_key != "AKIDNODE"
    # get says which role the plugin used (our plugins run at -v=1 under get)
    assert (
        "assuming role arn:aws:iam::123456789012:role/r (from annotation "
        "eks.amazonaws.com/ecr-role-arn) with the service account token"
    ) in report["providers"][0]["decisions"]


def test_get_gcp_and_azure(tmp_path: Path, bin_dir: Path, azure: Azure) -> None:
    fake = FakeMetadata()
    with serve(fake) as metadata:
        config = _config(
            tmp_path,
            _provider(
                name="auth-provider-gcp",
                matchImages=list(PLUGINS["gcp"].match_images),
                args=["get-credentials"],
            ),
            _provider(
                name="acr-credential-provider",
                matchImages=list(PLUGINS["azure"].match_images),
                args=[azure.config(useManagedIdentityExtension=True)],
            ),
        )
        env = {"GCE_METADATA_HOST": metadata.address, **azure.env}
        gcp = json.loads(
            cli(
                "get",
                "us-docker.pkg.dev/p/r/app",
                "--config",
                str(config),
                "--bin-dir",
                str(bin_dir),
                "--json",
                env=env,
            ).stdout
        )
        acr = json.loads(
            cli(
                "get",
                "myreg.azurecr.io/app",
                "--config",
                str(config),
                "--bin-dir",
                str(bin_dir),
                "--json",
                env=env,
            ).stdout
        )
    assert gcp["providers"][0]["appliedKeys"] == ["us-docker.pkg.dev", "*.pkg.dev"]
    assert gcp["providers"][0]["cacheKey"] == "<global>"
    assert acr["providers"][1]["appliedKeys"] == ["myreg.azurecr.io"]


def test_get_refuses_an_invalid_config(tmp_path: Path, bin_dir: Path) -> None:
    result = cli(
        "get",
        ECR_IMAGE,
        "--config",
        str(write(tmp_path / "c.yaml", CASES["no providers"])),
        "--bin-dir",
        str(bin_dir),
    )
    assert result.returncode == 1
    assert "the kubelet would not start with this config: failed to validate" in result.stderr


# --- explain / match ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [f"{ECR_IMAGE}:v1"],
            {
                "provider": "aws",
                "recognized": True,
                "region": "us-east-1",
                "public": False,
                "registry": "123456789012.dkr.ecr.us-east-1.amazonaws.com",
            },
        ),
        (
            ["public.ecr.aws/nginx/nginx"],
            {"provider": "aws", "recognized": True, "region": "us-east-1", "public": True},
        ),
        (
            ["myreg.eastus.geo.azurecr.io/app"],
            {"provider": "azure", "recognized": True, "loginServer": "myreg.eastus.geo.azurecr.io"},
        ),
        (["us-central1-docker.pkg.dev/p/r/app"], {"provider": "gcp", "recognized": True}),
        (
            ["nginx"],
            {
                "provider": None,
                "recognized": False,
                "image": "docker.io/library/nginx",
                "registry": "docker.io",
            },
        ),
        (
            ["quay.io/org/app", "--provider", "aws"],
            {"provider": "aws", "recognized": False, "region": None},
        ),
        (
            ["myreg.azurecr.io.evil.net/x", "--provider", "azure"],
            {"provider": "azure", "recognized": False, "loginServer": None},
        ),
    ],
)
def test_explain_json(args: list[str], expected: dict[str, Any]) -> None:
    result = cli("explain", *args, "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 0
    assert {key: report[key] for key in expected} == expected


def test_explain_imports_no_sdk() -> None:
    probe = (
        "import sys; from credprovider.cli import main\n"
        "try:\n    main(['explain', 'myreg.azurecr.io/x', '--json'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'botocore', 'azure', 'google', 'msal', 'requests'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("args", "code", "out"),
    [
        (["*.dkr.ecr.*.amazonaws.com", ECR_IMAGE], 0, "match\n"),
        (
            ["*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app"],
            1,
            "no match: port differs: pattern has no port, image has 443 (ports must be equal): "
            "add '*.dkr.ecr.*.amazonaws.com:443'\n",
        ),
        (["registry.io/team", "registry.io/teammates/app"], 0, "match\n"),
        (
            ["*.io", "a.b.io/x"],
            1,
            "no match: host label count differs (2 vs 3): each '*' matches exactly one label\n",
        ),
        (
            ["*.gcr.io", "gcr.io/p/app:v1"],
            1,
            "no match: host label count differs (3 vs 2): each '*' matches exactly one label\n"
            "(image as the kubelet passes it: gcr.io/p/app)\n",
        ),
        (
            ["docker.io", "nginx"],
            0,
            "match\n(image as the kubelet passes it: docker.io/library/nginx)\n",
        ),
        (
            ["*.azurecr.io", "myreg.azurecr.cn/app"],
            1,
            "no match: host label 3 'cn' does not match 'io'\n",
        ),
        (
            ["registry.io/team", "registry.io/other/app"],
            1,
            "no match: the image path does not start with the pattern's path '/team'\n",
        ),
        (["only-one-argument"], 2, ""),
    ],
)
def test_match(args: list[str], code: int, out: str) -> None:
    result = cli("match", *args)
    assert (result.returncode, result.stdout) == (code, out)


# --- install / migrate --------------------------------------------------------------------------------


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A stand-in bundle: an executable next to an _internal directory."""
    bundle = tmp_path / "bundle"
    (bundle / "_internal").mkdir(parents=True)
    exe = bundle / "credprovider"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_install_links_writes_a_valid_config_and_is_idempotent(
    tmp_path: Path, target: Path
) -> None:
    bin_dir, config = tmp_path / "plugins", tmp_path / "etc" / "credential-providers.yaml"
    azure_json = write(tmp_path / "azure.json", "{}")
    args = [
        "install",
        "--bin-dir",
        str(bin_dir),
        "--config-out",
        str(config),
        "--target",
        str(target),
        "--azure-config",
        str(azure_json),
    ]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    for plugin in PLUGINS.values():
        assert os.readlink(bin_dir / plugin.name) == str(target)
    loaded = yaml.safe_load(config.read_text())
    assert [p["name"] for p in loaded["providers"]] == [p.name for p in PLUGINS.values()]
    assert loaded["providers"][1]["args"] == [str(azure_json)]
    assert f"--image-credential-provider-config={config}" in first.stdout
    assert f"--image-credential-provider-bin-dir={bin_dir}" in first.stdout
    assert (
        json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)[
            "warnings"
        ]
        == []
    )
    second = cli(*args)
    assert second.returncode == 0
    assert "unchanged" in second.stdout and "linked" not in second.stdout


def test_install_never_overwrites_a_different_file_without_force(
    tmp_path: Path, target: Path
) -> None:
    bin_dir, config = tmp_path / "plugins", tmp_path / "config.yaml"
    bin_dir.mkdir()
    (bin_dir / "ecr-credential-provider").write_text("someone else's plugin")
    args = [
        "install",
        "--bin-dir",
        str(bin_dir),
        "--config-out",
        str(config),
        "--target",
        str(target),
        "--providers",
        "aws",
    ]
    refused = cli(*args)
    assert refused.returncode == 1
    assert "exists and is not a link" in refused.stderr and "--force" in refused.stderr
    assert (bin_dir / "ecr-credential-provider").read_text() == "someone else's plugin"
    forced = cli(*args, "--force")
    assert forced.returncode == 0
    assert os.readlink(bin_dir / "ecr-credential-provider") == str(target)


def test_install_copy_puts_the_bundle_in_the_bin_dir(tmp_path: Path, target: Path) -> None:
    bin_dir = tmp_path / "plugins"
    result = cli(
        "install",
        "--bin-dir",
        str(bin_dir),
        "--config-out",
        str(tmp_path / "c.yaml"),
        "--target",
        str(target),
        "--providers",
        "gcp",
        "--copy",
    )
    assert result.returncode == 0, result.stderr
    assert (bin_dir / ".credprovider" / "_internal").is_dir()
    assert os.readlink(bin_dir / "auth-provider-gcp") == str(
        bin_dir / ".credprovider" / "credprovider"
    )


def test_install_from_the_bundle_links_to_itself(tmp_path: Path, bin_dir: Path) -> None:
    plugins = tmp_path / "node-bin"
    result = cli(
        "install",
        "--bin-dir",
        str(plugins),
        "--config-out",
        str(tmp_path / "c.yaml"),
        "--providers",
        "aws",
        "--json",
        use_bundle=True,
    )
    assert result.returncode == 0, result.stderr
    assert (
        Path(os.readlink(plugins / "ecr-credential-provider"))
        == (BUNDLE_DIR / "credprovider").resolve()
    )
    # The link is to the launcher (not the interpreter in _internal/), and it runs.
    linked = subprocess.run(
        [str(plugins / "ecr-credential-provider"), "--version"], capture_output=True, check=False
    )
    assert linked.returncode == 0, linked.stderr
    assert linked.stdout.startswith(b"ecr-credential-provider version ")


def test_install_needs_a_target_from_source(tmp_path: Path) -> None:
    result = cli(
        "install", "--bin-dir", str(tmp_path / "b"), "--config-out", str(tmp_path / "c.yaml")
    )
    assert result.returncode == 1 and "pass --target" in result.stderr


@pytest.mark.parametrize(
    ("flags", "providers", "removed", "azure_args"),
    [
        (
            "--cloud-provider=aws --feature-gates=DisableKubeletCloudCredentialProviders=false,Other=true",
            ["aws"],
            [
                "--cloud-provider=aws",
                "DisableKubeletCloudCredentialProviders from "
                "--feature-gates=DisableKubeletCloudCredentialProviders=false,Other=true",
            ],
            None,
        ),
        (
            "--cloud-provider azure --azure-container-registry-config=/etc/kubernetes/acr.json",
            ["azure"],
            [
                "--cloud-provider azure",
                "--azure-container-registry-config=/etc/kubernetes/acr.json",
            ],
            ["/etc/kubernetes/acr.json"],
        ),
        (
            "--cloud-provider=azure --cloud-config=/etc/kubernetes/azure.json",
            ["azure"],
            ["--cloud-provider=azure"],
            ["/etc/kubernetes/azure.json"],
        ),
        ("--cloud-provider=gce --v=2", ["gcp"], ["--cloud-provider=gce"], None),
        ("--cloud-provider=external", [], [], None),
    ],
)
def test_migrate(
    flags: str, providers: list[str], removed: list[str], azure_args: list[str] | None
) -> None:
    plan = json.loads(cli("migrate", f"--kubelet-flags={flags}", "--json").stdout)
    assert (plan["providers"], plan["removeFlags"]) == (providers, removed)
    assert any("cloud controller manager" in note for note in plan["notes"])
    if providers:
        assert "--cloud-provider=external" in plan["addFlags"]
        config = yaml.safe_load(plan["config"])
        assert [p["name"] for p in config["providers"]] == [PLUGINS[k].name for k in providers]
        if azure_args:
            assert config["providers"][0]["args"] == azure_args
    else:
        assert plan["config"] == ""


def test_migrate_reads_a_kubelet_configuration(tmp_path: Path) -> None:
    kubelet_config = write(
        tmp_path / "kubelet.yaml",
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\nfeatureGates:\n  DisableKubeletCloudCredentialProviders: true\n"
        "imageCredentialProviderConfigPath: /etc/old.yaml\n",
    )
    plan = json.loads(
        cli(
            "migrate",
            "--kubelet-flags=--cloud-provider=aws",
            "--kubelet-config",
            str(kubelet_config),
            "--json",
        ).stdout
    )
    notes = " ".join(plan["notes"])
    assert "DisableKubeletCloudCredentialProviders feature gate is locked on" in notes
    assert "already configured (/etc/old.yaml)" in notes


def test_migrate_without_input_is_a_usage_error() -> None:
    result = cli("migrate")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(
        "credprovider migrate: nothing to read: give the kubelet's flags"
    )


def test_migrate_reads_kubeadm_flags_env_and_takes_providers(tmp_path: Path) -> None:
    flags_env = write(
        tmp_path / "kubeadm-flags.env",
        'KUBELET_KUBEADM_ARGS="--cloud-provider=external --node-ip=10.0.0.5"\n',
    )
    plan = json.loads(
        cli(
            "migrate", "--kubelet-flags-file", str(flags_env), "--providers", "aws,gcp", "--json"
        ).stdout
    )
    assert plan["providers"] == ["aws", "gcp"]
    assert plan["config"].startswith("# Written by credprovider migrate. ")
    missing = cli("migrate", "--kubelet-flags-file", str(tmp_path / "nope.env"))
    assert missing.returncode == 1
    assert (
        missing.stderr
        == f"credprovider migrate: {tmp_path / 'nope.env'}: No such file or directory\n"
    )
    unknown = cli("migrate", "--kubelet-flags=--cloud-provider=external", "--providers", "gce")
    assert unknown.returncode == 1 and "unknown provider gce" in unknown.stderr


@pytest.mark.parametrize(
    ("text", "seconds"), [("1m", 60.0), ("30s", 30.0), ("1m30s", 90.0), ("45", 45.0), ("2.5", 2.5)]
)
def test_get_timeout_takes_go_durations(text: str, seconds: float) -> None:
    from credprovider.commands.get import _timeout_seconds

    assert _timeout_seconds(text) == seconds


@pytest.mark.parametrize("text", ["1 minute", "0s", "2h", "-1s", "1x"])
def test_get_timeout_refuses_what_is_not_a_usable_duration(text: str) -> None:
    result = cli("get", "nginx", "--config", "c.yaml", "--bin-dir", "b", "--timeout", text)
    assert result.returncode == 2 and "argument --timeout" in result.stderr


@pytest.mark.skipif(
    Path("/etc/kubernetes/image-credential-provider-config.yaml").exists(),
    reason="this machine has a kubelet credential provider config at the default path",
)
def test_get_without_config_names_the_default_it_looked_for() -> None:
    result = cli("get", "nginx")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "credprovider get: give --config (nothing at the default "
        "/etc/kubernetes/image-credential-provider-config.yaml)\n"
    )


def test_get_says_why_each_provider_did_not_match(tmp_path: Path) -> None:
    """No provider matched, so none ran: for each, the nearest patterns and why they miss."""
    config = write(tmp_path / "config.yaml", (CONFIG_DIR / "aws.yaml").read_text())
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com:5000/app"
    result = cli("get", image, "--config", str(config), "--bin-dir", str(tmp_path), "--json")
    assert result.returncode == 1
    (provider,) = json.loads(result.stdout)["providers"]
    assert provider["closestMisses"][0] == {
        "pattern": "*.dkr.ecr.*.amazonaws.com",
        "reason": "port differs: pattern has no port, image has 5000 (ports must be equal): add "
        "'*.dkr.ecr.*.amazonaws.com:5000'",
    }
    text = cli("get", image, "--config", str(config), "--bin-dir", str(tmp_path)).stdout
    assert "    '*.dkr.ecr.*.amazonaws.com': port differs" in text


def test_explain_asks_for_the_repository_of_a_bare_registry_host() -> None:
    result = cli("explain", "myreg.azurecr.io")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "credprovider explain: 'myreg.azurecr.io' names only a registry host, no repository: did "
        "you mean myreg.azurecr.io/<repository>?\n"
    )
