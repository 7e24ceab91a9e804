"""What ``credprovider doctor`` finds: checks that pass, warn or fail, each with the fix in one
sentence, and the facts a script reads (``--json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final

from credprovider.tool.node.discovery import NodeView

PASS, WARN, FAIL, INFO = "pass", "warn", "fail", "info"
SA_TOKEN_GATE: Final = "KubeletServiceAccountTokenForCredentialProviders"


# Most important first: what stops every pull, then what stops some, then what explains the past.
AREAS: Final = (
    "node",
    "config",
    "binary",
    "identity",
    "image",
    "cache",
    "service-account",
    "kubelet",
)


@dataclass
class Check:
    area: str  # one of AREAS
    status: str
    message: str
    fix: str = ""
    provider: str = ""


@dataclass
class Diagnosis:
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # more for --json: kubeletVersion
    # why the chain could not be checked as this user (what the kubelet, root, would read is
    # hidden): no verdict, exit 2
    undecided: str = ""

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.checks.append(Check(*args, **kwargs))

    @property
    def failed(self) -> bool:
        return any(check.status == FAIL for check in self.checks)

    def as_json(self, view: NodeView) -> dict[str, Any]:
        settings = view.settings
        return {
            "ok": not self.failed and not self.undecided,
            "undecided": self.undecided or None,
            "foundBy": view.found_by,
            "root": view.root,
            "kubeletPid": view.kubelet.pid if view.kubelet else None,
            "config": settings.provider_config,
            "binDir": settings.bin_dir,
            "featureGates": dict(settings.feature_gates),
            "sources": dict(settings.sources),
            **self.facts,
            "checks": [asdict(check) for check in self.checks],
        }
