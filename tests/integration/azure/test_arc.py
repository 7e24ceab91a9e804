"""The managed identity of an Azure Arc-enabled server (IDENTITY_ENDPOINT and IMDS_ENDPOINT, as the
Connected Machine agent sets them): the agent's key challenge answered on the stdlib, its key file
read as a node file, confined to the agent's directory whatever the challenge names, the key never
printed, and a user-assigned identity's token checked to be that identity's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.azure.imds import ARC_HIMDS
from emulators.azure import ARC_KEY_DIR, ArcAtItsAddress, FakeArc
from emulators.http import FakeResponse, FakeServer, serve
from emulators.kubelet_exec import FIFO, NodeFile, PluginRun
from tests.integration.azure.common import PLUGIN, assert_refresh_token_answer
from tests.integration.conftest import Azure

IMAGE = "myreg.azurecr.io/app"
PREFIX = f"{PLUGIN}: error: could not get an AAD token with "


@pytest.fixture
def arc() -> Iterator[tuple[FakeArc, FakeServer]]:
    fake = FakeArc()
    with serve(fake) as server:
        yield fake, server


def _run(
    azure: Azure,
    arc: tuple[FakeArc, FakeServer],
    key: bytes | None = None,
    *args: str,
    files: dict[str, NodeFile] | None = None,
    use_bundle: bool = False,
    as_nobody: bool = False,
    env: dict[str, str] | None = None,
    **settings: object,
) -> PluginRun:
    fake, server = arc
    endpoint = f"{server.url}/metadata/identity/oauth2/token"
    node_files: dict[str, NodeFile] = (
        files if files is not None else {fake.key_file: key or fake.key.encode()}
    )
    return azure.run(  # type: ignore[no-any-return]
        IMAGE,
        azure.config(useManagedIdentityExtension=True, **settings),
        "--deadline=8s",
        *args,
        env={"IDENTITY_ENDPOINT": endpoint, "IMDS_ENDPOINT": server.url, **(env or {})},
        node_files=node_files,
        use_bundle=use_bundle,
        as_nobody=as_nobody,
    )


def test_the_agents_token_is_exchanged_after_its_key_challenge(
    azure: Azure, arc: tuple[FakeArc, FakeServer], use_bundle: bool
) -> None:
    """Asked without a key, the agent names its key file; asked again with the file's content, it
    answers the token the ACR exchange is given. The key is never printed, even at --v=9, and
    IMDS is never asked."""
    fake, _ = arc
    run = _run(azure, arc, None, "--v=9", use_bundle=use_bundle)
    assert run.code == 0, run.stderr
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert fake.keys_given == [fake.key]
    assert [q["api-version"] for q in fake.queries] == ["2020-06-01"] * 2
    assert fake.queries[0]["resource"] == "https://containerregistry.azure.net"
    assert fake.key not in run.stderr
    assert azure.imds.queries == []


def test_the_agent_is_asked_without_azure_identity(
    azure: Azure, arc: tuple[FakeArc, FakeServer]
) -> None:
    """As for IMDS: azure-identity, MSAL and cryptography are not loaded on this cache miss."""
    run = _run(azure, arc, None, env={"PYTHONVERBOSE": "1"})
    assert run.code == 0, run.stderr
    loaded = {line.split("'")[1].split(".")[0] for line in run.stderr_lines if "import '" in line}
    assert "credprovider" in loaded
    assert loaded.isdisjoint({"azure", "msal", "cryptography", "requests"}), loaded


def test_a_user_assigned_identity_must_be_the_one_answered(
    azure: Azure, arc: tuple[FakeArc, FakeServer]
) -> None:
    """The agent echoes the client id it used; an older agent answers the machine's own identity
    without saying so, and that token is refused (MSAL's rule)."""
    fake, _ = arc
    run = _run(azure, arc, None, userAssignedIdentityID="kubelet-id")
    assert run.code == 0, run.stderr
    assert fake.queries[-1]["client_id"] == "kubelet-id"
    fake.fault = FakeResponse.json(
        {"access_token": "system-token", "expires_in": "3599", "token_type": "Bearer"}
    )
    run = _run(azure, arc, None, userAssignedIdentityID="kubelet-id")
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert line.startswith(f"{PREFIX}the managed identity with client id kubelet-id: ")
    assert "does not name the identity asked for (client_id kubelet-id)" in line


KEY = f"{ARC_KEY_DIR}/0f1e2d3c.key"


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({KEY: FIFO}, "is a FIFO, not a regular file; check the agent (azcmagent show)"),
        ({f"{KEY}/inside": b"x"}, "is a directory, not a regular file"),
        ({KEY: b"k" * 5000}, "is larger than 4 KiB"),
        ({KEY: b"\xff\xfe"}, "it is not UTF-8 text"),
        ({f"{ARC_KEY_DIR}/other.key": b"k"}, "no such file or directory"),
    ],
    ids=["fifo", "directory", "5000-bytes", "not-utf8", "missing"],
)
def test_a_key_file_that_cannot_be_read_is_one_line_at_once(
    azure: Azure, arc: tuple[FakeArc, FakeServer], files: dict[str, bytes], says: str
) -> None:
    """Before: MSAL checked only the file's size and opened it blocking: a FIFO held the plugin
    to its deadline, whose line blamed the network; a link to /dev/zero (size 0) was read until
    memory ran out."""
    fake, server = arc
    run = _run(azure, arc, files=files)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert line == (
        f"{PREFIX}the system-assigned managed identity: the key file {KEY} that the Azure Arc "
        f"agent ({server.url}/metadata/identity/oauth2/token) named cannot be read: {says}"
    ) or (line.startswith(PREFIX) and says in line), line
    assert run.seconds < 5, run.seconds
    assert fake.keys_given == []


