"""#30 class 4 on the plugins' side: a file on the node that a plugin reads (azure.json, the file
GOOGLE_APPLICATION_CREDENTIALS names) which is a FIFO, a device, a directory or far too large is
one line naming it, at once: never a wait until the deadline blamed on the network, never a read
until memory runs out."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from emulators.harness import Emulator
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import SPECIAL_FILES, make_special, require_bundle

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
# botocore's chain reaches a token file only without keys in the environment.
NO_KEYS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
Naming = Callable[[str, Path], tuple[list[str], dict[str, str]]]


def _azure_json(**settings: object) -> Naming:
    """azure.json (tenant t, client c) with ``settings``, a value "PATH" standing for the file."""

    def naming(path: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
        config = tmp.parent / f"{tmp.name}-azure.json"
        given = {k: path if v == "PATH" else v for k, v in settings.items()}
        config.write_text(json.dumps({"cloud": "AzurePublicCloud", "tenantId": "t", **given}))
        return [str(config)], {}

    return naming


def _role_chain(path: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
    """A profile whose role is assumed with a source profile's web identity token file (botocore
    makes that provider only as it resolves the chain)."""
    config = tmp.parent / f"{tmp.name}-aws-config"
    config.write_text(
        "[profile puller]\nrole_arn = arn:aws:iam::123456789012:role/puller\n"
        "source_profile = node\n[profile node]\n"
        f"role_arn = arn:aws:iam::123456789012:role/node\nweb_identity_token_file = {path}\n"
    )
    return [], {**NO_KEYS, "AWS_CONFIG_FILE": str(config), "AWS_PROFILE": "puller"}


# the setting -> (plugin, image, how the file is named: args, env). The SDKs' own readers
# (botocore's token files, azure-identity's token file and certificate, OpenSSL's CA bundle)
# would read a FIFO until the deadline and /dev/zero until memory ran out: they are read for them.
NAMED_BY: dict[str, tuple[str, str, Naming]] = {
    "azure.json": ("acr-credential-provider", "contoso.azurecr.io/app", lambda p, _: ([p], {})),
    "GOOGLE_APPLICATION_CREDENTIALS": (
        "auth-provider-gcp",
        "gcr.io/p/app",
        lambda p, _: (["get-credentials"], {"GOOGLE_APPLICATION_CREDENTIALS": p}),
    ),
    "AWS_WEB_IDENTITY_TOKEN_FILE": (
        "ecr-credential-provider",
        ECR_IMAGE,
        lambda p, _: (
            [],
            {
                **NO_KEYS,
                "AWS_WEB_IDENTITY_TOKEN_FILE": p,
                "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/puller",
            },
        ),
    ),
    "a source profile's web_identity_token_file": (
        "ecr-credential-provider",
        ECR_IMAGE,
        _role_chain,
    ),
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": (
        "ecr-credential-provider",
        ECR_IMAGE,
        lambda p, _: (
            [],
            {
                **NO_KEYS,
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": p,
                "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9/v1/credentials",
            },
        ),
    ),
    "AWS_CA_BUNDLE": (
        "ecr-credential-provider",
        ECR_IMAGE,
        lambda p, _: ([], {"AWS_CA_BUNDLE": p, "AWS_ENDPOINT_URL_ECR": "https://127.0.0.1:9/"}),
    ),
    "aadFederatedTokenFile": (
        "acr-credential-provider",
        "contoso.azurecr.io/app",
        _azure_json(
            aadClientId="c",
            useFederatedWorkloadIdentityExtension=True,
            aadFederatedTokenFile="PATH",
        ),
    ),
    "aadClientCertPath": (
        "acr-credential-provider",
        "contoso.azurecr.io/app",
        _azure_json(aadClientId="c", aadClientCertPath="PATH"),
    ),
}
# A directory there is OpenSSL's capath (as requests allows), read by the plugin: an empty one
# holds no certificate OpenSSL could find; its cap is a whole trust store's.
CA_BUNDLE_ROUTES = ("AWS_CA_BUNDLE",)


@pytest.mark.parametrize("special", list(SPECIAL_FILES))
@pytest.mark.parametrize("named_by", list(NAMED_BY))
def test_a_special_node_file_is_one_line_at_once(
    aws: Emulator, gcp: Emulator, azure: Emulator, tmp_path: Path, named_by: str, special: str
) -> None:
    require_bundle()
    plugin, image, naming = NAMED_BY[named_by]
    says = SPECIAL_FILES[special]
    if named_by in CA_BUNDLE_ROUTES and special == "a directory":
        says = "holds no certificate under a hashed name (HASH.0: run c_rehash on it)"
    if named_by in CA_BUNDLE_ROUTES and special == "2 GiB":
        says = "is larger than 16 MiB"  # a whole trust store's cap
    make_special(tmp_path / "special", special)
    path = str(tmp_path / "special")
    args, env = naming(path, tmp_path)
    emulator_env = {"acr": azure.env, "aut": gcp.env, "ecr": aws.env}[plugin[:3]]
    started = time.monotonic()
    run = run_plugin(
        plugin,
        request_bytes(image),
        [*args, "--deadline=20s"],
        {**emulator_env, **env},
        use_bundle=True,
    )
    assert time.monotonic() - started < 10, "waited for the deadline"
    lines = [line for line in run.stderr.splitlines() if "test mode" not in line]
    assert run.code == 1 and run.stdout == b"" and len(lines) == 1, run.stderr
    assert path in lines[0] and says in lines[0], run.stderr
    assert "Traceback" not in run.stderr and "report it" not in run.stderr


@pytest.mark.parametrize("setting", ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"])
def test_a_profile_file_botocore_cannot_use_is_the_settings_to_fix(
    aws: Emulator, tmp_path: Path, setting: str
) -> None:
    """A profile file botocore would parse whole: far too large is refused before it is read; one
    it cannot parse is the node's settings to fix, never "the service is failing". One named that
    is not a regular file (a directory, a FIFO, a device), which botocore skips without a word and
    the AWS SDK for Go refuses: said, naming the setting."""
    require_bundle()
    huge, broken, fifo = tmp_path / "huge", tmp_path / "broken", tmp_path / "fifo"
    huge.write_bytes(b"[default]\n" + b"#" * (2 << 20))
    broken.write_text("[default\nregion = us-east-1\n")
    os.mkfifo(fifo)
    cases = (  # (as the setting names it, the file, what the line says)
        (str(huge), huge, "is larger than 1 MiB"),
        ("~/huge", huge, "is larger than 1 MiB"),  # botocore expands ~ (and $VARIABLES)
        (str(broken), broken, "fix the AWS settings"),
        (str(tmp_path), tmp_path, f"named by {setting} cannot be used: is a directory"),
        (str(fifo), fifo, "cannot be used: is a FIFO, not a regular file"),
        ("/dev/zero", Path("/dev/zero"), "is a character device, not a regular file"),
    )
    for named, path, says in cases:
        run = run_plugin(
            "ecr-credential-provider",
            request_bytes(ECR_IMAGE),
            ["--deadline=20s"],
            {**aws.env, setting: named, "AWS_PROFILE": "default", "HOME": str(tmp_path)},
            use_bundle=True,
        )
        lines = [line for line in run.stderr.splitlines() if "test mode" not in line]
        assert run.code == 1 and run.stdout == b"" and len(lines) == 1, run.stderr
        assert str(path) in lines[0] and says in lines[0], run.stderr
        assert "the service is failing" not in lines[0], run.stderr


@pytest.mark.parametrize(
    ("setting", "default"),
    [("AWS_CONFIG_FILE", ".aws/config"), ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials")],
)
def test_a_profile_file_at_its_default_place_is_checked_too(
    aws: Emulator, tmp_path: Path, setting: str, default: str
) -> None:
    """With no setting, botocore parses ``~/.aws/config`` and ``~/.aws/credentials``: a 2 GiB one
    was read whole (a MemoryError under 1 GiB of address space, "internal error")."""
    require_bundle()
    path = tmp_path / default
    path.parent.mkdir()
    with path.open("wb") as file:
        file.truncate(2 << 30)
    run = run_plugin(
        "ecr-credential-provider",
        request_bytes(ECR_IMAGE),
        ["--deadline=20s"],
        {**aws.env, setting: None, "HOME": str(tmp_path)},
        use_bundle=True,
        address_space=1 << 30,
    )
    lines = [line for line in run.stderr.splitlines() if "test mode" not in line]
    assert run.code == 1 and run.stdout == b"" and len(lines) == 1, run.stderr
    assert f"{path} (botocore's default, {setting} being unset) cannot be used" in lines[0]
    assert "is larger than 1 MiB; fix or remove it" in lines[0], lines[0]
