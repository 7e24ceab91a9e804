"""``credprovider validate``: the kubelet's verdict and messages, the lints, the shipped configs."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from credprovider.tool.catalog import PLUGINS
from release.bundle import BUNDLE_DIR
from tests.helpers import (
    CONFIG_DIR,
    CONFIG_EXAMPLES,
    bundle_as_nobody,
    config_file,
    provider_entry,
    require_bundle,
)
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import write
from tests.integration.kubelet_config_cases import CASES, OK, P
from tests.unit.tool.test_config_lint import LINTS

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
    from credprovider.tool.kubeconfig.model import ConfigError
    from credprovider.tool.kubeconfig.validate import load_config

    path = write(tmp_path / "c.yaml", CASES[name])
    with pytest.raises(ConfigError) as expected:
        load_config(str(path))
    result = cli("validate", str(path), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "valid": False,
        "error": str(expected.value),
        "errors": [str(expected.value)],
        "hint": expected.value.hint,
        "warnings": [],
    }


SLIPS = {
    "fields": (
        P + "providers:\n- name: a\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "  matchImage: [x.io]\n  default_cache_duration: 1m\n  env:\n  - nmae: A\n"
        "  tokenAttributes:\n    cachetype: Token\n  bogus: 1\n",
        "providers[0].matchImage: did you mean matchImages?; providers[0]."
        "default_cache_duration: did you mean defaultCacheDuration?; providers[0].env[0].nmae: "
        "did you mean name?; providers[0].tokenAttributes.cachetype: did you mean cacheType?",
    ),
    "kind": (
        P.replace("kind: CredentialProviderConfig", "kind: CredentialProvidersConfig")
        + "providers: []\n",
        "did you mean kind: CredentialProviderConfig, apiVersion: kubelet.config.k8s.io/v1?",
    ),
    "group": (
        P.replace("kubelet.config.k8s.io/v1", "kubelet.confg.k8s.io/v1") + "providers: []\n",
        "did you mean kind: CredentialProviderConfig, apiVersion: kubelet.config.k8s.io/v1?",
    ),
    "version": (
        P.replace("kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v2") + "providers: []\n",
        "kubelet.config.k8s.io's versions are v1, v1beta1, v1alpha1",
    ),
}


@pytest.mark.parametrize("slip", SLIPS)
def test_a_slipped_name_is_said_with_the_one_meant(tmp_path: Path, slip: str) -> None:
    """A field, kind or apiVersion one slip from the config's (``matchImage``,
    ``default_cache_duration``, ``CredentialProvidersConfig``): the kubelet's message, word for
    word, and after it the name meant (an unknown field with no near name, ``bogus``, is not
    given one)."""
    text, hint = SLIPS[slip]
    result = cli("validate", str(write(tmp_path / "c.yaml", text)), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["hint"] == hint, report
    assert "did you mean" not in report["error"]


def test_validate_a_directory(tmp_path: Path) -> None:
    write(tmp_path / "b.yaml", P + "providers:\n" + OK.replace("name: a", "name: b"))
    write(tmp_path / "a.json", json.dumps(yaml.safe_load(P + "providers:\n" + OK)))
    result = cli("validate", str(tmp_path), "--json")
    report = json.loads(result.stdout)
    assert (result.returncode, report["providers"]) == (0, ["a", "b"])
    assert report["files"] == [str(tmp_path / "a.json"), str(tmp_path / "b.yaml")]


@pytest.mark.parametrize(
    ("case", "providers", "warning"), LINTS[:3], ids=[c for c, _, _ in LINTS[:3]]
)
def test_validate_lints(
    tmp_path: Path, case: str, providers: list[dict[str, Any]], warning: str
) -> None:
    result = cli("validate", str(config_file(tmp_path, *providers)), "--json")
    report = json.loads(result.stdout)
    assert (result.returncode, report["valid"]) == (0, True)
    assert any(warning in text for text in report["warnings"]), report["warnings"]


def test_validate_checks_binaries_in_the_bin_dir(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "auth-provider-gcp").write_text("not executable")
    config = config_file(
        tmp_path,
        provider_entry(),
        provider_entry(
            name="auth-provider-gcp",
            args=["get-credentials"],
            matchImages=list(PLUGINS["gcp"].match_images),
        ),
        provider_entry(
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
        f"provider 'auth-provider-gcp': {bin_dir}/auth-provider-gcp cannot be started: permission "
        "denied (not executable: chmod +x it, or link the bundle's executable): every pull it "
        "matches fails",
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


def test_a_foreign_plugin_is_one_warning_not_a_check_and_a_warning(tmp_path: Path) -> None:
    """Another plugin in the bin dir (the platform's own, or upstream's) that refuses an empty
    request: that it executes is said once, in its warning (what was not proven with it), never
    again as a passed check beside it (which read as a contradiction)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "auth-provider-gcp"
    plugin.write_text('#!/bin/sh\ncat >/dev/null\necho "error decoding request: EOF" >&2\nexit 1\n')
    plugin.chmod(0o755)
    config = config_file(
        tmp_path,
        provider_entry(
            name="auth-provider-gcp",
            args=["get-credentials"],
            matchImages=list(PLUGINS["gcp"].match_images),
        ),
    )
    report = json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)
    assert (report["valid"], report["checked"]) == (True, [])
    [warning] = [w for w in report["warnings"] if str(plugin) in w]
    assert f"{plugin} is not credprovider: it executes (exit 1 on an empty request" in warning
    text = cli("validate", str(config), "--bin-dir", str(bin_dir))
    assert text.returncode == 0
    assert [line for line in text.stdout.splitlines() if "it executes" in line] == [
        f"warning: {warning}"
    ]


