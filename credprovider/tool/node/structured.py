"""JSON the tool reads from the node or a server (the kubelet's ``/pods``, ``crictl``'s listing,
the agent's state and ``--provider-settings``), decoded within bounds: a size, and the plugins'
nesting depth (``runtime.answer``: real documents nest a dozen levels; Python's decoder would
otherwise end deep input in a ``RecursionError``). Not on the exec path."""

from __future__ import annotations

import json
from typing import Any, Final

from credprovider.errors import CredproviderError
from credprovider.runtime.answer import MAX_JSON_DEPTH, nesting_depth
from credprovider.runtime.excerpt import byte_size

# A node's /pods with 250 pods is a few MiB.
MAX_JSON_BYTES: Final = 32 * 1024 * 1024


class JsonTooDeep(CredproviderError, ValueError):
    """The document is past a bound (nesting or size); the message says which."""


def bounded_json(data: bytes | str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """``data`` decoded as JSON; :class:`JsonTooDeep` past a bound, json's ``ValueError`` (a
    ``JSONDecodeError``, or ``UnicodeDecodeError``) for anything that is not JSON."""
    if len(data) > max_bytes:
        raise JsonTooDeep(f"is larger than {byte_size(max_bytes)}")
    try:
        value = json.loads(data)
    except RecursionError:
        value = None
    else:
        if nesting_depth(value) <= MAX_JSON_DEPTH:
            return value
    raise JsonTooDeep(f"is JSON nested more than {MAX_JSON_DEPTH} levels deep")