def test_the_challenge_cannot_point_outside_the_agents_directory(
    azure: Azure, arc: tuple[FakeArc, FakeServer]
) -> None:
    """A realm naming /etc/shadow is read as the agent's ``shadow.key``, as MSAL confines it."""
    fake, _ = arc
    fake.key_file = "/etc/shadow"
    run = _run(azure, arc, files={f"{ARC_KEY_DIR}/shadow.key": fake.key.encode()})
    assert run.code == 0, run.stderr
    assert fake.keys_given == [fake.key]
    fake.key_file = "/etc/hostname"
    run = _run(azure, arc, files={f"{ARC_KEY_DIR}/shadow.key": fake.key.encode()})
    assert (run.code, run.stdout) == (1, b""), run.stderr
    assert f"the key file {ARC_KEY_DIR}/hostname.key " in run.error_lines[0]
    assert fake.keys_given == [fake.key]


@pytest.mark.parametrize(
    ("challenge", "says"),
    [
        (FakeResponse(401, b"", {}), "answered HTTP 401 without naming its key file"),
        (
            FakeResponse(401, b"", {"WWW-Authenticate": "Bearer realm=x"}),
            "without naming its key file (Basic realm=...): WWW-Authenticate 'Bearer realm=x'",
        ),
        (
            FakeResponse.json({"error": "invalid_request", "error_description": "no"}, 400),
            "answered HTTP 400 without naming its key file (Basic realm=...): no",
        ),
    ],
)
def test_a_challenge_without_a_key_file_is_one_line(
    azure: Azure, arc: tuple[FakeArc, FakeServer], challenge: FakeResponse, says: str
) -> None:
    fake, _ = arc
    fake.challenge = challenge
    run = _run(azure, arc)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert says in line, line
    assert fake.keys_given == []


def test_a_refused_key_is_one_line_naming_its_file(
    azure: Azure, arc: tuple[FakeArc, FakeServer]
) -> None:
    fake, _ = arc
    run = _run(azure, arc, b"stale-key")
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert f"answered HTTP 401 to the key in {KEY}: unauthorized" in line, line
    assert "stale-key" not in run.stderr
    assert fake.keys_given == ["stale-key"]


def test_an_operator_without_the_agents_group_is_told_who_may_read_the_key(
    azure: Azure, arc: tuple[FakeArc, FakeServer]
) -> None:
    """By hand, through the bundle, as a user outside root and the agent's group: the key file
    (root's, 0600 here) cannot be read, and the line says who can."""
    fake, server = arc
    config = "/etc/kubernetes/azure.json"  # where nobody can read it, as on a node
    run = azure.run(
        IMAGE,
        config,
        env={
            "IDENTITY_ENDPOINT": f"{server.url}/metadata/identity/oauth2/token",
            "IMDS_ENDPOINT": server.url,
        },
        node_files={
            config: b'{"useManagedIdentityExtension": true}',
            KEY: (fake.key.encode(), 0o600),
        },
        use_bundle=True,
        as_nobody=True,
    )
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert line.endswith(
        "named cannot be read: permission denied; run as root or as a member of the himds group"
    ), line
    assert fake.keys_given == []


def test_an_installed_agent_is_asked_at_its_address_without_the_variables(
    azure: Azure, tmp_path: Path, use_bundle: bool
) -> None:
    """The kubelet passes the plugin neither IDENTITY_ENDPOINT nor IMDS_ENDPOINT, but the agent is
    installed (/opt/azcmagent/bin/himds): the agent is asked at its fixed address, as upstream's
    plugin asks it (MSAL Go), not IMDS. The token it answers is what the exchange would carry: the
    registry, outside this namespace, is the next thing the plugin could not reach."""
    beside = ArcAtItsAddress(tmp_path / "agent.json")
    agent = FakeArc()
    run = azure.run(
        IMAGE,
        azure.config(useManagedIdentityExtension=True),
        "--deadline=8s",
        env=beside.env(),
        node_files={ARC_HIMDS: (b"#!/bin/sh\n", 0o755), agent.key_file: agent.key.encode()},
        own_network=True,
        wrapper=beside.wrapper(),
        use_bundle=use_bundle,
    )
    assert run.code == 1 and run.stdout == b"", run.stderr
    [line] = run.error_lines
    assert "could not reach the registry at https://myreg.azurecr.io/v2/" in line, line
    asked = beside.asked()
    assert asked["keys"] == [agent.key]  # the key challenge answered: a token was issued
    assert [q["resource"] for q in asked["queries"]] == ["https://containerregistry.azure.net"] * 2
    assert agent.key not in run.stderr and azure.imds.queries == []
