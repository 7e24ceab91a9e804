"""The classes of defect an independent red-team run found, each with cases of our own.

1. the cache path swapped under root; 2. cache content that fails or delays a request; 3. secrets cut
before they are scrubbed; 4. log injection and flooding; 5. tracebacks and "internal error" for bad
input; 6. a catastrophic glob (tests/reliability/test_properties.py); 7. ``install --copy`` following
a planted symlink. Every case runs the real plugin or tool as a subprocess (as root: the other
user's files are made with chown inside the test's own temporary directory).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from credprovider.redact import forget_secrets, register_secret
from credprovider.runtime.provider import one_line
from tests.fakes.aws import FakeEcr
from tests.fakes.emulators import SAFE_ENV
from tests.fakes.http import FakeResponse, FakeServer, serve
from tests.helpers import PluginRun, request_bytes, run_cli, run_plugin
from tests.reliability.checks import Figures, Outcome, answer_violations

ECR = "ecr-credential-provider"
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
IMAGE = f"{REGISTRY}/team/app"
OTHER_UID = 65534  # nobody
PLANTED = "planted-password-from-another-user"
AMZ_JSON = "application/x-amz-json-1.1"


@pytest.fixture
def ecr() -> Iterator[tuple[FakeEcr, FakeServer]]:
    fake = FakeEcr()
    with serve(fake) as server:
        yield fake, server


def _env(server: FakeServer, **extra: str) -> dict[str, str]:
    return {
        **SAFE_ENV,
        "AWS_ACCESS_KEY_ID": "AKIDREDTEAM",
        "AWS_SECRET_ACCESS_KEY": "redteam-secret-access-key",
        "AWS_ENDPOINT_URL_ECR": server.url,
        **extra,
    }


def _record(
    figures: Figures, scenario: str, run: PluginRun, problems: list[str], verbose: bool = True
) -> None:
    """Record the outcome; the exec contract is checked too (its one-line rule only at -v=0)."""
    violations = answer_violations(run, 50.0)
    if verbose:
        violations = [v for v in violations if "stderr lines, not one" not in v]
    problems = [*problems, *violations]
    figures.record(
        Outcome("redteam", scenario, run.code, run.seconds, 50.0, not problems, "; ".join(problems))
    )
    assert not problems, problems


def _cached_run(server: FakeServer, cache: Path, *args: str) -> PluginRun:
    env = _env(server, CREDPROVIDER_CACHE_DIR=str(cache))
    return run_plugin(ECR, request_bytes(IMAGE), ["-v=1", *args], env)


def _answered_by_the_registry(run: PluginRun, fake: FakeEcr) -> list[str]:
    if run.code != 0:
        return [f"exit {run.code}: {run.stderr[-300:]}"]
    auth = run.response["auth"]
    if auth != {REGISTRY: {"username": "AWS", "password": fake.password}}:
        return [f"answered {json.dumps(auth)[:200]}"]
    return []


# --- 1. the cache path -------------------------------------------------------------------------


def _other_users_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    os.chown(path, OTHER_UID, OTHER_UID)
    return path


def _plant_entry(directory: Path, name: str) -> None:
    entry = directory / name
    entry.write_text(
        json.dumps(
            {
                "version": 1,
                "provider": ECR,
                "registry": REGISTRY,
                "writtenAt": 0,
                "expiresAt": 4_000_000_000,
                "cacheKeyType": "Registry",
                "auth": {"evil.example.com": {"username": "AWS", "password": PLANTED}},
            }
        )
    )


def _entry_name(server: FakeServer, tmp_path: Path) -> str:
    """The entry file name for IMAGE under the test env (found by caching once)."""
    probe = tmp_path / "probe-cache"
    assert _cached_run(server, probe).code == 0
    (entry,) = probe.glob("*.json")
    return entry.name


PathSetup = Callable[[Path, str], Path]


def _sticky_parent_with_foreign_link(tmp: Path, entry: str) -> Path:
    sticky = tmp / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    attacker = _other_users_dir(tmp / "attacker")
    _plant_entry(attacker, entry)
    link = sticky / "cache"
    link.symlink_to(attacker)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link


def _foreign_link_to_a_root_directory(tmp: Path, entry: str) -> Path:
    real = tmp / "root-owned"
    real.mkdir(mode=0o700)
    _plant_entry(real, entry)
    os.chmod(real / entry, 0o600)
    holder = tmp / "holder"
    holder.mkdir(mode=0o755)
    link = holder / "cache"
    link.symlink_to(real)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link


def _group_writable_parent(tmp: Path, entry: str) -> Path:
    shared = tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    return shared / "cache"


def _foreign_directory_on_the_path(tmp: Path, entry: str) -> Path:
    return _other_users_dir(tmp / "theirs") / "cache"


@pytest.mark.parametrize(
    ("scenario", "setup", "reason"),
    [
        (
            "symlink of another user in a sticky world-writable parent",
            _sticky_parent_with_foreign_link,
            f"owned by uid {OTHER_UID}",
        ),
        (
            "symlink of another user to a root-owned 0700 directory",
            _foreign_link_to_a_root_directory,
            f"owned by uid {OTHER_UID}",
        ),
        ("a parent writable by others, not sticky", _group_writable_parent, "writable by group"),
        ("a parent directory of another user", _foreign_directory_on_the_path, "owned by uid"),
    ],
)
def test_an_unsafe_cache_path_is_refused(
    ecr: tuple[FakeEcr, FakeServer],
    tmp_path: Path,
    figures: Figures,
    scenario: str,
    setup: PathSetup,
    reason: str,
) -> None:
    fake, server = ecr
    cache = setup(tmp_path, _entry_name(server, tmp_path))
    run = _cached_run(server, cache)
    problems = _answered_by_the_registry(run, fake)
    if reason not in run.stderr or "running uncached" not in run.stderr:
        problems.append(f"no refusal saying {reason!r}: {run.stderr[-300:]}")
    if PLANTED in run.stdout.decode():
        problems.append("served the planted entry")
    if [lock for lock in tmp_path.rglob("*.lock") if "probe-cache" not in lock.parts]:
        problems.append("created a lock file on an unsafe path")
    _record(figures, f"cache path: {scenario}", run, problems)


def test_root_owned_links_on_the_path_are_followed(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, figures: Figures
) -> None:
    """The checks refuse what another user controls, not symlinks as such (/var/lib -> /data)."""
    fake, server = ecr
    (tmp_path / "data").mkdir(mode=0o755)
    (tmp_path / "var").symlink_to(tmp_path / "data")
    first = _cached_run(server, tmp_path / "var" / "cache")
    second = _cached_run(server, tmp_path / "var" / "cache")
    problems = _answered_by_the_registry(second, fake)
    if "cache: hit" not in second.stderr or len(fake.calls) != 1:
        problems.append(f"not served from the cache: {second.stderr[-300:]}")
    _record(figures, "cache path: root-owned symlink followed", second, problems)
    assert first.code == 0


# --- 2. cache content that must not fail or delay a request ------------------------------------


def _rewrite(field: str, raw_value: str) -> Callable[[Path], None]:
    def apply(entry: Path) -> None:
        text = entry.read_text()
        data = json.loads(text)
        marker = "__VALUE__"
        data[field] = marker
        entry.write_text(json.dumps(data).replace(f'"{marker}"', raw_value))

    return apply


def _replace_with(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(entry: Path) -> None:
        entry.unlink()
        make(entry)

    return apply


TAMPERING: list[tuple[str, Callable[[Path], None]]] = [
    ("expiresAt 1e300", _rewrite("expiresAt", "1e300")),
    ("expiresAt Infinity", _rewrite("expiresAt", "Infinity")),
    ("expiresAt NaN", _rewrite("expiresAt", "NaN")),
    ("expiresAt a string", _rewrite("expiresAt", '"tomorrow"')),
    ("expiresAt in 10 years", _rewrite("expiresAt", "2100000000")),
    ("deeply nested JSON", _replace_with(lambda p: p.write_text("[" * 200_000 + "]" * 200_000))),
    ("a FIFO", _replace_with(lambda p: os.mkfifo(p, 0o600))),
    ("a symlink to /dev/zero", _replace_with(lambda p: p.symlink_to("/dev/zero"))),
    ("a symlink to another file", _replace_with(lambda p: p.symlink_to("/etc/hostname"))),
    ("a directory", _replace_with(lambda p: p.mkdir())),
    (
        "an auth key for another host",
        _rewrite("auth", json.dumps({"evil.example.com": {"username": "u", "password": PLANTED}})),
    ),
    ("an extra auth key", _rewrite("auth", json.dumps({REGISTRY: {}, "evil.example.com": {}}))),
    (
        "an empty password",
        _rewrite("auth", json.dumps({REGISTRY: {"username": "AWS", "password": ""}})),
    ),
    ("70 kB of padding", _rewrite("padding", json.dumps("x" * 70_000))),
    ("another user's file", lambda p: os.chown(p, OTHER_UID, OTHER_UID)),
]


@pytest.mark.parametrize(("scenario", "tamper"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_bad_cache_content_is_ignored_and_replaced(
    ecr: tuple[FakeEcr, FakeServer],
    tmp_path: Path,
    figures: Figures,
    scenario: str,
    tamper: Callable[[Path], None],
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    assert _cached_run(server, cache).code == 0
    (entry,) = cache.glob("*.json")
    tamper(entry)
    run = _cached_run(server, cache)
    problems = _answered_by_the_registry(run, fake)
    if "cache: ignoring" not in run.stderr:
        problems.append(f"no -v=1 line about the ignored entry: {run.stderr[-300:]}")
    if len(fake.calls) != 2:
        problems.append(f"{len(fake.calls)} registry calls, expected a fresh fetch")
    again = _cached_run(server, cache)
    if "cache: hit" not in again.stderr or not stat.S_ISREG(entry.lstat().st_mode):
        problems.append("the entry was not replaced by a good one")
    _record(figures, f"cache entry: {scenario}", run, problems)


def test_a_planted_lock_symlink_runs_uncached(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, figures: Figures
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    assert _cached_run(server, cache).code == 0
    (lock,) = cache.glob("*.lock")
    target = tmp_path / "elsewhere"
    target.write_text("not a lock")
    lock.unlink()
    lock.symlink_to(target)
    for entry in cache.glob("*.json"):  # a fresh entry is served without the lock: make a miss
        entry.unlink()
    run = _cached_run(server, cache)
    problems = _answered_by_the_registry(run, fake)
    if "cannot lock" not in run.stderr:
        problems.append(f"no warning about the lock: {run.stderr[-300:]}")
    if target.read_text() != "not a lock":
        problems.append("wrote through the planted link")
    _record(figures, "cache lock: a planted symlink", run, problems)


# --- 3. secrets: scrub, then cut ---------------------------------------------------------------


@pytest.mark.parametrize("offset", [0, 200, 230, 280, 299, 310])
def test_an_error_detail_is_scrubbed_before_it_is_cut(offset: int) -> None:
    token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + "p" * 40 + ".sig" + "n" * 20
    opaque = "opaque-refresh-token-" + "q" * 40
    forget_secrets()
    register_secret(opaque)
    try:
        for secret in (token, opaque):
            line = one_line("x" * offset + secret + " and more text after it " * 5)
            for start in range(0, len(secret) - 12):
                assert secret[start : start + 12] not in line
    finally:
        forget_secrets()


def test_get_does_not_print_the_service_account_token_a_plugin_echoes(
    tmp_path: Path, figures: Figures
) -> None:
    token = "sa-token-" + "t" * 60
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "echo-plugin"
    plugin.write_text('#!/bin/sh\necho "failed on $(cat)" >&2\nexit 1\n')
    plugin.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "  - name: echo-plugin\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    defaultCacheDuration: 1m\n    matchImages: [registry.example]\n"
        "    tokenAttributes:\n      serviceAccountTokenAudience: aud\n"
        "      cacheType: ServiceAccount\n      requireServiceAccount: true\n"
    )
    (tmp_path / "token").write_text(token)
    for extra in ([], ["--json"]):
        result = run_cli(
            "get", "registry.example/app", "--config", str(config), "--bin-dir", str(bin_dir),
            "--sa-token-file", str(tmp_path / "token"), *extra,
        )  # fmt: skip
        assert "failed on" in result.stdout
        assert token not in result.stdout + result.stderr
        shown = result.stdout if not extra else json.loads(result.stdout)["providers"][0]["stderr"]
        assert "sa-…(69 chars)" in shown


# --- 4. log injection and flooding -------------------------------------------------------------

HOSTILE_TEXT = "a\u009b31m\u202eb\x1b[2J\x07\rforged: line"
# What gets past request validation to the -v=1 request line: C1 controls and bidi overrides.
HOSTILE_IMAGE_PATH = "a\u009b31m\u202eb"


def test_the_request_line_escapes_what_a_terminal_would_interpret(
    ecr: tuple[FakeEcr, FakeServer], figures: Figures
) -> None:
    _, server = ecr
    run = run_plugin(ECR, request_bytes(f"{REGISTRY}/{HOSTILE_IMAGE_PATH}"), ["-v=1"], _env(server))
    problems = [f"raw {ch!r} on stderr" for ch in "\u009b\u202e" if ch in run.stderr]
    if "\\u202e" not in run.stderr or "\\u009b" not in run.stderr:
        problems.append("the escapes are not shown")
    _record(figures, "log injection: the image in the -v=1 request line", run, problems)


def test_a_server_body_in_an_error_line_is_escaped(
    ecr: tuple[FakeEcr, FakeServer], figures: Figures
) -> None:
    fake, server = ecr
    fake.fault = FakeResponse.json(
        {"__type": "AccessDeniedException", "message": HOSTILE_TEXT}, 400, content_type=AMZ_JSON
    )
    run = run_plugin(ECR, request_bytes(IMAGE), [], _env(server))
    problems = [f"raw {ch!r} on stderr" for ch in "\u009b\u202e\x1b\x07\r" if ch in run.stderr]
    if "\\x1b[2J" not in run.stderr or "AccessDeniedException" not in run.stderr:
        problems.append(f"the server's message is not shown escaped: {run.stderr[-300:]}")
    _record(figures, "log injection: a server's error message", run, problems, verbose=False)


@pytest.mark.parametrize("verbosity", ["-v=0", "-v=4"])
def test_a_huge_image_does_not_flood_the_log(
    ecr: tuple[FakeEcr, FakeServer], figures: Figures, verbosity: str
) -> None:
    _, server = ecr
    image = "quay.example/" + "a" * 600_000
    run = run_plugin(ECR, request_bytes(image), [verbosity], _env(server))
    problems = [] if len(run.stderr) < 10_000 else [f"{len(run.stderr)} bytes of stderr"]
    if run.code != 1:
        problems.append(f"exit {run.code}")
    _record(
        figures, f"log flooding: a 600 kB image at {verbosity}", run, problems, verbosity != "-v=0"
    )


# --- 5. one clear line, never a traceback ------------------------------------------------------

BIG_NUMBER = "9" * 5000
PLUGIN_INPUTS = [
    ("--deadline=99999999999", ["--deadline=99999999999"], {}, request_bytes(IMAGE), "at most"),
    ("CREDPROVIDER_DEADLINE huge", [], {"CREDPROVIDER_DEADLINE": "99999999999"}, request_bytes(IMAGE), "at most"),
    (
        "a 5000-digit number as an extra field",
        [],
        {},
        request_bytes(IMAGE)[:-2] + f',"x":{BIG_NUMBER}}}'.encode(),
        "invalid request",
    ),
    (
        "a 5000-digit number as the image",
        [],
        {},
        f'{{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":{BIG_NUMBER}}}'.encode(),
        "invalid request",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("scenario", "args", "extra_env", "stdin", "message"),
    PLUGIN_INPUTS,
    ids=[case[0] for case in PLUGIN_INPUTS],
)
def test_bad_plugin_input_is_one_clear_line(
    ecr: tuple[FakeEcr, FakeServer],
    figures: Figures,
    scenario: str,
    args: list[str],
    extra_env: dict[str, str],
    stdin: bytes,
    message: str,
) -> None:
    _, server = ecr
    run = run_plugin(ECR, stdin, args, _env(server, **extra_env))
    problems = [] if run.code == 1 else [f"exit {run.code}"]
    if message not in run.stderr or "internal error" in run.stderr:
        problems.append(f"not the expected line: {run.stderr[-300:]}")
    _record(figures, f"one line: {scenario}", run, problems, verbose=False)


def test_insane_metadata_lifetimes_are_answered_uncached(figures: Figures) -> None:
    """expires_in of 1e300 or NaN: a well-formed answer that the kubelet does not cache."""
    from tests.fakes.gcp import FakeMetadata

    for lifetime in ("1e300", "NaN", "-Infinity"):
        fake = FakeMetadata()
        with serve(
            lambda request, fake=fake, lifetime=lifetime: FakeResponse(
                200,
                fake(request).body.replace(b"3599", lifetime.encode()),
                {"Content-Type": "application/json", "Metadata-Flavor": "Google"},
            )
        ) as server:
            env = {**SAFE_ENV, "GCE_METADATA_HOST": server.url.removeprefix("http://")}
            run = run_plugin(
                "auth-provider-gcp", request_bytes("gcr.io/p/app"), ["get-credentials"], env
            )
        problems = [] if run.code == 0 else [f"exit {run.code}: {run.stderr[-200:]}"]
        if run.code == 0 and run.response.get("cacheDuration") != "0s":
            problems.append(f"cacheDuration {run.response.get('cacheDuration')}")
        _record(figures, f"one line: metadata expires_in {lifetime}", run, problems)


def test_a_bad_tenant_id_is_one_clear_line(tmp_path: Path, figures: Figures) -> None:
    config = tmp_path / "azure.json"
    config.write_text(json.dumps({"tenantId": "bad tenant/", "useManagedIdentityExtension": True}))
    run = run_plugin(
        "acr-credential-provider",
        request_bytes("contoso.azurecr.io/app"),
        [str(config), "-v=9"],
        SAFE_ENV,
    )
    problems = [] if run.code == 1 else [f"exit {run.code}"]
    if "is not a tenant ID" not in run.stderr or "internal error" in run.stderr:
        problems.append(f"not the expected line: {run.stderr[-300:]}")
    _record(figures, "one line: azure.json tenantId 'bad tenant/'", run, problems)


def _deep_yaml(tmp: Path) -> list[str]:
    path = tmp / "deep.yaml"
    path.write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    return ["validate", str(path)]


def _billion_laughs(tmp: Path) -> list[str]:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 10):
        refs = ",".join(f"*a{level - 1}" for _ in range(9))
        lines.append(f"a{level}: &a{level} [{refs}]")
    path = tmp / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    return ["validate", str(path)]


def _binary_file(tmp: Path) -> list[str]:
    path = tmp / "config.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe" * 100)
    return ["validate", str(path)]


def _nul_in_a_provider_name(tmp: Path) -> list[str]:
    path = tmp / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        '  - name: "ecr\\0credential"\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n'
        "    defaultCacheDuration: 1m\n    matchImages: [registry.example]\n"
    )
    return ["validate", str(path), "--bin-dir", str(tmp)]


def _nul_in_a_provider_name_get(tmp: Path) -> list[str]:
    return ["get", "registry.example/a", "--config", *_nul_in_a_provider_name(tmp)[1:]]


def _missing_token_file(tmp: Path) -> list[str]:
    config = tmp / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "  - name: some-plugin\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    defaultCacheDuration: 1m\n    matchImages: [registry.example]\n"
    )
    return [
        "get", "registry.example/a", "--config", str(config), "--bin-dir", str(tmp),
        "--sa-token-file", str(tmp / "x"),
    ]  # fmt: skip


def _directory_as_token_file(tmp: Path) -> list[str]:
    args = _missing_token_file(tmp)
    return [*args[:-1], str(tmp)]


def _missing_kubelet_config(tmp: Path) -> list[str]:
    return ["migrate", "--kubelet-config", str(tmp / "missing.yaml")]


def _invalid_kubelet_config(tmp: Path) -> list[str]:
    path = tmp / "kubelet.yaml"
    path.write_text("kind: KubeletConfiguration\n  bad: [indent\n")
    return ["migrate", "--kubelet-config", str(path)]


def _unbalanced_flags(tmp: Path) -> list[str]:
    return ["migrate", '--kubelet-flags=--cloud-provider="aws']


def _non_utf8_config_out(tmp: Path) -> list[str]:
    out = tmp / "existing.yaml"
    out.write_bytes(b"\xff\xfe not utf-8")
    target = tmp / "credprovider"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    return [
        "install", "--bin-dir", str(tmp / "bin"), "--config-out", str(out), "--target", str(target),
        "--providers", "aws",
    ]  # fmt: skip


CLI_INPUTS: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("validate: YAML nested 50,000 deep", _deep_yaml, "max depth"),
    ("validate: a billion laughs", _billion_laughs, "excessive aliasing"),
    ("validate: a binary file", _binary_file, "not UTF-8"),
    ("validate: NUL in a provider name", _nul_in_a_provider_name, "\\x00"),
    ("get: NUL in a provider name", _nul_in_a_provider_name_get, "embedded null byte"),
    ("get: --sa-token-file missing", _missing_token_file, "cannot read --sa-token-file"),
    ("get: --sa-token-file a directory", _directory_as_token_file, "cannot read --sa-token-file"),
    ("migrate: --kubelet-config missing", _missing_kubelet_config, "No such file"),
    ("migrate: --kubelet-config not YAML", _invalid_kubelet_config, "not YAML"),
    ("migrate: unbalanced quotes in the flags", _unbalanced_flags, "No closing quotation"),
    ("install: a non-UTF-8 --config-out", _non_utf8_config_out, "exists with other content"),
]


@pytest.mark.parametrize(
    ("scenario", "make", "message"), CLI_INPUTS, ids=[c[0] for c in CLI_INPUTS]
)
def test_bad_tool_input_is_a_clear_message(
    tmp_path: Path,
    figures: Figures,
    scenario: str,
    make: Callable[[Path], list[str]],
    message: str,
) -> None:
    result = run_cli(*make(tmp_path))
    output = result.stdout + result.stderr
    problems = [] if result.returncode in (1, 2) else [f"exit {result.returncode}"]
    if "Traceback" in output or "internal error" in output:
        problems.append(f"a traceback: {output[-300:]}")
    if message not in output:
        problems.append(f"no {message!r} in: {output[-300:]}")
    figures.record(
        Outcome("redteam", f"tool: {scenario}", result.returncode, 0.0, None, not problems,
                "; ".join(problems))
    )  # fmt: skip
    assert not problems, problems


# --- 7. install --copy and a planted symlink ---------------------------------------------------


def _planted_symlink(bin_dir: Path, attacker: Path) -> None:
    (bin_dir / ".credprovider").symlink_to(attacker)


def _planted_file(bin_dir: Path, attacker: Path) -> None:
    (bin_dir / ".credprovider").write_text("not a bundle")


def _directory_without_manifest(bin_dir: Path, attacker: Path) -> None:
    (bin_dir / ".credprovider").mkdir()
    (bin_dir / ".credprovider" / "credprovider").write_text("#!/bin/sh\necho pwned\n")


PLANTS: list[tuple[str, Callable[[Path, Path], None]]] = [
    ("a symlink to another directory", _planted_symlink),
    ("a regular file", _planted_file),
    ("a directory without the bundle's manifest", _directory_without_manifest),
]


@pytest.mark.parametrize(("scenario", "plant"), PLANTS, ids=[p[0] for p in PLANTS])
def test_install_copy_replaces_only_what_it_made(
    tmp_path: Path, figures: Figures, scenario: str, plant: Callable[[Path, Path], None]
) -> None:
    from tests.helpers import BUNDLE_DIR

    bundle = BUNDLE_DIR / "credprovider"
    if not bundle.exists():
        pytest.skip("needs the bundle (make build)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / "credprovider").write_text("#!/bin/sh\necho pwned\n")
    plant(bin_dir, attacker)
    args = [
        "install", "--copy", "--bin-dir", str(bin_dir), "--config-out", str(tmp_path / "c.yaml"),
        "--target", str(bundle), "--providers", "aws",
    ]  # fmt: skip
    refused = run_cli(*args)
    problems = [] if refused.returncode == 1 else [f"exit {refused.returncode}"]
    if "not a bundle copy this tool made" not in refused.stderr:
        problems.append(f"no refusal: {refused.stderr[-300:]}")
    if (bin_dir / "ecr-credential-provider").is_symlink():
        problems.append("linked a plugin name to what was planted")
    forced = run_cli(*args, "--force")
    copy = bin_dir / ".credprovider"
    if forced.returncode != 0 or copy.is_symlink() or not (copy / "_internal").is_dir():
        problems.append(f"--force did not put a real copy there: {forced.stderr[-300:]}")
    if sorted(p.name for p in attacker.iterdir()) != ["credprovider"]:
        problems.append("wrote into the planted directory")
    again = run_cli(*args)
    if again.returncode != 0 or "unchanged" not in again.stdout:
        problems.append(f"its own copy was not recognised: {again.stderr[-300:]}")
    figures.record(
        Outcome("redteam", f"install --copy: {scenario}", refused.returncode, 0.0, None,
                not problems, "; ".join(problems))
    )  # fmt: skip
    assert not problems, problems
