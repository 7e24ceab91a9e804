"""A test-only plugin (never bundled) that proves the shared runtime without any cloud.

Run as ``python -m tests.fakes.fake_plugin [--mode MODE] [runtime flags]``. Modes:
``ok`` (token valid for an hour), ``error`` (ProviderError), ``crash`` (unexpected exception),
``hang`` (never answers), ``leak`` (fails with the secret in the message), ``no-expiry``.
"""

from __future__ import annotations

import sys
import threading

from credprovider.errors import ProviderError
from credprovider.runtime.api import CACHE_KEY_IMAGE, AuthConfig, CredentialProviderRequest
from credprovider.runtime.args import parse_arguments
from credprovider.runtime.imageref import ImageRef
from credprovider.runtime.provider import Context, Credentials, Plan, PluginSpec, Provider
from credprovider.runtime.redact import register_secret
from credprovider.runtime.serve import main

SECRET = "s3cr3t-Password-that-must-never-be-printed"


class FakeProvider:
    def __init__(self, mode: str, valid_seconds: float) -> None:
        self.mode = mode
        self.valid_seconds = valid_seconds

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        return Plan(image, (image.registry,))  # never cached: every mode is exercised on every exec

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        register_secret(SECRET)
        ctx.log.v(1, f"fake provider in mode {self.mode} got the password {SECRET}")
        if self.mode == "error":
            raise ProviderError(f"fake failure for {request.image}: check the fake endpoint")
        if self.mode == "crash":
            raise KeyError("boom")
        if self.mode == "leak":
            raise ProviderError(f"upstream said: bad password {SECRET}")
        if self.mode == "hang":
            ctx.deadline.phase = "waiting for a fake endpoint that never answers"
            threading.Event().wait()
        expires = None if self.mode == "no-expiry" else ctx.now() + self.valid_seconds
        return Credentials(
            auth={plan.image.registry: AuthConfig("fake-user", SECRET)},
            cache_key_type=CACHE_KEY_IMAGE,
            expires_at=expires,
        )


def build(args: list[str], ctx: Context) -> Provider:
    values, _ = parse_arguments(args, {"--mode": "mode", "--valid-seconds": "valid_seconds"})
    return FakeProvider(values.get("mode", "ok"), float(values.get("valid_seconds", "3600")))


SPEC = PluginSpec(
    name="fake-plugin", summary="Test-only plugin.", build=build, arguments_help="[--mode MODE]\n"
)

if __name__ == "__main__":
    main(SPEC, sys.argv[1:])
