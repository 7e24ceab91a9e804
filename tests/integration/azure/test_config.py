"""azure.json and the command line: errors that name the file and the problem, YAML and any key
case, upstream's argument errors."""

from __future__ import annotations

import pytest

from emulators.kubelet_exec import request_bytes, run_plugin
from tests.integration.azure.common import (
    PLUGIN,
    assert_refresh_token_answer,
)
from tests.integration.conftest import Azure


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the cloud config {path}: No such file or directory"),
        ("{not json: [", "is neither JSON"),
        (
            '{"useManagedIdentityExtension": "yes"}',
            "useManagedIdentityExtension must be true or false",
        ),
        ('["a"]', "must hold a JSON object of settings"),
        ('{"tenantId": "t"}', "the cloud config configures no credentials"),
        ("", "the cloud config configures no credentials"),
        (
            '{"aadClientSecret": "x"}',
            "the cloud config is missing tenantId, aadClientId for this auth mode",
        ),
        (
            '{"cloud": "AzureMarsCloud", "useManagedIdentityExtension": true}',
            "unknown cloud 'AzureMarsCloud'",
        ),
        (
            '{"cloud": "AzureStackCloud", "useManagedIdentityExtension": true}',
            "cloud AzureStackCloud needs AZURE_ENVIRONMENT_FILEPATH",
        ),
    ],
)
def test_cloud_config_errors_name_the_file_and_the_problem(
    azure: Azure, content: str | None, message: str
) -> None:
    path = azure.directory / "azure.json"
    if content is not None:
        path.write_text(content)
    run = azure.run("myreg.azurecr.io/app", str(path))
    assert (run.code, run.stdout) == (1, b"")
    assert len(run.error_lines) == 1
    assert message.format(path=path) in run.error_lines[0]


def test_yaml_cloud_config_with_any_key_case(azure: Azure) -> None:
    path = azure.directory / "azure.yaml"
    path.write_text("# node config\nUSEMANAGEDIDENTITYEXTENSION: true\nTenantID: yaml-tenant\n")
    run = azure.run("myreg.azurecr.io/app", str(path))
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert azure.acr.exchanges[0][1]["tenant"] == "yaml-tenant"


def test_a_yaml_billion_laughs_in_a_setting_is_one_line_at_once(
    azure: Azure, use_bundle: bool
) -> None:
    """YAML aliases nine deep (10^9 strings by reference): the line quoting the setting wrote them
    all out (runtime/excerpt.quoted), holding the plugin to its deadline, blamed on the network."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)]
    path = azure.directory / "azure.yaml"
    path.write_text("\n".join([*lines, "useManagedIdentityExtension: true", "tenantId: *a9"]))
    run = azure.run("myreg.azurecr.io/app", str(path), "--deadline=8s", use_bundle=use_bundle)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert "tenantId must be a string, got [[[[...]" in line, line
    assert len(line) < 400 and run.seconds < 5, (len(line), run.seconds)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "config file is not specified"),
        (
            ["a.json", "b.json"],
            "expected exactly one argument (config file); Got arguments: [a.json b.json]",
        ),
        (
            ["a.json", "--ib-sni-name", "https://x"],
            "--ib-sni-name must not contain protocol prefix (https:// or http://), got: https://x",
        ),
        (
            ["a.json", "--ib-sni-name", "ib.example"],
            "--ib-apiserver-ip must be set when --ib-sni-name is provided",
        ),
        (
            ["a.json", "--ib-default-client-id", "c"],
            "--ib-sni-name must be set when --ib-default-client-id is provided",
        ),
        (
            ["a.json", "--ib-default-tenant-id", "t"],
            "--ib-sni-name must be set when --ib-default-tenant-id is provided",
        ),
        (
            ["a.json", "--ib-apiserver-ip", "10.0.0.1"],
            "--ib-sni-name must be set when --ib-apiserver-ip is provided",
        ),
        (
            ["a.json", "--ib-sni-name", "ib.example", "--ib-apiserver-ip", "not an address!"],
            "--ib-apiserver-ip must be a valid IP address or resolvable FQDN, got: not an address!",
        ),
        (["a.json", "--registry-mirror", "mcr.microsoft.com"], "is not source:target"),
        # #62: a traceback (UnicodeEncodeError) once, then an escape byte on the terminal
        (["a.json", "--ib-sni-name", "ib.exämple", "--ib-apiserver-ip", "10.0.0.1"],
         "--ib-sni-name must be a host name or host:port, got: 'ib.exämple'"),
        (["a.json", "--ib-sni-name", "ib\x1b[2J.example", "--ib-apiserver-ip", "10.0.0.1"],
         "--ib-sni-name must be a host name or host:port, got: 'ib\\x1b[2J.example'"),
        (["a.json", "--ib-sni-name", "ib.example:99999", "--ib-apiserver-ip", "10.0.0.1"],
         "--ib-sni-name must be a host name or host:port, got: 'ib.example:99999'"),
        (["a.json", "--ib-sni-name", "ib.example:" + "9" * 5000, "--ib-apiserver-ip", "10.0.0.1"],
         "--ib-sni-name must be a host name or host:port, got: 'ib.example:99999"),
    ],
)  # fmt: skip
def test_command_line_errors(args: list[str], message: str) -> None:
    run = run_plugin(PLUGIN, request_bytes("myreg.azurecr.io/app"), args)
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.error_lines[0]


def test_a_misspelt_azure_json_key_is_a_warning(azure: Azure) -> None:
    config = azure.config(useManagedIdentityExtension=True, userAssignedIdentityIDD="kubelet-id")
    run = azure.run("myreg.azurecr.io/app", config)
    assert run.code == 0
    warnings = [
        line
        for line in run.stderr.splitlines()
        if ": warning: " in line and "test mode" not in line
    ]
    assert warnings == [
        f"{PLUGIN}: warning: {config}: ignoring unknown key 'userAssignedIdentityIDD': did you mean "
        "'userAssignedIdentityID'?"
    ]
