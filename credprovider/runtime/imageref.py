"""Image references as the kubelet normalizes them before it calls a plugin (``nginx:1.25`` ->
``docker.io/library/nginx``), refusing what is not one: the docker/distribution grammar, checked by
hand (a cache hit parses the image, and ``re`` costs more than all its work). Stdlib only; on every
plugin's exec path. The kubelet's matching rules are credprovider/runtime/matching.py's.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import Final, NamedTuple
from credprovider.runtime.excerpt import QUOTE_LIMIT, clip, quoted

DEFAULT_REGISTRY: Final = "docker.io"
NAME_TOTAL_LENGTH_MAX: Final = 255  # docker/distribution reference.NameTotalLengthMax
LEGACY_DEFAULT_REGISTRY: Final = "index.docker.io"


class ImageError(CredproviderError, ValueError):
    """The string is not an image reference the kubelet would pass to a plugin."""


# --- image references --------------------------------------------------------------------------------

# Image reference grammar (docker/distribution), as the regexes it is written in.
_DOMAIN_LABEL_PATTERN: Final = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_PATH_COMPONENT_PATTERN: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG_PATTERN: Final = r"[\w][\w.-]{0,127}"
_DIGEST_PATTERN: Final = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"


# The grammar above, checked by hand: a cache hit parses the image, and importing re (with enum,
# functools and collections) would cost it more than all its work. tests/unit/runtime/test_matching.py
# checks every checker against its pattern.
_LOWER_ALNUM: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_ALNUM: Final = _LOWER_ALNUM | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WORD: Final = _ALNUM | {"_"}
_LETTERS: Final = _ALNUM - frozenset("0123456789")
HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def is_domain_label(text: str) -> bool:
    """``_DOMAIN_LABEL_PATTERN``: letters, digits and inner hyphens."""
    return (
        bool(text)
        and text[0] in _ALNUM
        and text[-1] in _ALNUM
        and all(c in _ALNUM or c == "-" for c in text)
    )


def is_tag(text: str) -> bool:
    """``_TAG_PATTERN``: a word character, then up to 127 word characters, dots and hyphens."""
    return 0 < len(text) <= 128 and text[0] in _WORD and all(c in _WORD or c in ".-" for c in text)


def is_path_component(text: str) -> bool:
    """``_PATH_COMPONENT_PATTERN``: runs of lowercase letters and digits, joined by one '.', one
    or two '_', or any number of '-'."""
    i, size = 0, len(text)
    while True:
        start = i
        while i < size and text[i] in _LOWER_ALNUM:
            i += 1
        if i == start:
            return False
        if i == size:
            return True
        if text[i] == ".":
            i += 1
        elif text[i] == "_":
            i += 2 if text[i + 1 : i + 2] == "_" else 1
        elif text[i] == "-":
            while i < size and text[i] == "-":
                i += 1
        else:
            return False


def is_digest(text: str) -> bool:
    """``_DIGEST_PATTERN``: an algorithm (letter-led alphanumeric parts joined by - _ + .), a colon,
    and at least 32 hex digits."""
    algorithm, colon, encoded = text.rpartition(":")
    if not colon or len(encoded) < 32 or not all(c in HEX_DIGITS for c in encoded):
        return False
    part: list[str] = []
    for c in algorithm + "-":
        if c in "-_+.":
            if not part or part[0] not in _LETTERS:
                return False
            part = []
        elif c in _ALNUM:
            part.append(c)
        else:
            return False
    return True


class ImageRef(NamedTuple):
    """A normalized image reference: ``registry/repository`` without tag or digest."""

    registry: str  # host[:port], exactly as in the reference
    host: str  # without port; IPv6 without brackets
    port: str  # "" when absent
    repository: str

    @property
    def name(self) -> str:
        """What the kubelet passes to plugins: ``registry/repository``."""
        return f"{self.registry}/{self.repository}"


def _parse_registry(domain: str) -> tuple[str, str]:
    if domain.startswith("["):
        close = domain.find("]")
        if close < 0:
            raise ImageError(f"registry {quoted(domain)} has an unclosed IPv6 bracket")
        host, rest = domain[1:close], domain[close + 1 :]
        if not host or not all(c in HEX_DIGITS or c in ":." for c in host) or ":" not in host:
            raise ImageError(f"registry {quoted(domain)} is not a valid IPv6 literal")
        port = rest[1:] if rest.startswith(":") else None
        if rest and port is None:
            raise ImageError(f"registry {quoted(domain)} has junk after the IPv6 literal")
    else:
        host, colon, port_text = domain.partition(":")
        port = port_text if colon else None
        if not all(is_domain_label(label) for label in host.split(".")):
            raise ImageError(f"registry host {quoted(host)} is not a valid host name")
    if port is not None:
        if not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) <= 65535):
            raise ImageError(f"registry port {quoted(port)} is not a number from 1 to 65535")
        return host, port
    return host, ""


def bare_registry_host(reference: str) -> str | None:
    """The host when ``reference`` is only a registry host (``123456789012.dkr.ecr.us-east-1.
    amazonaws.com``, ``myreg.azurecr.io:443``): no ``/``, and dotted like a host name. The kubelet
    matches such an image by its host, while as a reference it would be a Docker Hub name; a plugin
    should ask for the repository rather than answer for ``docker.io``."""
    if "/" in reference or "@" in reference or "." not in reference:
        return None
    host, _, port = reference.partition(":")
    if port and not (port.isdigit() and port.isascii()):
        return None  # name:tag, not host:port
    labels = host.split(".")
    if len(labels) < 2 or not all(
        label and label.isascii() and label.replace("-", "").isalnum() for label in labels
    ):
        return None
    return reference.lower()


def bare_host_hint(reference: str) -> str | None:
    """The one sentence every command and plugin gives for an image that is only a registry host
    (``None`` for anything else)."""
    host = bare_registry_host(reference)
    if host is None:
        return None
    return (
        f"{quoted(reference)} names only a registry host, no repository (as an image, the kubelet would "
        f"pull docker.io/library/{clip(reference, QUOTE_LIMIT)} from Docker Hub): did you mean "
        f"{clip(host, QUOTE_LIMIT)}/<repository>?"
    )


def kubelet_image(reference: str) -> str:
    """The image string the kubelet passes to plugins and matches against ``matchImages`` for what
    an operator writes in a pod, or :class:`ImageError` with the one hint everything gives (a bare
    registry host included: it is always a mistake)."""
    hint = bare_host_hint(reference)
    if hint is not None:
        raise ImageError(hint)
    return parse_image(reference).name


def parse_image(reference: str) -> ImageRef:
    """Normalize an image reference like the kubelet (docker's ``ParseNormalizedNamed().Name()``).

    ``nginx:1.25`` → ``docker.io/library/nginx``; ``host:5000/app@sha256:...`` → ``host:5000/app``.
    Raises :class:`ImageError` for anything that is not a reference (schemes, spaces, non-ASCII, ...).
    """
    if not reference:
        raise ImageError("the image reference is empty")
    if "://" in reference:
        raise ImageError(
            f"{quoted(reference)} has a URL scheme: an image reference is host[:port]/path[:tag]"
        )
    if not reference.isascii() or any(
        c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in reference
    ):
        raise ImageError(
            f"{quoted(reference)} contains non-ASCII, whitespace or control characters"
        )
    name, at, digest = reference.partition("@")
    if at and not is_digest(digest):
        raise ImageError(f"{quoted(reference)} has an invalid digest after '@'")
    first, sep, remainder = name.partition("/")
    if sep and (
        any(c in first for c in ".:")
        or first == "localhost"
        or first.startswith("[")
        or first != first.lower()
    ):
        domain, path = first, remainder
    else:
        domain, path = DEFAULT_REGISTRY, name
    last_slash = path.rfind("/")
    colon = path.rfind(":")
    if colon > last_slash:
        tag = path[colon + 1 :]
        if not is_tag(tag):
            raise ImageError(f"{quoted(reference)} has an invalid tag {quoted(tag)}")
        path = path[:colon]
    if domain == LEGACY_DEFAULT_REGISTRY:
        domain = DEFAULT_REGISTRY
    if domain == DEFAULT_REGISTRY and "/" not in path:
        path = f"library/{path}"
    components = path.split("/")
    for component in components:
        if not is_path_component(component):
            raise ImageError(
                f"{quoted(reference)}: repository path component {quoted(component)} is invalid "
                "(lowercase letters, digits and . _ - separators only)"
            )
    host, port = _parse_registry(domain)
    ref = ImageRef(registry=domain, host=host, port=port, repository=path)
    if len(ref.name) > NAME_TOTAL_LENGTH_MAX:
        raise ImageError(
            f"repository name must not be more than {NAME_TOTAL_LENGTH_MAX} characters"
        )
    return ref


def registry_of(image: str) -> str:
    """The kubelet's ``parseRegistry``: everything before the first ``/`` (port kept)."""
    return image.split("/", 1)[0]
