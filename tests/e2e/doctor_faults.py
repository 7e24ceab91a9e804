"""``credprovider doctor`` on the real-kubelet node (inside tests/e2e/node.py's namespaces): run from
the bundle with no arguments, once on the healthy node and once per seeded fault, each fault put
right before the next unless it cannot be (an unclaimed pod, a stopped endpoint: those come last).

Also what the node is given, prepared on the host side by the test: a bin dir of links into the
bundle (as an operator installs it) and the shipped configs as a directory, with the ACR provider's
``:443`` patterns left out (the unclaimed-image fault needs them missing) and a cache directory for
the ECR plugin (the writable-cache fault needs one).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

UNCLAIMED_IMAGE = "contoso.azurecr.io:443/team/app:v1"


def prepare_node(shipped: Path, bundle: Path, node: Path) -> tuple[Path, Path, Path]:
    """(config dir, bin dir, ECR cache dir) for the kubelet under ``node``."""
    from credprovider.tool.node.yamldoc import load_yaml

    config, bin_dir, cache = node / "config", node / "bin", node / "cache" / "ecr"
    config.mkdir(parents=True)
    bin_dir.mkdir()
    for source in sorted(shipped.glob("*.yaml")):
        document = load_yaml(source.read_text())
        for provider in document["providers"]:
            (bin_dir / provider["name"]).symlink_to(bundle / provider["name"])
            if provider["name"] == "acr-credential-provider":
                provider["matchImages"] = [p for p in provider["matchImages"] if ":443" not in p]
            if provider["name"] == "ecr-credential-provider":
                provider["args"] = [*provider.get("args", []), f"--cache-dir={cache}"]
        (config / source.name).write_text(json.dumps(document, indent=2) + "\n")
    return config, bin_dir, cache


def doctor(bundle: Path, tools: str) -> dict[str, Any]:
    """``credprovider doctor --json`` from the bundle, as root, with a login shell's environment
    only (``tools``, where crictl is, first on its PATH): what the plugins inherit must come from
    the kubelet."""
    proc = subprocess.run(
        [str(bundle / "credprovider"), "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{tools}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"},
        check=False,
    )
    report: dict[str, Any] = (
        json.loads(proc.stdout) if proc.stdout.strip() else {"stdout": proc.stdout}
    )
    report["exitCode"] = proc.returncode
    report["stderr"] = proc.stderr[-2000:]
    return report


def seed_faults(
    spec: dict[str, Any], manifests: Path, stop_metadata: Callable[[], None]
) -> dict[str, dict[str, Any]]:
    """The doctor's report on the healthy node, then with each fault."""
    bundle, bin_dir, config = Path(spec["bundle"]), Path(spec["bin_dir"]), Path(spec["config"])
    cache, tools = Path(spec["cache"]), spec["tools"]
    reports = {"healthy": doctor(bundle, tools)}

    plugin = bin_dir / "ecr-credential-provider"
    plugin.unlink()
    plugin.write_bytes((bundle / "ecr-credential-provider").read_bytes())  # copied, not linked
    plugin.chmod(0o755)
    reports["copied plugin"] = doctor(bundle, tools)
    plugin.unlink()
    plugin.symlink_to(bundle / "ecr-credential-provider")

    cache.chmod(0o777)
    reports["writable cache"] = doctor(bundle, tools)
    cache.chmod(0o700)

    aws = config / "aws.yaml"
    before, times = aws.read_bytes(), os.stat(aws)
    aws.write_bytes(
        before.replace(b'"defaultCacheDuration": "12h"', b'"defaultCacheDuration": "6h"')
    )
    reports["config changed"] = doctor(bundle, tools)
    aws.write_bytes(before)
    os.utime(aws, ns=(times.st_atime_ns, times.st_mtime_ns))

    (manifests / "unclaimed.json").write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "unclaimed", "namespace": "default"},
                "spec": {
                    "containers": [{"name": "c", "image": UNCLAIMED_IMAGE}],
                    "restartPolicy": "Never",
                },
            }
        )
    )
    time.sleep(2)  # the kubelet reads its manifests every second
    reports["unclaimed image"] = doctor(bundle, tools)

    stop_metadata()
    reports["unreachable identity"] = doctor(bundle, tools)
    return reports
