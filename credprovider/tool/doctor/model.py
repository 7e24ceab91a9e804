"""What ``credprovider doctor`` finds: checks that pass, warn or fail, each with the fix in one
sentence, and the facts a script reads (``--json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Final

from credprovider.tool.node.discovery import NodeView


class Status(StrEnum):
    """A check's verdict (``--json``: its value)."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    INFO = "info"


PASS, WARN, FAIL, INFO = Status.PASS, Status.WARN, Status.FAIL, Status.INFO


class Area(StrEnum):
    """What a check is about, most important first: what stops every pull, then what stops some,
    then what explains the past (the order doctor prints them in)."""

    NODE = "node"
    CONFIG = "config"
    BINARY = "binary"
    IDENTITY = "identity"
    IMAGE = "image"
    CACHE = "cache"
    SERVICE_ACCOUNT = "service-account"
    KUBELET = "kubelet"


AREAS: Final = tuple(Area)


@dataclass
class Check:
    area: Area
    status: Status
    message: str
    fix: str = ""
    provider: str = ""

    def __post_init__(self) -> None:  # a name given as text: one of the enums' (else ValueError)
        self.area, self.status = Area(self.area), Status(self.status)


@dataclass
class Diagnosis:
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # more for --json: kubeletVersion
    # why the chain could not be checked as this user (what the kubelet, root, would read is
    # hidden): no verdict, exit 2
    undecided: str = ""
    # each provider's service account token audience (tokenAttributes): asked of the API server
    # when doctor may (doctor/__init__.py)
    audiences: dict[str, str] = field(default_factory=dict)

    def add(
        self, area: Area | str, status: Status, message: str, fix: str = "", provider: str = ""
    ) -> None:
        self.checks.append(Check(Area(area), status, message, fix, provider))

    @property
    def failed(self) -> bool:
        return any(check.status == FAIL for check in self.checks)

    def as_json(self, view: NodeView) -> dict[str, Any]:
        settings = view.settings
        return {
            "ok": not self.failed and not self.undecided,
            "undecided": self.undecided or None,
            "foundBy": view.found_by,
            "root": view.root.path,
            "kubeletPid": view.kubelet.pid if view.kubelet else None,
            "config": settings.provider_config,
            "binDir": settings.bin_dir,
            "featureGates": dict(settings.feature_gates),
            "sources": dict(settings.sources),
            **self.facts,
            "checks": [asdict(check) for check in self.checks],
        }
