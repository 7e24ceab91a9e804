"""``credprovider get``: credentials the way the kubelet would get them, and why."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from credprovider.runtime.child import DRAIN_SECONDS
from credprovider.tool.catalog import PLUGINS
from emulators.aws import NODE_KEY, FakeEcr, ecr_env
from emulators.gcp import FakeMetadata
from emulators.harness import GCP_PULLER, gcp_emulator
from emulators.http import FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import CONFIG_DIR, config_file, provider_entry
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import ECR_IMAGE, write
from tests.integration.conftest import Azure
from tests.integration.kubelet_config_cases import CASES

# --- get ----------------------------------------------------------------------------------------------


def aws_env(server: FakeServer, **extra: str) -> dict[str, str]:
    return ecr_env(server.url, **extra)


def get_json(
    image: str, config: Path, bin_dir: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """``credprovider get IMAGE --config ... --bin-dir ... --json [extra]``: exit status, report."""
    result = cli(
        "get", image, "--config", str(config), "--bin-dir", str(bin_dir), "--json", *extra, env=env
    )
    return result.returncode, json.loads(result.stdout)


def test_get_changes_nothing_where_a_provider_keeps_its_cache(
    tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer]
) -> None:
    """A provider whose env names a cache directory: get reads the kubelet's cache and never
    creates, locks or writes anything in it (docs/operators.md: only install and migrate --write
    change anything)."""
    fake, server = ecr
    cache = tmp_path / "cache"
    entry = provider_entry(env=[{"name": "CREDPROVIDER_CACHE_DIR", "value": str(cache)}])
    config = config_file(tmp_path, entry)
    code, report = get_json(f"{ECR_IMAGE}:v1", config, bin_dir, env=aws_env(server))
    assert (code, report["credentialsFound"]) == (0, True)
    assert not cache.exists()  # a miss: fetched, and nothing created
    assert len(fake.calls) == 1

    # the kubelet's own exec fills the cache; get then answers from it, adding nothing
    run = run_plugin(
        "ecr-credential-provider",
        request_bytes(f"{ECR_IMAGE}:v1"),
        env={**aws_env(server), "CREDPROVIDER_CACHE_DIR": str(cache)},
        use_bundle=True,
    )
    assert run.code == 0, run.stderr
    filled = sorted((p.name, p.stat().st_mtime_ns) for p in cache.iterdir())
    assert filled and len(fake.calls) == 2
    code, report = get_json(f"{ECR_IMAGE}:v1", config, bin_dir, env=aws_env(server))
    assert (code, report["credentialsFound"]) == (0, True)
    assert len(fake.calls) == 2  # served from the cache
    assert sorted((p.name, p.stat().st_mtime_ns) for p in cache.iterdir()) == filled
    assert any(
        "cache: hit" in line and "read-only" in line for line in report["providers"][0]["decisions"]
    ), report


def test_get_ecr(tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer]) -> None:
    fake, server = ecr
    config = config_file(tmp_path, provider_entry())
    code, report = get_json(f"{ECR_IMAGE}:v1", config, bin_dir, env=aws_env(server))
    assert (code, report["image"], report["credentialsFound"]) == (0, ECR_IMAGE, True)
    (provider,) = report["providers"]
    registry = ECR_IMAGE.split("/")[0]
    assert provider["appliedKeys"] == [registry]
    assert provider["response"]["auth"][registry] == {
        "username": "AWS",
        "password": "ecr…(29 chars)",
    }
    assert (provider["cacheKey"], 21590 < provider["cacheSeconds"] <= 21600) == (registry, True)
    assert fake.password not in json.dumps(report)
    assert (
        "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment"
        in provider["decisions"]
    )
    shown = cli(
        "get",
        ECR_IMAGE,
        "--config",
        str(config),
        "--bin-dir",
        str(bin_dir),
        "--show-password",
        env=aws_env(server),
    )
    assert f"password {fake.password})" in shown.stdout


def test_get_reports_a_failing_provider_and_a_key_that_does_not_apply(
    tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer]
) -> None:
    _fake, server = ecr
    (bin_dir / "wrong-key-plugin").write_text(
        '#!/bin/sh\ncat >/dev/null\necho \'{"kind":"CredentialProviderResponse","apiVersion":'
        '"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Image","auth":'
        '{"123456789012.dkr.ecr.us-east-1.amazonaws.com:443":{"username":"u","password":"p"},'
        '"*.amazonaws.com":{"username":"u","password":"p"}}}\'\n'
    )
    (bin_dir / "wrong-key-plugin").chmod(0o755)
    config = config_file(
        tmp_path,
        provider_entry(
            name="acr-credential-provider",
            args=[str(tmp_path / "missing-azure.json")],
            matchImages=["*.dkr.ecr.*.amazonaws.com"],
        ),
        provider_entry(name="wrong-key-plugin", matchImages=["*.dkr.ecr.*.amazonaws.com"]),
        provider_entry(name="auth-provider-gcp", matchImages=["gcr.io"], args=["get-credentials"]),
    )
    code, report = get_json(ECR_IMAGE, config, bin_dir, env=aws_env(server))
    assert (code, report["credentialsFound"]) == (1, False)
    acr, wrong, gcp = report["providers"]
    assert (acr["exitCode"], acr["response"]) == (1, None)
    assert f"cannot read the cloud config {tmp_path}/missing-azure.json" in acr["error"]
    assert wrong["appliedKeys"] == []
    assert wrong["ignoredKeys"] == {
        "123456789012.dkr.ecr.us-east-1.amazonaws.com:443": "port differs: key has 443, image has no port (ports must be equal)",
        "*.amazonaws.com": "host label count differs (3 vs 6): each '*' matches exactly one label",
    }
    assert (gcp["matched"], gcp["ran"]) == (False, False)
    human = cli(
        "get", ECR_IMAGE, "--config", str(config), "--bin-dir", str(bin_dir), env=aws_env(server)
    )
    assert "result: the kubelet would pull WITHOUT credentials" in human.stdout
    assert "- auth-provider-gcp: matchImages do not match" in human.stdout


def test_get_with_service_account(
    tmp_path: Path, bin_dir: Path, ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    attributes = {
        "serviceAccountTokenAudience": "sts.amazonaws.com",
        "cacheType": "ServiceAccount",
        "requireServiceAccount": True,
        "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/ecr-role-arn"],
    }
    config = config_file(tmp_path, provider_entry(tokenAttributes=attributes))
    env = aws_env(server, AWS_ENDPOINT_URL_STS=moto_server)
    _, without = get_json(ECR_IMAGE, config, bin_dir, env=env)
    assert (
        "requireServiceAccount is true and no service account token"
        in without["providers"][0]["skipped"]
    )
    token_file = write(tmp_path / "token", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln\n")
    _, report = get_json(
        ECR_IMAGE,
        config,
        bin_dir,
        "--sa-token-file",
        str(token_file),
        "--sa-annotation",
        "eks.amazonaws.com/ecr-role-arn=arn:aws:iam::123456789012:role/r",
        env=env,
    )
    assert report["credentialsFound"] is True
    assert fake.calls[-1].access_key != NODE_KEY
    # get says which role the plugin used (our plugins run at -v=1 under get)
    assert (
        "assuming role arn:aws:iam::123456789012:role/r (from annotation "
        "eks.amazonaws.com/ecr-role-arn) with the service account token"
    ) in report["providers"][0]["decisions"]


def test_get_gcp_and_azure(tmp_path: Path, bin_dir: Path, azure: Azure) -> None:
    fake = FakeMetadata()
    with serve(fake) as metadata:
        config = config_file(
            tmp_path,
            provider_entry(
                name="auth-provider-gcp",
                matchImages=list(PLUGINS["gcp"].match_images),
                args=["get-credentials"],
            ),
            provider_entry(
                name="acr-credential-provider",
                matchImages=list(PLUGINS["azure"].match_images),
                args=[azure.config(useManagedIdentityExtension=True)],
            ),
        )
        env = {"GCE_METADATA_HOST": metadata.address, **azure.env}
        _, gcp = get_json("us-docker.pkg.dev/p/r/app", config, bin_dir, env=env)
        _, acr = get_json("myreg.azurecr.io/app", config, bin_dir, env=env)
    assert gcp["providers"][0]["appliedKeys"] == ["us-docker.pkg.dev", "*.pkg.dev"]
    assert gcp["providers"][0]["cacheKey"] == "<global>"
    assert acr["providers"][1]["appliedKeys"] == ["myreg.azurecr.io"]


def test_get_refuses_an_invalid_config(tmp_path: Path, bin_dir: Path) -> None:
    result = cli(
        "get",
        ECR_IMAGE,
        "--config",
        str(write(tmp_path / "c.yaml", CASES["no providers"])),
        "--bin-dir",
        str(bin_dir),
    )
    assert result.returncode == 1
    assert "the kubelet would not start with this config: failed to validate" in result.stderr


@pytest.mark.parametrize(
    ("text", "seconds"), [("1m", 60.0), ("30s", 30.0), ("1m30s", 90.0), ("45", 45.0), ("2.5", 2.5)]
)
def test_get_timeout_takes_go_durations(text: str, seconds: float) -> None:
    from credprovider.tool.commands.get import _timeout_seconds

    assert _timeout_seconds(text) == seconds


@pytest.mark.parametrize("text", ["1 minute", "0s", "2h", "-1s", "1x"])
def test_get_timeout_refuses_what_is_not_a_usable_duration(text: str) -> None:
    """Given after '=' (a value that starts with '-' must be: test_usage_lines), each is refused
    by the duration's own check."""
    result = cli("get", "nginx", "--config", "c.yaml", "--bin-dir", "b", f"--timeout={text}")
    assert result.returncode == 2 and "argument --timeout" in result.stderr


