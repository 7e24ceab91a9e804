"""--provider-settings (install, render and the agent; the chart's providerSettings): an opt-in
plugin is refused in one line until the operator names what only they can."""

from __future__ import annotations

import json

import pytest

from credprovider.tool.change.settings import SettingsError, parse

QUAY = {
    "matchImages": ["quay.example.com"],
    "args": ["--backend", "quay", "--url", "https://quay.example.com", "--robot", "a+b"],
    "tokenAttributes": {"serviceAccountTokenAudience": "quay.example.com", "cacheType": "Token"},
}


def test_the_clouds_need_no_settings() -> None:
    assert parse("", ["aws", "azure", "gcp"]) == {}


@pytest.mark.parametrize("missing", ["matchImages", "args", "tokenAttributes", None])
def test_the_registries_plugin_needs_its_three_settings(missing: str | None) -> None:
    given = {k: v for k, v in QUAY.items() if k != missing}
    text = json.dumps({"registries": given}) if missing else ""
    with pytest.raises(SettingsError) as raised:
        parse(text, ["aws", "registries"])
    said = str(raised.value)
    assert said.startswith("registries (registry-credential-provider) ships no ")
    assert (missing or "matchImages") in said and "docs/registries.md" in said


def test_with_them_it_is_taken_as_given() -> None:
    assert parse(json.dumps({"registries": QUAY}), ["registries"]) == {"registries": QUAY}


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({"AWS_PROFILE": "prod\u0000"}, "aws.env 'AWS_PROFILE' holds a NUL byte"),
        ({"AWS\u0000PROFILE": "prod"}, "aws.env 'AWS\\x00PROFILE' holds a NUL byte"),
        ({"AWS_REGION=us-east-1": ""}, "so the plugin sees 'AWS_REGION' set to 'us-east-1='"),
        ({"": "x"}, "aws.env name '' is not a variable's name: the plugin sees nothing set"),
        (
            {"AWS_REGOIN": "eu-west-1"},
            "aws.env 'AWS_REGOIN' is read by no plugin, and 'AWS_REGION', which this one reads, "
            "differs from it only by one slip of a letter: did you mean 'AWS_REGION'? (as given, "
            "it does nothing)",
        ),
        ({"https_proxi": "http://p:3128"}, "'https_proxi' is read by no plugin, and 'https_proxy'"),
        ({"aws_profile": "prod"}, "and 'AWS_PROFILE', which this one reads, differs from it only in case"),
    ],
    ids=["NUL in a value", "NUL in a name", "'=' in a name", "no name", "a slip", "the runtime's",
         "a case"],
)  # fmt: skip
def test_an_env_entry_the_kubelet_cannot_pass_as_meant_is_refused(
    env: dict[str, str], refused: str
) -> None:
    """The kubelet hands the plugin NAME=VALUE unchecked (validate warns of it in a config; the
    harness shows the kubelet's exec failing on a NUL byte): as settings for install, the agent
    and render, it is refused before anything is written."""
    with pytest.raises(SettingsError) as raised:
        parse(json.dumps({"aws": {"env": env}}), ["aws"])
    assert str(raised.value).startswith("--provider-settings: ") and refused in str(raised.value)
    assert parse(json.dumps({"aws": {"env": {"AWS_PROFILE": "prod"}}}), ["aws"])
    # a name another plugin reads, or one no plugin reads and none is near, is the operator's
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID", "MY_OWN_SETTING"):
        assert parse(json.dumps({"aws": {"env": {name: "x"}}}), ["aws"])


def test_an_argument_naming_a_path_from_home_is_refused() -> None:
    """No shell runs between the kubelet and the plugin: ``~/azure.json`` reaches it as given."""
    with pytest.raises(SettingsError) as raised:
        parse(json.dumps({"azure": {"args": ["~/azure.json"]}}), ["azure"])
    assert str(raised.value).startswith("--provider-settings: azure.args '~/azure.json' names a")
    assert parse(json.dumps({"azure": {"args": ["/etc/kubernetes/azure.json"]}}), ["azure"])


def test_an_argument_with_a_nul_byte_is_refused() -> None:
    with pytest.raises(SettingsError) as raised:
        parse(json.dumps({"gcp": {"args": ["get-credentials", "--v=2\u0000"]}}), ["gcp"])
    assert str(raised.value) == (
        "--provider-settings: gcp.args '--v=2\\x00' holds a NUL byte, which no program's "
        "arguments can: the kubelet cannot run the plugin with it, and every pull it matches fails"
    )
