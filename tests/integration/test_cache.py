"""The persistent cache: hits, one cloud call under concurrency, modes, corruption, expiry margin,
service-account bypass, identity isolation, and no SDK import on a hit."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from credprovider.runtime.cachestore import SAFETY_MARGIN_SECONDS
from emulators.aws import FakeEcr, aws_error, ecr_env
from emulators.gcp import FakeMetadata
from emulators.harness import ACR_REGISTRY, Emulator, aws_emulator, azure_emulator, gcp_emulator
from emulators.http import FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from release.bundle import REPO
from tests.helpers import run_listing_imports
from tests.integration.conftest import Azure

ECR = "ecr-credential-provider"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"


def env_for(server: FakeServer, cache: Path, **extra: str) -> dict[str, str]:
    return ecr_env(server.url, CREDPROVIDER_CACHE_DIR=str(cache), **extra)


def test_second_exec_is_served_from_the_cache(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    first = run_plugin(
        ECR, request_bytes(IMAGE), ["-v=1"], env_for(server, cache), use_bundle=use_bundle
    )
    second = run_plugin(
        ECR, request_bytes(IMAGE), ["-v=1"], env_for(server, cache), use_bundle=use_bundle
    )
    assert first.response["auth"] == second.response["auth"]
    assert len(fake.calls) == 1
    assert "cache: stored" in first.stderr and "cache: hit" in second.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    (entry,) = cache.glob("*.json")
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert first.response["cacheDuration"] in ("6h0m0s", "5h59m59s")
    assert second.response["cacheDuration"] in ("6h0m0s", "5h59m59s", "5h59m58s")


def test_the_cache_flag_works_like_the_environment(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    fake, server = ecr
    env = env_for(server, tmp_path / "unused")
    del env["CREDPROVIDER_CACHE_DIR"]
    for _ in range(2):
        run_plugin(ECR, request_bytes(IMAGE), [f"--cache-dir={tmp_path / 'c'}"], env)
    assert len(fake.calls) == 1


def test_concurrent_execs_make_one_cloud_call(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    fake, server = ecr
    fake.delay = 1.0
    env = env_for(server, tmp_path / "cache")
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = list(pool.map(lambda _: run_plugin(ECR, request_bytes(IMAGE), [], env), range(8)))
    assert [run.code for run in runs] == [0] * 8
    assert {json.dumps(run.response["auth"]) for run in runs} == {
        json.dumps(runs[0].response["auth"])
    }
    assert len(fake.calls) == 1


def _cache_hit_modules(env: dict[str, str]) -> list[str]:
    """The SDKs (and OpenSSL's hash module, which only signing needs) that a run imported."""
    run = run_listing_imports(ECR, request_bytes(IMAGE), env=env)
    assert run.code == 0
    heavy = {"botocore", "boto3", "azure", "google", "requests", "urllib3", "pydantic", "yaml"}
    return sorted(run.roots & (heavy | {"_hashlib", "logging"}))


def test_a_cache_hit_imports_no_cloud_sdk(ecr: tuple[FakeEcr, FakeServer], tmp_path: Path) -> None:
    _, server = ecr
    env = env_for(server, tmp_path / "cache")
    assert run_plugin(ECR, request_bytes(IMAGE), [], env).code == 0
    assert _cache_hit_modules(env) == []
    # The probe sees an SDK when one is loaded: a miss that goes through botocore (a profile file
    # sends it there; the common miss uses the stdlib path, which loads none).
    profile = tmp_path / "aws-config"
    profile.write_text("")
    miss = env_for(server, tmp_path / "empty-cache", AWS_CONFIG_FILE=str(profile))
    assert {"botocore", "logging"} <= set(_cache_hit_modules(miss))
    stdlib_miss = env_for(server, tmp_path / "another-empty-cache")
    assert _cache_hit_modules(stdlib_miss) == ["_hashlib"]  # it signs, with no SDK (nor logging)


def test_a_fresh_entry_is_served_while_another_exec_holds_the_lock(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    """A cache hit takes no lock: an exec stuck while fetching the same key (here: this test
    holding its lock) does not hold up the execs that only read the entry."""
    fake, server = ecr
    cache = tmp_path / "cache"
    env = env_for(server, cache, CREDPROVIDER_DEADLINE="3s")
    assert run_plugin(ECR, request_bytes(IMAGE), [], env).code == 0
    (lock,) = cache.glob("*.lock")
    descriptor = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run = run_plugin(ECR, request_bytes(IMAGE), [], env)
    finally:
        os.close(descriptor)
    assert run.code == 0
    # Served from the entry. An exec that waited for the lock would give up at once (a 3 s deadline
    # is inside the lock reserve) and fetch: a second call.
    assert len(fake.calls) == 1


# Standard-library modules whose import alone is a sizeable share of a cache hit (measured on the
# bundle): the exec path reaches for none of them on a hit (credprovider/runtime/_typing.py, _thread).
# os too: its import (with posixpath and _collections_abc's ABCs) is a fifth of the interpreter's
# start; a hit takes what it needs from posix (credprovider/runtime/_os.py)
COSTLY_STDLIB = {"typing", "threading", "contextlib", "dataclasses", "inspect", "socket", "ssl", "email",
                 "http", "urllib", "logging", "argparse", "datetime", "subprocess", "re", "json",
                 "enum", "functools", "base64", "collections", "operator", "types", "fcntl",
                 "os", "posixpath", "_collections_abc"}  # fmt: skip


_RUN_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
from credprovider.runtime import imageref
parses = []
def counted(reference, parse=imageref.parse_image):
    parses.append(reference)
    return parse(reference)
imageref.parse_image = counted  # before anything binds the name
from credprovider.runtime import _os, serve
from credprovider.entry import PLUGIN_MODULES
__import__(PLUGIN_MODULES[sys.argv[2]])
spec = sys.modules[PLUGIN_MODULES[sys.argv[2]]].SPEC
code = serve.run(spec, sys.argv[3:], stdin=sys.stdin.buffer, stdout=sys.stdout.buffer,
                 stderr=sys.stderr, environ=_os.process_environ())
sys.stderr.write("\\nPARSES " + str(len(parses)))
sys.stderr.write("\\nIMPORTED " + " ".join(sorted(set(sys.modules) - before)) + "\\n")
"""


def _imported_by_one_run(
    env: dict[str, str], plugin: str = ECR, image: str = IMAGE, args: list[str] | None = None
) -> set[str]:
    """Top-level modules one exec imports beyond the interpreter's start (run as the bundle runs
    it: -I -S, so nothing of site's or the test runner's is counted). The exec must parse the
    image once: the runtime parses it and hands it to the provider's plan."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _RUN_PROBE, str(REPO), plugin, *(args or [])],
        input=request_bytes(image),
        capture_output=True,
        env=env,
        check=False,
    )
    assert b'"auth"' in proc.stdout, proc.stderr[-2000:]
    parses = int(proc.stderr.decode().rpartition("\nPARSES ")[2].split()[0])
    assert parses == 1, f"the image was parsed {parses} times in one exec"
    names = proc.stderr.decode().rpartition("\nIMPORTED ")[2].split()
    return {name.split(".")[0] for name in names}