@pytest.mark.skipif(
    Path("/etc/kubernetes/image-credential-provider-config.yaml").exists(),
    reason="this machine has a kubelet credential provider config at the default path",
)
def test_get_without_config_names_the_default_it_looked_for() -> None:
    result = cli("get", "nginx")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "credprovider get: give --config (no running kubelet, kubelet flag file or known layout "
        "names one, and nothing is at the default "
        "/etc/kubernetes/image-credential-provider-config.yaml)\n"
    )


def test_get_says_why_each_provider_did_not_match(tmp_path: Path) -> None:
    """No provider matched, so none ran: for each, the nearest patterns and why they miss."""
    config = write(tmp_path / "config.yaml", (CONFIG_DIR / "aws.yaml").read_text())
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com:5000/app"
    result = cli("get", image, "--config", str(config), "--bin-dir", str(tmp_path), "--json")
    assert result.returncode == 1
    (provider,) = json.loads(result.stdout)["providers"]
    assert provider["closestMisses"][0] == {
        "pattern": "*.dkr.ecr.*.amazonaws.com",
        "reason": "port differs: pattern has no port, image has 5000 (ports must be equal): add "
        "'*.dkr.ecr.*.amazonaws.com:5000'",
    }
    text = cli("get", image, "--config", str(config), "--bin-dir", str(tmp_path)).stdout
    assert "    nearest '*.dkr.ecr.*.amazonaws.com': port differs" in text


