"""``--impersonate-service-account``: gcloud's order (the last email is pulled as), what is refused,
and the tool's reading of a provider's args."""

from __future__ import annotations

import pytest

from credprovider.errors import UsageError
from credprovider.gcp.impersonation import Chain, chain_in_args, parse_chain

A = "a@p.iam.gserviceaccount.com"
B = "b@p.iam.gserviceaccount.com"
T = "t@q.iam.gserviceaccount.com"


@pytest.mark.parametrize(
    ("value", "chain"),
    [
        (T, Chain(T)),
        (f"{A},{T}", Chain(T, (A,))),
        (f"{A},{B},{T}", Chain(T, (A, B))),
        ("112233445566778899001", Chain("112233445566778899001")),  # a unique id
        (
            "puller@my-project.iam.gserviceaccount.com",
            Chain("puller@my-project.iam.gserviceaccount.com"),
        ),
    ],
)
def test_the_last_entry_is_the_target_the_rest_delegates_in_order(value: str, chain: Chain) -> None:
    assert parse_chain(value) == chain
    assert str(parse_chain(value)) == value


@pytest.mark.parametrize(
    "value", ["", ",", f"{T},", f",{T}", f"{A},,{T}", "puller", "a b@p.iam.gserviceaccount.com",
              "a@p", "@p.iam.gserviceaccount.com", "a@b@c.com", "1234567890123456789012", "projects/-/serviceAccounts/x@y.z"],
)  # fmt: skip
def test_what_is_not_a_service_account_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match="--impersonate-service-account"):
        parse_chain(value)


def test_the_path_reads_from_the_source_to_the_target() -> None:
    assert Chain(T, (A, B)).path("the node") == f"the node → {A} → {B} → {T}"
    assert Chain(T).onward() == T


@pytest.mark.parametrize(
    ("args", "chain"),
    [
        (["get-credentials"], None),
        (["get-credentials", f"--impersonate-service-account={T}"], Chain(T)),
        (["--impersonate-service-account", f"{A},{T}", "get-credentials"], Chain(T, (A,))),
        (["get-credentials", "--impersonate-service-account"], None),  # the plugin refuses it
    ],
)
def test_the_tool_reads_the_chain_from_a_providers_args(
    args: list[str], chain: Chain | None
) -> None:
    assert chain_in_args(args) == chain
