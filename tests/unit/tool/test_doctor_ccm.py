"""doctor's check of the pairing KEP-2395 requires (credprovider/tool/doctor/ccm.py): a built-in
cloud the kubelet's version no longer has, and the built-in registry login turned back on, each
one line with its fix; nothing for --cloud-provider=external or no cloud."""

from __future__ import annotations

import pytest

from credprovider.tool.doctor.ccm import check_cloud_provider
from credprovider.tool.doctor.model import FAIL, INFO, WARN, Diagnosis
from credprovider.tool.node.kubelet_flags import settings_from

GATE = "DisableKubeletCloudCredentialProviders"


def verdicts(flags: list[str], version: tuple[int, int] | None) -> list[tuple[str, str]]:
    diagnosis = Diagnosis()
    check_cloud_provider(settings_from(flags), version, diagnosis)
    assert all(check.area == "kubelet" for check in diagnosis.checks)
    return [(check.status, check.message) for check in diagnosis.checks]


@pytest.mark.parametrize("flags", [[], ["--cloud-provider=external"], ["--cloud-provider="]])
@pytest.mark.parametrize("version", [None, (1, 26), (1, 36)])
def test_external_or_no_cloud_is_right(flags: list[str], version: tuple[int, int] | None) -> None:
    assert verdicts(flags, version) == []


@pytest.mark.parametrize(
    ("cloud", "version", "status", "said"),
    [
        ("aws", (1, 31), FAIL, "which kubelet 1.31 refuses (no built-in cloud provider since 1.31)"),
        ("gce", (1, 36), FAIL, "which kubelet 1.36 refuses"),
        ("aws", (1, 27), WARN, "whose built-in registry login kubelet 1.27 removed: pulls get "
                               "credentials from ecr-credential-provider only"),
        ("azure", (1, 30), WARN, "kubelet 1.30 removed: pulls get credentials from "
                                 "acr-credential-provider only"),
        ("azure", (1, 29), INFO, "before upgrading it past 1.30"),
        ("gce", (1, 30), INFO, "before upgrading it past 1.31"),
        ("aws", None, WARN, "a kubelet 1.31 or newer does not start with it"),
    ],
)  # fmt: skip
def test_a_built_in_cloud_is_said_by_what_the_kubelets_version_does_with_it(
    cloud: str, version: tuple[int, int] | None, status: str, said: str
) -> None:
    [(found, message)] = verdicts([f"--cloud-provider={cloud}"], version)
    assert found == status and said in message, message
    assert f"--cloud-provider={cloud}" in message


def test_each_fix_names_the_command() -> None:
    diagnosis = Diagnosis()
    check_cloud_provider(settings_from(["--cloud-provider=aws"]), (1, 31), diagnosis)
    [check] = diagnosis.checks
    assert check.fix.startswith("move it to --cloud-provider=external (credprovider migrate ")


@pytest.mark.parametrize(
    ("version", "status", "said"),
    [
        ((1, 29), WARN, "turning the built-in registry logins back on where they remain"),
        (None, WARN, "turning the built-in registry logins back on where they remain"),
        ((1, 31), FAIL, "which is locked on in this kubelet: it does not start"),
        ((1, 33), FAIL, "which this kubelet no longer has: it does not start"),
    ],
)
def test_the_gate_turned_off_is_said(
    version: tuple[int, int] | None, status: str, said: str
) -> None:
    [(found, message)] = verdicts([f"--feature-gates=Foo=true,{GATE}=false"], version)
    assert (found, message) == (status, f"--feature-gates sets {GATE}=false, {said}")
    assert verdicts([f"--feature-gates={GATE}=true"], version) == []


@pytest.mark.parametrize(
    ("flag", "port"), [("10255", 10255), ("0", 0), ("\u00b2", 10255), ("\u0663", 10255)]
)
def test_a_read_only_port_flag_is_ascii_digits_or_not_taken(flag: str, port: int) -> None:
    """The kubelet's command line is read as hostile: "²" passes isdigit and fails int()."""
    from credprovider.tool.node.kubelet_flags import settings_from

    assert settings_from([f"--read-only-port={flag}"]).read_only_port == port
