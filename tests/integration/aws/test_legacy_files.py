"""The legacy files botocore's chain reads last, when nothing before them gave keys: the EC2 tools'
credentials file (``AWS_CREDENTIAL_FILE``) and boto's config (``BOTO_CONFIG``, else
``/etc/boto.cfg`` and ``~/.boto``). Both still give keys; neither can hold the plugin or fill its
memory (credprovider/aws/botocore_chain.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from emulators.aws import FakeEcr, ecr_env
from emulators.http import FakeServer
from emulators.kubelet_exec import NodeFile, PluginRun, request_bytes, run_plugin
from tests.helpers import SPECIAL_FILES, make_special
from tests.integration.aws.common import PLUGIN

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/a"
LEGACY_KEY = "AKIALEGACY0000000001"
LEGACY_SECRET = "legacy-secret-0123456789abcdefghijklmn"


def _run(
    ecr: tuple[FakeEcr, FakeServer],
    tmp_path: Path,
    env: dict[str, str | None],
    node_files: dict[str, NodeFile] | None = None,
    use_bundle: bool = False,
) -> PluginRun:
    """Through botocore's chain (a profile without keys), no keys before the legacy files."""
    _, server = ecr
    (tmp_path / "config").write_text("[profile node]\nregion = us-east-1\n")
    return run_plugin(
        PLUGIN,
        request_bytes(IMAGE),
        ["--deadline=8s"],
        {
            **ecr_env(server.url),
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_CONFIG_FILE": str(tmp_path / "config"),
            "AWS_PROFILE": "node",
            **env,
        },
        use_bundle=use_bundle,
        node_files=node_files,
    )


def test_the_ec2_tools_file_gives_keys(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool
) -> None:
    path = tmp_path / "ec2-credentials"
    path.write_text(f"AWSAccessKeyId={LEGACY_KEY}\nAWSSecretKey={LEGACY_SECRET}\n")
    run = _run(ecr, tmp_path, {"AWS_CREDENTIAL_FILE": str(path)}, use_bundle=use_bundle)
    assert run.code == 0, run.stderr
    fake, _ = ecr
    assert [call.access_key for call in fake.calls] == [LEGACY_KEY]
    assert LEGACY_SECRET not in run.stderr


def test_boto_config_at_its_default_place_gives_keys(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool
) -> None:
    config = f"[Credentials]\naws_access_key_id = {LEGACY_KEY}\n"
    config += f"aws_secret_access_key = {LEGACY_SECRET}\n"
    run = _run(
        ecr,
        tmp_path,
        {"BOTO_CONFIG": None},
        node_files={"/etc/boto.cfg": config.encode()},
        use_bundle=use_bundle,
    )
    assert run.code == 0, run.stderr
    fake, _ = ecr
    assert [call.access_key for call in fake.calls] == [LEGACY_KEY]


@pytest.mark.parametrize("kind", [*SPECIAL_FILES, "missing"])
def test_an_ec2_tools_file_that_cannot_be_read_is_one_line_at_once(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, kind: str
) -> None:
    """Before: botocore opened it blindly: a FIFO held the plugin to its deadline (blamed on the
    network), /dev/zero and 2 GiB were read whole, and a missing one was "The specified config
    file ... could not be found.; the service is failing or throttling"."""
    path = tmp_path / "special"
    if kind != "missing":
        make_special(path, kind)
    run = _run(ecr, tmp_path, {"AWS_CREDENTIAL_FILE": str(path)})
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert (
        f"the EC2 tools' credentials file {path} named by AWS_CREDENTIAL_FILE cannot be used: "
        f"{SPECIAL_FILES.get(kind, 'no such file or directory')}; fix or unset AWS_CREDENTIAL_FILE"
    ) in line, line
    assert run.seconds < 5, run.seconds


@pytest.mark.parametrize("named", [True, False], ids=["BOTO_CONFIG", "/etc/boto.cfg"])
def test_a_boto_config_far_too_large_is_one_line(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, named: bool
) -> None:
    """Before: botocore parsed a regular file of any size whole (2 MiB of one line here)."""
    huge = b"[Credentials]\naws_access_key_id = " + b"A" * (2 << 20) + b"\n"
    if named:
        (tmp_path / "boto").write_bytes(huge)
        run = _run(ecr, tmp_path, {"BOTO_CONFIG": str(tmp_path / "boto")})
        says = f"boto's config {tmp_path / 'boto'} named by BOTO_CONFIG cannot be used: "
    else:
        run = _run(ecr, tmp_path, {"BOTO_CONFIG": None}, node_files={"/etc/boto.cfg": huge})
        says = "boto's config /etc/boto.cfg (botocore's default, BOTO_CONFIG being unset) cannot "
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert says in line and "is larger than 1 MiB" in line, line


def test_a_boto_config_that_is_not_a_file_is_passed_over_as_botocore_does(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    """botocore parses boto's config only when it is a regular file: a FIFO named there is
    skipped, never opened, and the chain goes on (here to no keys at all)."""
    os.mkfifo(tmp_path / "boto")
    run = _run(ecr, tmp_path, {"BOTO_CONFIG": str(tmp_path / "boto")})
    assert (run.code, run.stdout) == (1, b""), run.stderr
    assert run.seconds < 5, run.seconds
    assert "boto" not in run.error_lines[0], run.error_lines
    assert "credentials" in run.error_lines[0].lower(), run.error_lines


SSO_START = "https://example.awsapps.com/start"


@pytest.mark.parametrize("kind", ["2 GiB", "a FIFO"])
def test_a_cached_sso_token_is_read_as_a_node_file(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, kind: str, use_bundle: bool
) -> None:
    """A profile that signs in through IAM Identity Center: botocore read its cached token
    (``~/.aws/sso/cache/<sha1 of the start URL>.json``) whole, and a 2 GiB file there was an
    internal MemoryError under a memory limit (the whole file in memory without one). Read as a
    node file: past the cap it is one line naming the file; a FIFO is no token, at once, as
    botocore says of a file that is not there. (The bundle carries no sso client, and says so
    before any token is read; an install with the whole of botocore reads it.)"""
    import hashlib

    _, server = ecr
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text(
        f"[profile sso]\nsso_start_url = {SSO_START}\nsso_region = us-east-1\n"
        "sso_account_id = 111122223333\nsso_role_name = puller\nregion = us-east-1\n"
    )
    cache = tmp_path / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    entry = cache / f"{hashlib.sha1(SSO_START.encode()).hexdigest()}.json"
    make_special(entry, kind)
    run = run_plugin(
        PLUGIN,
        request_bytes(IMAGE),
        ["--deadline=8s"],
        {
            **ecr_env(server.url),
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "HOME": str(tmp_path),
            "AWS_CONFIG_FILE": str(tmp_path / ".aws" / "config"),
            "AWS_PROFILE": "sso",
        },
        use_bundle=use_bundle,
        address_space=1_500_000_000,
    )
    assert (run.code, run.stdout) == (1, b""), run.stderr
    [line] = run.error_lines
    assert "internal error" not in line and run.seconds < 6, (line, run.seconds)
    if use_bundle:  # botocore's sso client is not in the bundle: the profile is refused first
        assert "the profile needs botocore's 'sso' client, which the plugin does not" in line
    elif kind == "2 GiB":
        assert f"botocore's token cache file {entry} cannot be used: is larger than 1 MiB" in line
    else:
        assert f"Token for {SSO_START} does not exist" in line, line