# Every cloud's cache hit, against its emulators: (emulator, plugin, image, its args).
HITS: dict[str, tuple[Callable[[], AbstractContextManager[Emulator]], str, str, Callable[[Emulator], list[str]]]] = {
    "aws": (lambda: aws_emulator(with_moto=False), ECR, IMAGE, lambda _: []),
    "azure": (azure_emulator, "acr-credential-provider", f"{ACR_REGISTRY}/app", lambda e: [e.files["config"]]),
    "gcp": (gcp_emulator, "auth-provider-gcp", "us-docker.pkg.dev/p/r/app", lambda _: ["get-credentials"]),
}  # fmt: skip


@pytest.mark.parametrize("cloud", list(HITS))
def test_a_cache_hit_imports_no_costly_stdlib_module(cloud: str, tmp_path: Path) -> None:
    emulator, plugin, image, args_for = HITS[cloud]
    with emulator() as emulated:
        env = {**os.environ, **emulated.env, "CREDPROVIDER_CACHE_DIR": str(tmp_path / "cache")}
        args = args_for(emulated)
        assert run_plugin(plugin, request_bytes(image), args, env).code == 0
        hit = _imported_by_one_run(env, plugin, image, args)
        assert COSTLY_STDLIB.isdisjoint(hit), sorted(COSTLY_STDLIB & hit)
        # and the probe sees them when they are imported: a miss opens a connection
        miss_env = {**env, "CREDPROVIDER_CACHE_DIR": str(tmp_path / "other")}
        miss = _imported_by_one_run(miss_env, plugin, image, args)
    assert "socket" in miss
    if cloud == "aws":  # on the plugin's own HTTP/1.1: no http.client, email, logging, idna codec
        assert {"http", "email", "logging", "stringprep"}.isdisjoint(miss), sorted(
            {"http", "email", "logging", "stringprep"} & miss
        )


