"""Kubeconfig files, read as node files are and found as kubectl finds them.

A kubeconfig is read as any node file (``tool.node.access``: a regular file, bounded) with the
tool's YAML rules, and each file it names is checked the same way before the client library opens
it. ``$KUBECONFIG`` may list several files (``:``-separated): they are merged as client-go's
loader merges them (``tools/clientcmd/loader.go``): a missing file is skipped, the same one named
twice is read once, a cluster, user or context is the first file's of that name, and
``current-context`` the first file's that sets one; each file's relative paths (its files, and an
exec command with a ``/``) are its own directory's. Not on the plugins' exec path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, Final

from credprovider.errors import CredproviderError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes, read_text
from credprovider.tool.node.yamldoc import YamlError, load_yaml

# A token, a certificate or a key is a few KiB.
KUBECONFIG_FILE_CAP: Final = 1 << 20
_FILE_KEYS: Final = ("tokenFile", "certificate-authority", "client-certificate", "client-key")
_SECTIONS: Final = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


class KubeconfigError(CredproviderError):
    """A kubeconfig that cannot be used; one line naming it."""


def read_kubeconfig(path: str) -> dict[str, Any]:
    """The kubeconfig at ``path``, its relative paths made its directory's."""
    try:
        found = load_yaml(read_text(path))
    except FileProblem as exc:
        raise KubeconfigError(f"cannot read the kubeconfig {exc}") from exc
    except UnreadableError:
        raise KubeconfigError(
            f"cannot read the kubeconfig {path} as uid {os.geteuid()} (permission denied): "
            "name one this user may read with --kubeconfig"
        ) from None
    except YamlError as exc:
        raise KubeconfigError(f"the kubeconfig {path} is not YAML: {exc}") from exc
    if not isinstance(found, dict) or not isinstance(found.get("clusters"), list):
        raise KubeconfigError(f"{path} is not a kubeconfig (a YAML mapping with clusters)")
    _resolve(found, os.path.dirname(os.path.abspath(path)))
    for each in _named_files(found):
        try:  # lightkube would read it whole, and block on a FIFO
            read_bytes(each, KUBECONFIG_FILE_CAP)
        except (FileProblem, UnreadableError) as exc:
            raise KubeconfigError(
                f"the kubeconfig {path} names a file that cannot be used: {exc}"
            ) from None
    return found


def read_kubeconfigs(listed: str) -> dict[str, Any]:
    """The kubeconfigs ``$KUBECONFIG`` lists, merged as client-go merges them."""
    paths = list(dict.fromkeys(p for p in listed.split(os.pathsep) if p))
    there = [p for p in paths if os.path.lexists(p)]
    if not there:
        raise KubeconfigError(f"none of the kubeconfigs KUBECONFIG lists exists: {listed}")
    merged: dict[str, Any] = {}
    for path in there:
        found = read_kubeconfig(path)
        for section, _ in _SECTIONS:
            have = merged.setdefault(section, [])
            names = {entry.get("name") for entry in have if isinstance(entry, dict)}
            for entry in found.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") not in names:
                    have.append(entry)
                    names.add(entry.get("name"))
        for key, value in found.items():
            if key not in dict(_SECTIONS) and value not in (None, "") and key not in merged:
                merged[key] = value
    return merged


def named(kubeconfig: Mapping[str, Any], section: str, key: str, name: str) -> dict[str, Any]:
    """The ``key`` mapping of the ``section`` entry called ``name`` (``{}`` if there is none)."""
    for entry in kubeconfig.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key)
            return body if isinstance(body, dict) else {}
    return {}


def _bodies(kubeconfig: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Each cluster's and user's mapping: where a kubeconfig names files."""
    for section, key in _SECTIONS[:2]:
        for entry in kubeconfig.get(section) or []:
            body = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(body, dict):
                yield body


def _resolve(kubeconfig: dict[str, Any], base: str) -> None:
    """Each relative file path of ``kubeconfig``, and a relative exec command with a ``/`` (a
    bare name is looked up on PATH), made ``base``'s (client-go's ``ResolveLocalPaths``): the
    one place a kubeconfig's relative paths are resolved."""
    for body in _bodies(kubeconfig):
        for name in _FILE_KEYS:
            value = body.get(name)
            if isinstance(value, str) and value and not os.path.isabs(value):
                body[name] = os.path.join(base, value)
        command = body["exec"].get("command") if isinstance(body.get("exec"), dict) else None
        if isinstance(command, str) and "/" in command and not os.path.isabs(command):
            body["exec"]["command"] = os.path.join(base, command)


def _named_files(kubeconfig: dict[str, Any]) -> list[str]:
    """The files a kubeconfig's clusters and users name (the client reads them itself)."""
    return [
        body[name]
        for body in _bodies(kubeconfig)
        for name in _FILE_KEYS
        if isinstance(body.get(name), str) and body[name]
    ]
