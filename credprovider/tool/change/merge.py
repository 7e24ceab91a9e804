"""A node's credential provider config beside the one a change writes: the providers it keeps (its
other providers, first and as they are), whether one config already holds every provider of
another, and which kept providers have no plugin in the bin dir. Shared by ``install``,
``migrate --write`` and the agent's plan, which each merge ours into what the node has."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from credprovider.tool.catalog import SECRET_ENV
from credprovider.tool.change.render import WRITTEN_BY
from credprovider.tool.kubeconfig.model import CONFIG_KIND
from credprovider.tool.node.yamldoc import YamlError, load_yaml


def without_plugin(kept: list[dict[str, object]], there: Callable[[str], bool]) -> list[str]:
    """The names of the ``kept`` providers whose plugin ``there`` (a name in the bin dir) does not
    find: a kubelet given that config would not start (plugin binary executable did not exist)."""
    return [str(p.get("name")) for p in kept if not there(str(p.get("name")))]


def other_providers(current: bytes | None, name: str | None) -> list[dict[str, object]]:
    """The providers of the CredentialProviderConfig ``current`` other than ``name``, as they are;
    none when there is no such file, or it is not one (then writing it needs --force)."""
    document = _decoded(current) if current is not None else None
    providers = document.get("providers") if isinstance(document, dict) else None
    if not isinstance(document, dict) or not isinstance(providers, list):
        return []
    if document.get("kind") != CONFIG_KIND:
        return []
    return [p for p in providers if isinstance(p, dict) and p.get("name") != name]


def _decoded(config: bytes) -> object:
    """A config's YAML as the kubelet's decoder takes it (yamldoc: no alias bomb); ``None`` when it
    is not YAML (or not UTF-8)."""
    try:
        return load_yaml(config.decode("utf-8"))
    except (YamlError, UnicodeDecodeError):
        return None


def holds_providers(current: bytes, text: bytes) -> bool:
    """Whether the config ``current`` has every provider of the config ``text`` as it is (a config
    migrate merged: the node's other providers, and ours)."""
    have, want = _decoded(current), _decoded(text)
    if not isinstance(have, dict) or not isinstance(want, dict):
        return False
    if any(have.get(k) != want.get(k) for k in ("apiVersion", "kind")):
        return False
    providers, wanted = have.get("providers"), want.get("providers")
    return (
        isinstance(providers, list)
        and isinstance(wanted, list)
        and all(entry in providers for entry in wanted)
    )


def dropped_comments(current: bytes | None) -> str:
    """What a rewrite of the YAML config ``current`` loses that its providers do not say: its
    comments (a merge re-renders the document, and PyYAML keeps none). "" when it has none, or
    only the line credprovider writes on top."""
    text = (current or b"").decode("utf-8", "replace")
    found = sum(
        1 for line in text.splitlines() if _comment_in(line) and not line.startswith(WRITTEN_BY)
    )
    if not found:
        return ""
    return f"its {found} comment line(s) not kept: the backup has them"


def _comment_in(line: str) -> bool:
    """Whether the YAML ``line`` holds a comment: a ``#`` opening it, or after a blank, outside
    quotes (a ``#`` in a quoted pattern or a URL's fragment is not one)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return True
    return False


# A config holding one is root's alone to read.
SECRET_CONFIG_MODE: Final = 0o600


def secrets_in(config: bytes | None) -> list[str]:
    """The env names of the config ``config`` whose values are secrets (``AWS_SECRET_ACCESS_KEY``
    given in a provider's env), each once."""
    document = _decoded(config) if config is not None else None
    providers = document.get("providers") if isinstance(document, dict) else None
    found: dict[str, None] = {}
    for provider in providers if isinstance(providers, list) else []:
        env = provider.get("env") if isinstance(provider, dict) else None
        for entry in env if isinstance(env, list) else []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if name in SECRET_ENV and entry.get("value"):
                found[str(name)] = None
    return list(found)


def config_mode(config: bytes) -> int | None:
    """The mode a change writes the config ``config`` with: root's alone where it holds a secret
    (:func:`secrets_in`), else ``None`` (the file's own, or a new file's 0644)."""
    return SECRET_CONFIG_MODE if secrets_in(config) else None