@pytest.mark.parametrize(
    ("plugin", "args", "refusal"),
    [
        ("gcp", ["get-credentials", "--bogus"], "unrecognized arguments: --bogus (see --help)"),
        (
            "gcp",
            ["get-credentials", "--impersonate-service-account=puller"],
            "--impersonate-service-account: 'puller' is not a service account email "
            "(name@project.iam.gserviceaccount.com) or unique id",
        ),
        ("aws", ["--authFlow=gcr"], "unrecognized arguments: --authFlow=gcr (see --help)"),
        (
            "azure",
            ["/etc/kubernetes/azure.json", "/etc/kubernetes/other.json"],
            "expected exactly one argument (config file); Got arguments: "
            "[/etc/kubernetes/azure.json /etc/kubernetes/other.json]",
        ),
    ],
)
def test_validate_fails_a_provider_whose_plugin_refuses_its_args(
    tmp_path: Path, plugin: str, args: list[str], refusal: str
) -> None:
    """Every pull through it would fail: the binary starts, but not with these args (the plugin
    refuses them even with --version appended, as the upstream Go plugins do)."""
    name = f"{PLUGINS[plugin].name}-team"
    entry = provider_entry(name=name, args=args, matchImages=["registry.example"])
    assert _validated_alone(tmp_path, entry, refusal)["valid"] is False


_SP = '{"cloud": "AzurePublicCloud", "tenantId": "t", "aadClientId": "c", '


@pytest.mark.parametrize(
    ("azure_json", "error", "warning"),
    [
        # a hand edit's slip: the plugin read it on every pull and failed, validate said valid
        ('{"cloud": "AzurePublicCloud", "tenantId": ', "invalid cloud config: {json} is neither "
         "JSON (Expecting value at line 1) nor YAML", None),
        (_SP + '"aadClientCertPath": "{dir}/gone.pfx"}', "cannot load the client certificate "
         "{dir}/gone.pfx: no such file or directory", None),
        (_SP + '"aadClientCertPath": "/dev/zero"}', "cannot load the client certificate "
         "/dev/zero: is a character device, not a regular file", None),
        (_SP + '"aadClientCertPath": "{dir}", "useManagedIdentityExtension": true}', None, None),
        (_SP + '"aadClientSecreet": "s", "useManagedIdentityExtension": true}', None,
         "{json}: ignoring unknown key 'aadClientSecreet': did you mean 'aadClientSecret'?"),
    ],
)  # fmt: skip
def test_validate_fails_an_azure_json_every_pull_would_fail_on(
    tmp_path: Path, azure_json: str, error: str | None, warning: str | None
) -> None:
    """The plugin's start check read its args only: an azure.json a hand edit broke, or whose
    service principal's certificate is not there, failed every pull while validate (and install)
    said the plugin answers. It is read as a pull reads it (the certificate only when it is the
    node's identity: a managed identity's node never reads it); a misspelt key is its warning."""
    name = "acr-credential-provider"
    path = tmp_path / "azure.json"
    path.write_text(azure_json.replace("{dir}", str(tmp_path)))
    path.chmod(0o600)
    said = {"json": path, "dir": tmp_path}
    report = _validated_alone(
        tmp_path, provider_entry(name=name, args=[str(path)], matchImages=["*.azurecr.io"]),
        error and error.format(**said),
    )  # fmt: skip
    warned = [w for w in report["warnings"] if "answers" in w]
    assert warned == (
        [
            f"provider '{name}': {tmp_path}/bin/{name} answers '{name} version "
            f"{report_version(report)} (credprovider)', and says {name}: warning: "
            f"{warning.format(**said)}"
        ]
        if warning
        else []
    )