def script_plugin(tmp_path: Path, directory: str, name: str, script: str) -> tuple[Path, Path]:
    """A plugin ``name`` that runs the shell ``script``, in ``tmp_path/directory``, and a config
    whose one provider is it, for ECR images: (the plugin, the config)."""
    plugin = tmp_path / directory / name
    plugin.parent.mkdir()
    plugin.write_text(f"#!/bin/sh\n{script}\n")
    plugin.chmod(0o755)
    entry = provider_entry(name=name, matchImages=["*.dkr.ecr.*.amazonaws.com"])
    return plugin, config_file(tmp_path, entry)


# A plugin the config names may do anything: get answers within --timeout (plus a short drain)
# and holds at most a bounded part of what the plugin writes.
HOSTILE_PLUGINS = {
    "an answer larger than any response": (
        "cat >/dev/null; head -c 6000000 /dev/zero; exit 0",
        "its response is larger than 4 MiB; the rest was not read",
    ),
    "an answer without end": ("cat >/dev/null; yes", "context deadline exceeded"),
    "a descendant that keeps the pipes": (
        'cat >/dev/null; setsid sleep 60 & echo $! > "$0.pid"; sleep 60',
        "context deadline exceeded",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE_PLUGINS))
def test_get_answers_whatever_a_plugin_does(tmp_path: Path, bin_dir: Path, name: str) -> None:
    script, error = HOSTILE_PLUGINS[name]
    plugin, config = script_plugin(tmp_path, "hostile", "hostile-plugin", script)
    try:
        started = time.monotonic()
        code, report = get_json(ECR_IMAGE, config, plugin.parent, "--timeout", "2s")
        assert time.monotonic() - started < 2 + DRAIN_SECONDS + 10
    finally:
        pid = plugin.with_name("hostile-plugin.pid")
        if pid.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGKILL)
    (provider,) = report["providers"]
    assert (code, report["credentialsFound"], provider["response"]) == (1, False, None)
    assert error in provider["error"]