@pytest.mark.parametrize("cloud", list(HITS))
def test_two_providers_of_one_plugin_never_share_entries(cloud: str, tmp_path: Path) -> None:
    """#33: two providers of one plugin (ecr-credential-provider and ecr-credential-provider-prod)
    are two identities as far as the cache goes, even with the same settings: neither is ever
    answered from the other's entries; each is from its own."""
    emulator, plugin, image, args_for = HITS[cloud]
    second = f"{plugin}-prod"
    with emulator() as emulated:
        env = {**emulated.env, "CREDPROVIDER_CACHE_DIR": str(tmp_path / "cache")}
        args = [*args_for(emulated), "-v=1"]
        runs = [
            run_plugin(name, request_bytes(image), args, env)
            for name in (plugin, second, plugin, second)
        ]
    assert [run.code for run in runs] == [0] * 4, runs[1].stderr
    stored = ["cache: stored" in run.stderr for run in runs]
    hits = ["cache: hit" in run.stderr for run in runs]
    assert (stored, hits) == ([True, True, False, False], [False, False, True, True])
    # and every line it logs (the kubelet logs them) names the provider the kubelet ran
    assert all(line.startswith(f"{second}: ") for line in runs[1].stderr.splitlines())
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2


@pytest.mark.parametrize(
    ("change", "extra"),
    [
        ("another access key", {"AWS_ACCESS_KEY_ID": "AKIDOTHER"}),
        ("another profile", {"AWS_PROFILE": "ci"}),
        ("another endpoint region setting", {"AWS_REGION": "eu-west-1"}),
    ],
)
def test_identities_do_not_share_entries(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, change: str, extra: dict[str, str]
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, cache))
    profile_file = tmp_path / "config"
    profile_file.write_text("[profile ci]\nregion = us-east-1\n")
    other = run_plugin(
        ECR,
        request_bytes(IMAGE),
        [],
        env_for(server, cache, AWS_CONFIG_FILE=str(profile_file), **extra),
    )
    assert other.code == 0, other.stderr
    assert len(fake.calls) == 2


def test_registries_do_not_share_entries(ecr: tuple[FakeEcr, FakeServer], tmp_path: Path) -> None:
    fake, server = ecr
    env = env_for(server, tmp_path / "cache")
    for image in (
        IMAGE,
        IMAGE.replace("123456789012", "210987654321"),
        IMAGE,
        "public.ecr.aws/a/b",
    ):
        run_plugin(ECR, request_bytes(image), [], env)
    assert len(fake.calls) == 3