def _validated_alone(place: Path, entry: dict[str, Any], error: str | None) -> dict[str, Any]:
    """validate --bin-dir's report on a config of ``entry`` alone, its plugin linked to the built
    bundle in ``place``/bin; checked to refuse the plugin with the ``error`` its line says (or,
    ``None``, nothing)."""
    name = entry["name"]
    bin_dir = place / "bin"
    bin_dir.mkdir()
    require_bundle()
    (bin_dir / name).symlink_to(BUNDLE_DIR.resolve() / "credprovider")
    config = config_file(place, entry)
    result = cli("validate", str(config), "--bin-dir", str(bin_dir), "--json", use_bundle=True)
    report: dict[str, Any] = json.loads(result.stdout)
    refused = f"provider '{name}': {bin_dir}/{name} refuses its args: {name}: error: {error}"
    assert report["errors"] == ([f"{refused}: every pull it matches fails"] if error else [])
    assert result.returncode == (1 if error else 0), result.stdout
    return report


@pytest.mark.parametrize(
    ("key_file", "flow", "error"),
    [
        ('{"type": "service_account", "private_key": ', "gcr", "the file is not JSON"),
        ('{"type": "nope"}', "gcr", "the file's type is 'nope', none google-auth loads (one of "
         "service_account, authorized_user, external_account, external_account_authorized_user, "
         "impersonated_service_account, gdch_service_account)"),
        ('{"type": "service_account", "private_key": "x", "client_email": "a@b"}', "gcr",
         "Failed to load service account credentials from the file: Service account info was not "
         "in the expected format, missing fields token_uri."),
        ('{"type": "authorized_user", "client_id": "a", "client_secret": "b", '
         '"refresh_token": "c"}', "gcr", None),
        ('{"type": "nope"}', "dockercfg", None),  # that flow never reads it
    ],
)  # fmt: skip
def test_validate_fails_a_google_credentials_file_every_pull_would_fail_on(
    tmp_path: Path, key_file: str, flow: str, error: str | None
) -> None:
    """The start check read the args only: a GOOGLE_APPLICATION_CREDENTIALS file a hand edit
    broke failed every pull while validate said the plugin answers. It is loaded as a pull loads
    it (google-auth's own checks), nothing fetched."""
    path = tmp_path / "key.json"
    path.write_text(key_file)
    path.chmod(0o600)
    entry = provider_entry(name="auth-provider-gcp", args=["get-credentials", "--authFlow", flow],
                           matchImages=["gcr.io"])  # fmt: skip
    entry["env"] = [{"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": str(path)}]
    _validated_alone(tmp_path, entry, error and f"GOOGLE_APPLICATION_CREDENTIALS={path}: {error}")


_FIX_AWS = (
    "fix the AWS settings the plugin runs with (AWS_PROFILE, AWS_CONFIG_FILE, "
    "AWS_SHARED_CREDENTIALS_FILE and AWS_* keys in the provider's env, or the node's ~/.aws files)"
)


@pytest.mark.parametrize(
    ("config_text", "profile", "error"),
    [
        ("[default\nregion = us-east-1\n", None, "Unable to parse config file: {path}"),
        ("[profile team]\nregion = us-east-1\n", "tema",
         "The config profile (tema) could not be found"),
        ("[profile team]\nregion = us-east-1\n", "team", None),
    ],
)  # fmt: skip
def test_validate_fails_aws_settings_every_pull_would_fail_on(
    tmp_path: Path, config_text: str, profile: str | None, error: str | None
) -> None:
    """The start check read the args only: an AWS config file a hand edit left unparseable, or an
    AWS_PROFILE it does not have, failed every pull while validate said the plugin answers. The
    settings are read as botocore reads them for a pull, nothing fetched."""
    path = tmp_path / "aws-config"
    path.write_text(config_text)
    path.chmod(0o600)
    entry = provider_entry(
        name="ecr-credential-provider", matchImages=["*.dkr.ecr.*.amazonaws.com"]
    )
    entry["env"] = [{"name": "AWS_CONFIG_FILE", "value": str(path)}] + (
        [{"name": "AWS_PROFILE", "value": profile}] if profile else []
    )
    said = error and f"botocore cannot read the AWS settings: {error.format(path=path)}; {_FIX_AWS}"
    _validated_alone(tmp_path, entry, said)


