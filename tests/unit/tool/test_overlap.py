"""Providers whose matchImages overlap (credprovider/tool/kubeconfig/overlap.py): every witness it reports is
matched by both patterns under the kubelet's own rules (urls_match), and disjoint patterns give none."""

from __future__ import annotations

import time

import pytest

from credprovider.runtime.matching import urls_match
from credprovider.tool.kubeconfig.overlap import Overlap, overlaps


@pytest.mark.parametrize(
    ("first", "second", "image"),
    [
        # one account's registry inside another provider's wildcard
        (
            "111111111111.dkr.ecr.*.amazonaws.com",
            "*.dkr.ecr.*.amazonaws.com",
            "111111111111.dkr.ecr.x.amazonaws.com",
        ),
        # the same host twice
        ("contoso.azurecr.io", "contoso.azurecr.io", "contoso.azurecr.io"),
        # paths: one begins the other
        ("gcr.io/team-a", "gcr.io", "gcr.io/team-a"),
        ("*-docker.pkg.dev", "europe-*.pkg.dev", "europe--docker.pkg.dev"),
        ("*.azurecr.io:443", "contoso.azurecr.io:443", "contoso.azurecr.io:443"),
    ],
)
def test_overlapping_patterns_are_found_with_an_image_both_match(
    first: str, second: str, image: str
) -> None:
    found = overlaps([("a", [first]), ("b", [second])])
    assert found == [Overlap("a", first, "b", second, image)]
    assert urls_match(first, image) and urls_match(second, image)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("111111111111.dkr.ecr.*.amazonaws.com", "222222222222.dkr.ecr.*.amazonaws.com"),
        ("*.azurecr.io", "*.azurecr.io:443"),  # ports must be equal
        ("*.azurecr.io", "*.*.azurecr.io"),  # label counts must be equal
        ("gcr.io/team-a", "gcr.io/team-b"),
        ("contoso.azurecr.io", "fabrikam.azurecr.io"),
        ("us-*.pkg.dev", "europe-*.pkg.dev"),
    ],
)
def test_disjoint_patterns_are_not_reported(first: str, second: str) -> None:
    assert overlaps([("a", [first]), ("b", [second])]) == []


def test_one_providers_own_patterns_never_overlap_it() -> None:
    assert overlaps([("a", ["*.azurecr.io", "contoso.azurecr.io"])]) == []


def test_one_overlap_per_pair_in_config_order_and_at_most_most() -> None:
    providers = [(f"p{i}", ["*.azurecr.io", "contoso.azurecr.io"]) for i in range(30)]
    found = overlaps(providers, most=5)
    assert len(found) == 5
    assert len({(o.first, o.second) for o in found}) == 5
    assert all(int(o.first[1:]) < int(o.second[1:]) for o in found)


def test_ten_thousand_providers_of_their_own_hosts_are_checked_quickly() -> None:
    """Literal hosts are indexed (the bench validates such a config): no pairwise comparison."""
    providers = [(f"p{i}", [f"r{i}.example"]) for i in range(10_000)]
    started = time.monotonic()
    assert overlaps(providers) == []
    assert time.monotonic() - started < 5
