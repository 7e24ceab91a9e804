"""The caching decorator at the seam: one plan, looked up; on a miss the same plan fulfilled; an
answer that breaks the plan's keys is served but never stored, and said."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from credprovider.runtime.api import AuthConfig, CredentialProviderRequest, parse_request
from credprovider.runtime.caching import with_cache
from credprovider.runtime.deadline import Deadline
from credprovider.runtime.imageref import ImageRef, parse_image
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context, Credentials, Plan
from emulators.kubelet_exec import request_bytes

IMAGE = "registry.example.test/team/app"
NAME = "test-provider"


class Recording:
    """A provider that records each plan and fulfilment and answers with ``answer_keys``."""

    def __init__(self, answer_keys: tuple[str, ...] | None = None) -> None:
        self.plans: list[Plan] = []
        self.fulfilled: list[Plan] = []
        self.answer_keys = answer_keys

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        made = Plan(image, (image.registry,), {"who": "node"}, detail=f"decided-{len(self.plans)}")
        self.plans.append(made)
        return made

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        self.fulfilled.append(plan)
        entry = AuthConfig("user", "password-0123456789")
        keys = self.answer_keys if self.answer_keys is not None else plan.keys
        return Credentials({key: entry for key in keys}, expires_at=ctx.now() + 3600)


def _ask(provider: object, ctx: Context) -> Credentials:
    request = parse_request(request_bytes(IMAGE))
    plan = provider.plan(parse_image(IMAGE), request, ctx)  # type: ignore[attr-defined]
    return provider.fulfil(plan, request, ctx)  # type: ignore[attr-defined, no-any-return]


@pytest.fixture
def ctx() -> tuple[Context, io.StringIO]:
    log = io.StringIO()
    return Context(Deadline(30), Logger(NAME, 1, log), {}, time.time), log


def test_a_miss_fulfils_the_plan_it_looked_up_and_a_hit_only_plans(
    ctx: tuple[Context, io.StringIO], tmp_path: Path
) -> None:
    context, log = ctx
    provider = Recording()
    cached = with_cache(provider, NAME, str(tmp_path / "cache"))
    first = _ask(cached, context)
    assert provider.fulfilled == provider.plans  # the very plan, its detail included
    second = _ask(cached, context)
    assert second.auth == first.auth
    assert len(provider.plans) == 2 and len(provider.fulfilled) == 1
    assert "cache: stored" in log.getvalue() and "cache: hit" in log.getvalue()


def test_an_answer_with_other_keys_than_the_plan_is_served_said_and_not_stored(
    ctx: tuple[Context, io.StringIO], tmp_path: Path
) -> None:
    context, log = ctx
    provider = Recording(answer_keys=("registry.example.test", "other.example.test"))
    cached = with_cache(provider, NAME, str(tmp_path / "cache"))
    answer = _ask(cached, context)
    assert sorted(answer.auth) == ["other.example.test", "registry.example.test"]
    assert (
        "warning: cache: the answer's keys ['other.example.test', 'registry.example.test'] are "
        "not the plan's ['registry.example.test']: served, not stored"
    ) in log.getvalue()
    assert list((tmp_path / "cache").glob("*.json")) == []
    _ask(cached, context)
    assert len(provider.fulfilled) == 2  # nothing was stored: the second ask fetches again


def test_a_plan_without_identity_is_never_cached() -> None:
    plan = Plan(parse_image(IMAGE), ("registry.example.test",))
    assert plan.cache_scope(NAME) is None
    scoped = plan._replace(identity={"who": "node"}).cache_scope(NAME)
    assert scoped is not None
    assert (scoped.provider, scoped.registry, scoped.keys) == (
        NAME,
        "registry.example.test",
        ("registry.example.test",),
    )