def test_get_shows_who_an_impersonating_provider_pulls_as(tmp_path: Path, bin_dir: Path) -> None:
    """Source → target, from the plugin's own -v=1 line, in the human report and in --json."""
    pulls_as = (
        f"pulling as {GCP_PULLER}: the VM's default service account → {GCP_PULLER} (impersonated)"
    )
    with gcp_emulator() as google:
        config = config_file(
            tmp_path,
            provider_entry(
                name="auth-provider-gcp-registry",
                matchImages=["*.pkg.dev"],
                args=["get-credentials", f"--impersonate-service-account={GCP_PULLER}"],
            ),
        )
        (bin_dir / "auth-provider-gcp-registry").symlink_to(bin_dir / "auth-provider-gcp")
        image = "europe-docker.pkg.dev/registry-project/repo/app"
        code, report = get_json(image, config, bin_dir, env=google.env)
        human = cli(
            "get", image, "--config", str(config), "--bin-dir", str(bin_dir), env=google.env
        )
    assert code == 0
    (provider,) = report["providers"]
    assert pulls_as in provider["decisions"]
    assert f"    said: {pulls_as}\n" in human.stdout
    issued = list(google.fakes["iam"].issued)  # type: ignore[attr-defined]
    assert len(issued) == 2  # one exec each (get runs the plugin without a cache)
    assert not any(token in human.stdout or token in json.dumps(report) for token in issued)


def test_get_says_an_answer_past_the_kubelets_deadline_gets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--timeout`` longer than the kubelet's 60 s lets get wait for a slow plugin; an answer
    that came after the kubelet's kill is shown (in --json) but counts for nothing, as under the
    kubelet. The kubelet's deadline is shortened here so that the test need not wait a minute."""
    from credprovider.tool.images import lookup
    from credprovider.tool.kubeconfig.validate import load_config

    answer = json.dumps(
        {
            "kind": "CredentialProviderResponse",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "cacheKeyType": "Registry",
            "auth": {"*.dkr.ecr.*.amazonaws.com": {"username": "AWS", "password": "late"}},
        }
    )
    plugin, config = script_plugin(
        tmp_path, "bin", "slow-plugin", f"cat >/dev/null; sleep 1.5; echo '{answer}'"
    )
    (provider,) = load_config(str(config)).providers
    in_time = lookup.run_provider(provider, str(plugin.parent), ECR_IMAGE, "", {}, timeout=10)
    assert in_time.error is None and in_time.applied_keys  # within the kubelet's 60 s
    monkeypatch.setattr(lookup, "KUBELET_EXEC_TIMEOUT_SECONDS", 1.0)
    late = lookup.run_provider(provider, str(plugin.parent), ECR_IMAGE, "", {}, timeout=10)
    report = lookup.LookupReport(ECR_IMAGE, [late])
    assert late.response is not None and report.credentials == []
    assert late.error is not None
    assert re.search(r"it answered after \d+ s, and the kubelet kills a plugin at 1 s", late.error)


def test_get_runs_a_plugin_where_the_kubelet_does(tmp_path: Path) -> None:
    """The kubelet sets no directory for its plugins: they run in its own, ``/``. get ran them
    where the operator stood, so a relative path in their args read another file than the
    kubelet's plugin would. A relative --bin-dir is still the operator's."""
    (tmp_path / "bin").mkdir()
    write(tmp_path / "bin" / "where", '#!/bin/sh\ncat >/dev/null\necho "in $(pwd)" >&2\nexit 1\n')
    (tmp_path / "bin" / "where").chmod(0o755)
    config = config_file(tmp_path, provider_entry(name="where", matchImages=["reg.example"]))
    result = cli("get", "reg.example/app", "--config", str(config), "--bin-dir", "bin",
                 "--json", cwd=tmp_path)  # fmt: skip
    report = json.loads(result.stdout)["providers"][0]
    assert report["ran"] and report["stderr"].strip() == "in /", report