def test_the_settings_check_gives_no_verdict_as_another_user() -> None:
    """As root the start check reads each plugin's settings as a pull does; an operator without
    root may not read root's azure.json, key file or AWS config, and a refusal only that user
    gets is no kubelet verdict (they said "refuses its args: ... Permission denied: every pull it
    matches fails"): as another user the check is the args' alone."""
    if os.geteuid() != 0:
        pytest.skip("files of root's")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="settings-", dir="/tmp"))
    try:
        place.chmod(0o755)
        files = {
            "azure.json": '{"cloud": "AzurePublicCloud", "useManagedIdentityExtension": true}',
            "key.json": '{"type": "nope"}',  # refused as root: the check reads it
            "aws-config": "[default]\nregion = us-east-1\n",
        }
        for name, text in files.items():
            (place / name).write_text(text)
            (place / name).chmod(0o600)
        bin_dir = place / "bin"
        bin_dir.mkdir(mode=0o755)
        for plugin in PLUGINS.values():
            (bin_dir / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
        config = config_file(
            place,
            provider_entry(name="acr-credential-provider", matchImages=["*.azurecr.io"],
                           args=[f"{place}/azure.json"]),
            provider_entry(name="auth-provider-gcp", matchImages=["gcr.io"],
                           args=["get-credentials"], env=[{
                               "name": "GOOGLE_APPLICATION_CREDENTIALS",
                               "value": f"{place}/key.json"}]),
            provider_entry(name="ecr-credential-provider", matchImages=["*.dkr.ecr.*.amazonaws.com"],
                           env=[{"name": "AWS_CONFIG_FILE", "value": f"{place}/aws-config"}]),
        )  # fmt: skip
        config.chmod(0o644)
        args = ("validate", str(config), "--bin-dir", str(bin_dir), "--json")
        as_root = json.loads(cli(*args, use_bundle=True).stdout)
        refused = [e.split(": error: ")[1] for e in as_root["errors"]]
        assert [e[: e.index(":")] for e in refused] == [
            f"GOOGLE_APPLICATION_CREDENTIALS={place}/key.json"
        ], as_root["errors"]
        nobody = bundle_as_nobody(*args)
        assert (nobody.returncode, json.loads(nobody.stdout)["errors"]) == (0, []), nobody.stdout
    finally:
        shutil.rmtree(place)


def report_version(report: dict[str, Any]) -> str:
    """The version the bundle's plugin said, from what validate proved or warned."""
    said = " ".join(report["warnings"] + report.get("checked", []))
    return said.split(" version ", 1)[1].split(" ", 1)[0]


@pytest.mark.parametrize(
    ("args", "asked"),
    [
        (["--help"], "its help (-h or --help)"),
        (["-h", "--region", "us-east-1"], "its help (-h or --help)"),
        (["--version"], "its version (--version, or -v with no level after it)"),
        (["-v"], "its version (--version, or -v with no level after it)"),
    ],
)
def test_args_asking_for_help_or_version_fail_every_pull(
    tmp_path: Path, args: list[str], asked: str
) -> None:
    """The plugin prints its help or version and exits 0 on every exec: the kubelet finds no
    response. The check's own --version hid it: "--version" passed as "it answers", and "--help"
    was said to be another program than credprovider ("as /bin/true does"). "-v 4" is a level."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    require_bundle()
    (bin_dir / "ecr-credential-provider").symlink_to(BUNDLE_DIR.resolve() / "credprovider")
    config = config_file(tmp_path, provider_entry(args=args))
    result = cli("validate", str(config), "--bin-dir", str(bin_dir), "--json", use_bundle=True)
    report = json.loads(result.stdout)
    assert (result.returncode, report["valid"]) == (1, False)
    assert report["errors"] == [
        f"provider 'ecr-credential-provider': {bin_dir}/ecr-credential-provider is given args "
        f"that ask for {asked}: it prints that and exits, answering no request: every pull it "
        "matches fails"
    ]
    levelled = config_file(tmp_path, provider_entry(args=["-v", "4"]))
    fine = cli("validate", str(levelled), "--bin-dir", str(bin_dir), "--json", use_bundle=True)
    assert json.loads(fine.stdout)["errors"] == []


def test_validate_on_a_node_warns_about_files_the_args_name(tmp_path: Path) -> None:
    """With --bin-dir (checking a node), a file an argument names must exist there; without it
    (checking a config anywhere) the file is not looked for."""
    require_bundle()
    azure_json = tmp_path / "azure.json"
    config = config_file(
        tmp_path,
        provider_entry(
            name="acr-credential-provider",
            args=[str(azure_json)],
            matchImages=list(PLUGINS["azure"].match_images),
        ),
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "acr-credential-provider").symlink_to(BUNDLE_DIR / "acr-credential-provider")
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


def test_validate_on_a_node_warns_about_token_files_the_env_names(tmp_path: Path) -> None:
    """A token file the plugin reads whole, named in the provider's env (a typo in the path, a
    FIFO where the file goes), is a warning on the node, as a file its args name is; other env
    values are no paths to look for."""
    require_bundle()
    token = tmp_path / "token"
    os.mkfifo(tmp_path / "fifo")
    env = {
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token),
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(tmp_path / "fifo"),
        "AWS_ROLE_ARN": "/not/a/file/to/look/for",
    }
    config = config_file(
        tmp_path,
        provider_entry(env=[{"name": name, "value": value} for name, value in env.items()]),
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ecr-credential-provider").symlink_to(BUNDLE_DIR / "ecr-credential-provider")
    on_node = json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)
    said = "provider 'ecr-credential-provider': env"
    assert on_node["warnings"] == [
        f"{said} AWS_WEB_IDENTITY_TOKEN_FILE names {token}, which does not exist on this node: "
        "ecr-credential-provider fails every pull it matches until it does",
        f"{said} AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE names {tmp_path / 'fifo'}, which is a "
        "FIFO, not a regular file: ecr-credential-provider refuses it and fails every pull it "
        "matches",
    ]
    token.write_text("eyJ.token.sig")
    (tmp_path / "fifo").unlink()
    (tmp_path / "fifo").write_text("eyJ.token.sig")
    for path in (token, tmp_path / "fifo"):
        path.chmod(0o600)  # tokens: root's alone (the next test)
    again = json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)
    assert again["warnings"] == []


# Per plugin: the provider's args and env (``{d}``: the test's directory), the file holding a
# secret, its text, the secret's name said, and the same file without one (or None: always one).
SECRET_FILES = {
    "azure": (
        {"args": ["{d}/azure.json"]},
        "azure.json",
        '{"cloud": "AzurePublicCloud", "tenantId": "t", "aadClientId": "c", '
        '"aadClientSecret": "Zq8Q~a-secret-value"}',
        "aadClientSecret",
        '{"useManagedIdentityExtension": true, "aadClientSecret": ""}',
    ),
    "gcp": (
        {"args": ["get-credentials"], "env": {"GOOGLE_APPLICATION_CREDENTIALS": "{d}/key.json"}},
        "key.json",
        '{"type": "service_account", "client_email": "a@p.iam.gserviceaccount.com", '
        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQ-secret-value"}',
        "private_key",
        '{"type": "external_account", "audience": "//iam.googleapis.com/x"}',
    ),
    "aws": (
        {"env": {"AWS_SHARED_CREDENTIALS_FILE": "{d}/credentials"}},
        "credentials",
        "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "Aws_Secret_Access_Key=wJalrXUtnFEMI-secret-value\n",
        "aws_secret_access_key",
        "[default]\nregion = us-east-1\naws_secret_access_key =\n",
    ),
    "aws-token": (
        {"env": {"AWS_WEB_IDENTITY_TOKEN_FILE": "{d}/token"}},
        "token",
        "eyJhbGciOiJSUzI1NiJ9.secret-value.sig",
        "a token (AWS_WEB_IDENTITY_TOKEN_FILE)",
        None,
    ),
}


@pytest.mark.parametrize("case", SECRET_FILES, ids=str)
def test_validate_on_a_node_warns_of_a_secret_file_others_may_read(case: str) -> None:
    """A file the plugin reads that gives its identity (azure.json's client secret, a service
    account key, AWS keys, a web identity token) left 0644 on a node: every user may read it
    there and be the node. Validate on the node (and doctor, which runs the same lints) says so,
    naming the secret, never its value, as root and as another user; a file only root may read,
    or one without a secret, is not named."""
    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="secret-", dir="/tmp"))  # pytest's tmp is root's only
    try:
        _warns_of_a_secret_file(place, case)
    finally:
        shutil.rmtree(place)


def _warns_of_a_secret_file(place: Path, case: str) -> None:
    plugin = PLUGINS[case.split("-")[0]]
    given, name, text, secret, without = SECRET_FILES[case]
    place.chmod(0o755)
    held = place / name
    held.write_text(text)
    held.chmod(0o644)
    env = [{"name": k, "value": v.format(d=place)} for k, v in given.get("env", {}).items()]
    entry = {"args": [a.format(d=place) for a in given["args"]]} if "args" in given else {}
    config = config_file(
        place,
        provider_entry(name=plugin.name, matchImages=list(plugin.match_images), env=env, **entry),
    )
    config.chmod(0o644)
    bin_dir = place / "bin"
    bin_dir.mkdir(mode=0o755)
    (bin_dir / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
    args = ("validate", str(config), "--bin-dir", str(bin_dir), "--json")
    warned = (
        f"provider '{plugin.name}': {held} gives {secret}, and others may read it (mode "
        f"-rw-r--r--): chmod 600 {held}, or give the plugin an identity instead"
    )
    for run in (cli(*args, use_bundle=True), bundle_as_nobody(*args)):
        assert "secret-value" not in run.stdout + run.stderr
        said = [w for w in json.loads(run.stdout)["warnings"] if "others may read" in w]
        assert [w[: len(warned)] for w in said] == [warned], run.stdout + run.stderr
    held.chmod(0o600)
    said = json.loads(cli(*args, use_bundle=True).stdout)["warnings"]
    assert not [w for w in said if "others may read" in w], said
    if without is not None:
        held.write_text(without)
        held.chmod(0o644)
        said = json.loads(cli(*args, use_bundle=True).stdout)["warnings"]
        assert not [w for w in said if "others may read" in w], said


def test_validate_on_a_node_warns_of_a_certificate_others_may_read() -> None:
    """azure.json (root's alone) naming a service principal's certificate (a PKCS#12 file, not
    text) that others may read: its private key is the identity."""
    if os.geteuid() != 0:
        pytest.skip("a directory of root's")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="secret-", dir="/tmp"))
    try:
        certificate = place / "sp.pfx"
        certificate.write_bytes(b"\x30\x82\x0a\x1f\x02\x01\x03\xff\xfe" * 40)
        certificate.chmod(0o644)
        azure_json = place / "azure.json"
        azure_json.write_text(json.dumps({"tenantId": "t", "aadClientId": "c",
                                          "aadClientCertPath": str(certificate)}))  # fmt: skip
        azure_json.chmod(0o600)
        plugin = PLUGINS["azure"]
        config = config_file(place, provider_entry(name=plugin.name, args=[str(azure_json)],
                                                   matchImages=list(plugin.match_images)))  # fmt: skip
        (place / "bin").mkdir()
        (place / "bin" / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
        done = cli("validate", str(config), "--bin-dir", str(place / "bin"), "--json")
        said = [w for w in json.loads(done.stdout)["warnings"] if "others may read" in w]
        assert said == [
            f"provider 'acr-credential-provider': {certificate} gives the service principal's "
            f"certificate and private key, and others may read it (mode -rw-r--r--): chmod 600 "
            f"{certificate}, or give the plugin an identity instead (an instance role, a "
            "workload identity)"
        ], done.stdout
    finally:
        shutil.rmtree(place)


# The examples an operator must fill in, and the placeholders validate names in each.
WITH_PLACEHOLDERS = {
    "gcp-workload-identity.yaml": ("auth-provider-gcp", "PROJECT, LOCATION, CLUSTER"),
    "gcp-federation.yaml": ("auth-provider-gcp", "PROJECT_NUMBER, POOL, PROVIDER"),
    "azure-identity-bindings.yaml": (
        "acr-credential-provider",
        "IB_SNI_NAME, API-SERVER-IP, DEFAULT_CLIENT_ID",
    ),
}


@pytest.mark.parametrize(
    "example",
    [e for e in CONFIG_EXAMPLES if e.name not in WITH_PLACEHOLDERS],
    ids=lambda p: p.name,
)
def test_examples_validate_without_warnings(example: Path) -> None:
    result = cli("validate", str(example), "--json")
    assert (result.returncode, json.loads(result.stdout)["warnings"]) == (0, [])


@pytest.mark.parametrize("key", sorted(PLUGINS))
def test_examples_carry_the_complete_match_images(key: str) -> None:
    plugin = PLUGINS[key]
    if plugin.opt_in:  # its matchImages are the operator's (config/examples/registries.yaml)
        assert not plugin.match_images
        return
    for path in CONFIG_EXAMPLES:
        for provider in yaml.safe_load(path.read_text())["providers"]:
            if provider["name"] == plugin.name:
                assert tuple(provider["matchImages"]) == plugin.match_images, path.name


def test_no_shipped_config_opts_every_irsa_role_into_image_pulls() -> None:
    """The generic IRSA annotation is opt-in (docs/clouds.md): the shipped service-account configs list
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
    assert sorted(report["providers"]) == sorted(p.name for p in PLUGINS.values() if not p.opt_in)


@pytest.mark.parametrize(
    ("case", "hint"),
    [
        (
            "tokenAttributes in v1beta1",
            "tokenAttributes exists only in apiVersion kubelet.config.k8s.io/v1: use it",
        ),
        ("duplicate names", "in {path} and in {path}"),
    ],
)
def test_validate_adds_a_hint_after_the_kubelets_words(
    tmp_path: Path, case: str, hint: str
) -> None:
    """The kubelet's message stays word for word (tests/integration/test_kubelet_config.py); what
    to do follows it in parentheses."""
    path = write(tmp_path / "c.yaml", CASES[case])
    result = cli("validate", str(path))
    assert result.returncode == 1
    assert result.stdout.rstrip().endswith(f"({hint.format(path=path)})"), result.stdout


@pytest.mark.parametrize("example", sorted(WITH_PLACEHOLDERS))
def test_examples_with_placeholders_say_so(example: str) -> None:
    """An example copied as it is: its placeholders are named, and only they."""
    result = cli("validate", str(CONFIG_DIR / "examples" / example), "--json")
    provider, placeholders = WITH_PLACEHOLDERS[example]
    assert json.loads(result.stdout)["warnings"] == [
        f"provider '{provider}': {placeholders} look like placeholders left from an example: put "
        "your own values there"
    ]


@pytest.mark.parametrize("command", ["validate", "doctor"])
def test_a_file_named_by_mistake_is_not_printed_whole(tmp_path: Path, command: str) -> None:
    """The kubelet quotes a file without a kind whole: azure.json named by mistake would have its
    client secret printed. Only the first 64 characters are."""
    secret = json.dumps({"tenantId": "t", "aadClientId": "app", "aadClientSecret": "s3cr3t" * 40})
    path = tmp_path / "azure.json"
    path.write_text(secret + "\n")
    args = (
        [str(path)]
        if command == "validate"
        else ["--offline", "--config", str(path), "--bin-dir", str(tmp_path)]
    )
    result = cli(command, *args)
    shown = result.stdout + result.stderr
    assert result.returncode == 1 and "Object 'Kind' is missing in '{\"tenantId\"" in shown
    assert secret[64:128] not in shown and "more characters)" in shown


def test_the_registry_plugin_without_its_token_is_said(tmp_path: Path) -> None:
    """registry-credential-provider answers only with the pod's token: an entry without
    tokenAttributes (the kubelet then sends none) is a warning naming what to set."""
    entry = {"name": PLUGINS["registries"].name, "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
             "matchImages": ["quay.example.com"], "defaultCacheDuration": "1m",
             "args": ["--backend", "quay", "--url", "https://quay.example.com", "--robot", "a+b"]}  # fmt: skip
    config = {"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig"}
    path = write(tmp_path / "c.json", json.dumps({**config, "providers": [entry]}))
    result = cli("validate", str(path), "--json")
    (said,) = json.loads(result.stdout)["warnings"]
    assert result.returncode == 0 and "without tokenAttributes the kubelet sends none" in said
    entry["tokenAttributes"] = {"serviceAccountTokenAudience": "q", "cacheType": "Token"}
    write(path, json.dumps({**config, "providers": [entry]}))
    assert json.loads(cli("validate", str(path), "--json").stdout)["warnings"] == []


def test_the_cache_dir_is_no_file_to_find_the_plugin_makes_it(tmp_path: Path) -> None:
    """``--cache-dir`` (either form) names a directory the plugin makes on its first exec: no
    warning that it is missing, where a file the plugin's own args name that is missing is one."""
    require_bundle()
    cache, also = tmp_path / "cache" / "ecr", tmp_path / "other"
    config = config_file(
        tmp_path,
        provider_entry(
            args=[f"--cache-dir={cache}", "--v=2"], matchImages=["*.dkr.ecr.*.amazonaws.com"]
        ),
        provider_entry(
            name="ecr-credential-provider-two",
            args=["--cache-dir", str(also), str(tmp_path / "missing.json")],
            matchImages=["1.dkr.ecr.us-east-1.amazonaws.com"],
        ),
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("ecr-credential-provider", "ecr-credential-provider-two"):
        (bin_dir / name).symlink_to(BUNDLE_DIR / "ecr-credential-provider")
    warnings = json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)[
        "warnings"
    ]
    assert not [w for w in warnings if str(cache) in w or str(also) in w], warnings
    assert [w for w in warnings if "missing.json, which does not exist" in w], warnings


def test_a_urls_password_in_the_args_is_never_printed(tmp_path: Path) -> None:
    """An operator's --url with a password in it (refused: a credential goes in no URL): the
    plugin's own line, validate's warning that quotes the args, and its --json all leave the
    userinfo out, through the bundle as the kubelet would run the plugin."""
    require_bundle()
    secret = "s3cr3t-in-the-url"
    args = ["--backend", "quay", "--url", f"https://robot:{secret}@q.example", "--robot", "a+b",
            "--registry", "registry.example.test"]  # fmt: skip
    entry = provider_entry(
        name="registry-credential-provider",
        matchImages=["registry.example.test"],
        args=args,
        tokenAttributes={
            "serviceAccountTokenAudience": "quay",
            "requireServiceAccount": True,
            "cacheType": "Token",
        },
    )
    config = str(config_file(tmp_path, entry))
    text = cli("validate", config, "--bin-dir", str(BUNDLE_DIR), use_bundle=True)
    as_json = cli("validate", config, "--bin-dir", str(BUNDLE_DIR), "--json", use_bundle=True)
    assert "https://…@q.example" in text.stdout + text.stderr, text.stdout + text.stderr
    for done in (text, as_json):
        assert secret not in done.stdout + done.stderr
    json.loads(as_json.stdout)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a noexec tmpfs in a namespace of its own")
def test_a_plugin_on_a_noexec_mount_is_said_as_such(tmp_path: Path) -> None:
    """A copied bundle on a filesystem mounted noexec (COS's /var): execve refuses it whatever
    its mode, and the fix is another mount, not chmod +x (said before)."""
    import subprocess
    import sys

    from release.bundle import REPO
    from tests.helpers import private

    config = config_file(tmp_path, provider_entry())
    bin_dir = tmp_path / "noexec"
    bin_dir.mkdir()
    script = (
        'mount -t tmpfs -o noexec noexec "$0" && cp /bin/true "$0/ecr-credential-provider" && '
        'chmod 755 "$0/ecr-credential-provider" && exec "$@"'
    )
    done = subprocess.run(
        private(["sh", "-c", script, str(bin_dir), sys.executable, "-m", "credprovider",
                 "credprovider", "validate", str(config), "--bin-dir", str(bin_dir), "--json"]),
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    [error] = json.loads(done.stdout)["errors"]
    assert "cannot be started: permission denied (its filesystem is mounted noexec" in error, error
    assert "chmod" not in error


@pytest.mark.parametrize(
    ("text", "kubelet_says", "what"),
    [
        ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
         'failed to decode "KubeletConfiguration" (wrong Kind)', "the kubelet's own --config"),
        ("apiVersion: v1\nkind: Config\nclusters: []\n",
         'no kind "Config" is registered for version "v1"', "a kubeconfig"),
    ],
)  # fmt: skip
def test_a_file_of_another_kind_is_named_for_what_it_is(
    tmp_path: Path, text: str, kubelet_says: str, what: str
) -> None:
    """The operator's commonest wrong file (the kubelet's --config, its kubeconfig): the kubelet's
    words unchanged, then what the file is and which to give instead."""
    path = write(tmp_path / "c.yaml", text)
    result = cli("validate", str(path))
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    assert line.startswith(f'invalid: error decoding config "{path}": {kubelet_says}')
    assert line.endswith(
        f"(this file is {what}, not a CredentialProviderConfig: give the file the kubelet's "
        "--image-credential-provider-config names (with no PATH, validate finds it))"
    )


def test_the_start_check_reads_a_relative_path_from_where_the_kubelet_runs_its_plugins(
    tmp_path: Path,
) -> None:
    """The kubelet gives its plugins no directory of their own: they run in its own, ``/`` (a
    system service's, systemd.exec(5) WorkingDirectory=). The start check ran them where the
    operator stood, so that a broken azure.json there, named by a relative path, refused a
    plugin the kubelet would start (and a good one there passed a plugin it would fail). A
    relative --bin-dir is still the operator's."""
    name = "acr-credential-provider"
    require_bundle()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / name).symlink_to(BUNDLE_DIR.resolve() / "credprovider")
    (tmp_path / "azure.json").write_text('{"cloud": "AzurePublicCloud", "tenantId": ')
    config = config_file(
        tmp_path, provider_entry(name=name, args=["azure.json"], matchImages=["*.azurecr.io"])
    )
    result = cli(
        "validate", str(config), "--bin-dir", "bin", "--json", use_bundle=True, cwd=tmp_path
    )
    report = json.loads(result.stdout)
    assert report["errors"] == [] and result.returncode == 0, result.stdout
    assert report["checked"] == [
        f"provider '{name}': bin/{name}: it answers '{name} version {report_version(report)} "
        "(credprovider)'"
    ]
    assert any("azure.json" in w and "relative" in w for w in report["warnings"]), report