def test_service_account_requests_are_never_persisted(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    for _ in range(2):
        run_plugin(
            ECR,
            request_bytes(IMAGE, token="eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"),
            [],
            env_for(server, cache),
        )
    assert len(fake.calls) == 2
    assert list(cache.glob("*.json")) == []


@pytest.mark.parametrize(
    ("valid_seconds", "calls"),
    [(SAFETY_MARGIN_SECONDS - 10, 2), (SAFETY_MARGIN_SECONDS + 120, 1), (None, 2)],
)
def test_only_credentials_beyond_the_safety_margin_are_served(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, valid_seconds: float | None, calls: int
) -> None:
    fake, server = ecr
    fake.valid_seconds = valid_seconds
    for _ in range(2):
        assert run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, tmp_path / "c")).code == 0
    assert len(fake.calls) == calls


def test_an_entry_past_the_margin_is_refreshed(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, cache))
    (entry,) = cache.glob("*.json")
    stored = json.loads(entry.read_text())
    stored["expiresAt"] = stored["writtenAt"] + SAFETY_MARGIN_SECONDS - 1
    entry.write_text(json.dumps(stored))
    run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, cache))
    assert len(fake.calls) == 2
    assert json.loads(entry.read_text())["expiresAt"] > stored["expiresAt"] + 3600


@pytest.mark.parametrize(
    "damage",
    [
        "",
        "{not json",
        '{"version": 99}',
        "[1, 2]",
        '{"version": 1, "provider": "ecr-credential-provider"}',
    ],
)
def test_corrupt_entries_are_ignored_and_replaced(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, damage: str
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, cache))
    (entry,) = cache.glob("*.json")
    good = entry.read_text()
    entry.write_text(good[: len(good) // 2] if damage == "" else damage)
    run = run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, cache))
    assert run.code == 0
    assert len(fake.calls) == 2
    assert json.loads(entry.read_text())["version"] == 1


@pytest.mark.parametrize("problem", ["group writable", "world writable", "other owner", "a file"])
def test_unsafe_cache_directories_are_refused_but_the_request_succeeds(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, problem: str
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    if problem == "a file":
        cache.write_text("")
    else:
        cache.mkdir()
        os.chmod(cache, {"group writable": 0o770, "world writable": 0o707}.get(problem, 0o700))
        if problem == "other owner":
            if os.geteuid() != 0:
                pytest.skip("needs root to give the directory to another user")
            os.chown(cache, 65534, 65534)
    runs = [run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, cache)) for _ in range(2)]
    assert [run.code for run in runs] == [0, 0]
    assert len(fake.calls) == 2
    assert "running uncached" in runs[0].stderr
    assert len([line for line in runs[0].error_lines if "warning" in line]) == 1


def test_gcp_and_azure_answers_are_cached_too(tmp_path: Path, azure: Azure) -> None:
    meta = FakeMetadata()
    with serve(meta) as server:
        env = {"GCE_METADATA_HOST": server.address, "CREDPROVIDER_CACHE_DIR": str(tmp_path / "c")}
        for _ in range(2):
            assert (
                run_plugin(
                    "auth-provider-gcp", request_bytes("gcr.io/p/a"), ["get-credentials"], env
                ).code
                == 0
            )
    assert len(meta.paths) == 1
    config = azure.config(useManagedIdentityExtension=True)
    for _ in range(2):
        assert (
            azure.run(
                "myreg.azurecr.io/app", config, env={"CREDPROVIDER_CACHE_DIR": str(tmp_path / "c")}
            ).code
            == 0
        )
    assert len(azure.acr.exchanges) == 1
    other_config = azure.config("other.json", useManagedIdentityExtension=True, tenantId="t2")
    azure.run(
        "myreg.azurecr.io/app", other_config, env={"CREDPROVIDER_CACHE_DIR": str(tmp_path / "c")}
    )
    assert len(azure.acr.exchanges) == 2  # another azure.json is another identity


def test_errors_are_not_cached(ecr: tuple[FakeEcr, FakeServer], tmp_path: Path) -> None:
    fake, server = ecr
    fake.fault = aws_error("AccessDeniedException", "no")
    runs = [
        run_plugin(ECR, request_bytes(IMAGE), [], env_for(server, tmp_path / "c")) for _ in range(2)
    ]
    assert [run.code for run in runs] == [1, 1]
    assert list((tmp_path / "c").glob("*.json")) == []
