"""The registry plugin on the operator's path (issue #64), through the built bundle: install refuses
it without the settings only the operator can name; with them (``--provider-settings``, as the
chart's ``providerSettings``) it links the fourth name and writes the entry; validate passes it
clean; and the kubelet's own code (the harness around pkg/credentialprovider/plugin, with the
entry's tokenAttributes) gets each backend's credential through the installed link, for the pod's
service account, while a pod of another namespace gets none."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from release.bundle import BUNDLE_DIR
from tests.contract.test_registries import AUDIENCE, BACKENDS, HOST, backend_cloud
from tests.helpers import private, require_bundle
from tests.helpers_kubelet import run_harness

PLUGIN = "registry-credential-provider"


def tool(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        private([str(BUNDLE_DIR / "credprovider"), *args]),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_install_refuses_the_registry_plugin_without_its_settings(tmp_path: Path) -> None:
    require_bundle()
    config = tmp_path / "config.yaml"
    refused = tool("install", "--bin-dir", str(tmp_path), "--config-out", str(config),
                   "--providers", "aws,registries")  # fmt: skip
    assert refused.returncode == 2 and not config.exists()
    (line,) = refused.stderr.splitlines()
    assert (
        "registries (registry-credential-provider) ships no matchImages, args, tokenAttributes"
        in line
    )
    assert "docs/registries.md" in line


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_installed_it_serves_the_kubelet_through_each_backend(
    backend: str, tmp_path: Path, kubelet_harness: Path
) -> None:
    require_bundle()
    with backend_cloud(backend) as cloud:
        bin_dir, config = tmp_path / "bin", tmp_path / "config.yaml"
        bin_dir.mkdir()
        attributes: dict[str, object] = {
            "serviceAccountTokenAudience": AUDIENCE,
            "cacheType": "Token",
            "requireServiceAccount": True,
        }
        if cloud.annotations:
            attributes["optionalServiceAccountAnnotationKeys"] = list(cloud.annotations)
        settings = {"registries": {"matchImages": [HOST], "args": cloud.args,
                                   "tokenAttributes": attributes}}  # fmt: skip
        installed = tool("install", "--bin-dir", str(bin_dir), "--config-out", str(config),
                         "--providers", "registries", "--provider-settings", json.dumps(settings),
                         "--json")  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        assert (bin_dir / PLUGIN).resolve() == (BUNDLE_DIR / "credprovider").resolve()
        (entry,) = yaml.safe_load(config.read_text())["providers"]
        assert (entry["name"], entry["args"]) == (PLUGIN, cloud.args)
        valid = tool("validate", str(config), "--bin-dir", str(bin_dir))
        assert valid.returncode == 0 and "warning" not in valid.stdout + valid.stderr, valid.stdout

        explained = tool("explain", f"{HOST}/team/app", "--config", str(config), "--json")
        said = json.loads(explained.stdout)
        assert (said["plugin"], said["backend"], said["recognized"]) == (PLUGIN, backend, True)
        elsewhere = json.loads(tool("explain", "elsewhere.example.test/x", "--config",
                                    str(config), "--provider", "registries", "--json").stdout)  # fmt: skip
        if backend == "secret":  # the Secret names its hosts: the pod's Secret decides
            assert elsewhere["recognized"] and "if it has one" in elsewhere["action"]
        else:
            assert not elsewhere["recognized"] and "the pull fails" in elsewhere["action"]

        # get, as an operator debugs a pull: the backend that answered is said
        token_file = tmp_path / "token"
        token_file.write_text(cloud.token)
        annotations = [f"--sa-annotation={k}={v}" for k, v in cloud.annotations.items()]
        got = tool("get", f"{HOST}/team/app", "--config", str(config), "--bin-dir", str(bin_dir),
                   "--sa-token-file", str(token_file), *annotations, "--environment", "this",
                   env=cloud.env)  # fmt: skip
        assert got.returncode == 0, got.stderr
        title = {"quay": "Quay robot federation", "quay-sts": "Quay token exchange",
                 "artifactory": "Artifactory OIDC", "cloudsmith": "Cloudsmith OIDC",
                 "vault": "Vault", "secret": "pull Secret"}[backend]  # fmt: skip
        assert f"said: {title}" in got.stdout or title in got.stdout, got.stdout
        assert not any(secret in got.stdout + got.stderr for secret in cloud.password())

        other = cloud.issuer.token(namespace="other", name="intruder", audience=AUDIENCE)
        lookups = [
            {"image": f"{HOST}/team/app:v1", "namespace": "team", "pod": "p1", "podUID": "u1",
             "serviceAccount": {"name": "puller", "uid": "sa-1", "token": cloud.token,
                                "annotations": cloud.annotations}},
            {"image": f"{HOST}/team/app:v1", "namespace": "other", "pod": "p2", "podUID": "u2",
             "serviceAccount": {"name": "intruder", "uid": "sa-2", "token": other,
                                "annotations": cloud.annotations}},
        ]  # fmt: skip
        run = run_harness(kubelet_harness, config, bin_dir, lookups, cloud.env)
        assert run.code == 0, run.klog[-2000:]
        ours, theirs = run.results
        assert ours["found"], run.klog[-2000:]
        (credential,) = ours["credentials"]
        assert credential["username"] == cloud.username
        assert credential["password"] in cloud.password()
        assert not theirs["found"] or not theirs["credentials"], theirs  # refused: no credential
