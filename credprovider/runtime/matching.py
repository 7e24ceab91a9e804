"""The kubelet's image-matching rules: URLsMatch and the keyring. Stdlib only.

* :func:`urls_match` is the kubelet's ``URLsMatchStr(glob, target)`` (``pkg/credentialprovider``): both
  sides parsed like Go's ``url.Parse("https://" + s)``, ports string-equal, the same number of host
  labels, each label matched with Go's ``filepath.Match``, and the target path starting with the glob's
  path (a plain string prefix). It is used for ``matchImages`` and for response ``auth`` keys.
* :func:`keyring_lookup` is how the kubelet turns a response's ``auth`` map into credentials for an
  image (``BasicDockerKeyring.Add``/``Lookup``), including the ``index.docker.io`` fallback.
* image references themselves (``parse_image``) are credprovider/runtime/imageref.py's.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import Final, NamedTuple
from credprovider.runtime.goformat import go_quote
from credprovider.runtime.imageref import DEFAULT_REGISTRY, HEX_DIGITS, LEGACY_DEFAULT_REGISTRY

# Characters Go's url.Parse accepts literally in a host (besides alphanumerics and bytes >= 0x80).
_GO_HOST_EXTRA: Final = frozenset("-_.~!$&'()*+,;=:[]<>\"")
_GO_USERINFO_EXTRA: Final = frozenset("-._:~!$&'()*+,;=%@")
# The ASCII characters Go's host unescaping lets through as they are (the fast path of
# _go_unescape; anything else, non-ASCII included, takes the byte loop).
_HOST_CHARACTERS: Final = _GO_HOST_EXTRA | frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)


class ParsedURL(NamedTuple):
    """The parts of a Go-parsed schemeless URL that the kubelet's matching uses."""

    host: str  # url.URL.Host: host[:port], IPv6 in brackets
    path: str  # url.URL.Path: unescaped


class GoURLError(CredproviderError, ValueError):
    """Go's ``url.Parse`` would fail; the message is Go's (``parse "...": ...``)."""


def _go_unescape(text: str, host_mode: bool) -> str:
    if "%" not in text and (not host_mode or set(text) <= _HOST_CHARACTERS):
        return text  # nothing to unescape and nothing to refuse: what the loop below returns
    out = bytearray()
    raw = text.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x25:  # '%'
            escape = raw[i : i + 3].decode("utf-8", "replace")
            if (
                i + 2 >= len(raw)
                or chr(raw[i + 1]) not in HEX_DIGITS
                or chr(raw[i + 2]) not in HEX_DIGITS
            ):
                raise GoURLError(f"invalid URL escape {go_quote(escape)}")
            value = int(chr(raw[i + 1]) + chr(raw[i + 2]), 16)
            if host_mode and value < 0x80 and raw[i : i + 3] != b"%25":
                raise GoURLError(f"invalid URL escape {go_quote(escape)}")
            out.append(value)
            i += 3
            continue
        if host_mode and c < 0x80:
            ch = chr(c)
            if not (ch.isascii() and ch.isalnum()) and ch not in _GO_HOST_EXTRA:
                raise GoURLError(f"invalid character {go_quote(ch)} in host name")
        out.append(c)
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port.startswith(":") and all(c in "0123456789" for c in port[1:]))


def parse_go_url(url: str) -> ParsedURL:
    """Go's ``url.Parse`` reduced to what matching needs; raises :class:`GoURLError` like Go.

    ``url`` must carry a scheme (``https://...``), as the kubelet always adds one.
    """
    try:
        return _parse_go_url(url)
    except GoURLError as exc:
        raise GoURLError(f"parse {go_quote(url)}: {exc}") from None


def _parse_go_url(url: str) -> ParsedURL:
    if not url.isprintable() and any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise GoURLError("net/url: invalid control character in URL")
    url, _, fragment = url.partition("#")
    _go_unescape(fragment, host_mode=False)
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise GoURLError("missing protocol scheme")
    rest = rest.split("?", 1)[0]
    authority, slash, path = rest.partition("/")
    path = slash + path
    userinfo, at, host = authority.rpartition("@")
    if at and not all((c.isascii() and c.isalnum()) or c in _GO_USERINFO_EXTRA for c in userinfo):
        raise GoURLError("net/url: invalid userinfo")
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise GoURLError("missing ']' in host")
        if not _valid_optional_port(host[close + 1 :]):
            raise GoURLError(f"invalid port {go_quote(host[close + 1 :])} after host")
    elif ":" in host and not _valid_optional_port(host[host.rfind(":") :]):
        raise GoURLError(f"invalid port {go_quote(host[host.rfind(':') :])} after host")
    _go_unescape(host, host_mode=True)
    return ParsedURL(host=host, path=_go_unescape(path, host_mode=False))


def go_parse_url(url: str) -> ParsedURL | None:
    """:func:`parse_go_url`, with ``None`` where Go returns an error."""
    try:
        return parse_go_url(url)
    except GoURLError:
        return None


def go_split_host_port(hostport: str) -> tuple[str, str] | None:
    """Go's ``net.SplitHostPort``; ``None`` where Go returns an error."""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0 or not hostport[close + 1 :].startswith(":"):
            return None
        host, port = hostport[1:close], hostport[close + 2 :]
        if "[" in host or "]" in host or "[" in port or "]" in port or ":" in port:
            return None
        return host, port
    colon = hostport.rfind(":")
    if colon < 0:
        return None
    host, port = hostport[:colon], hostport[colon + 1 :]
    if ":" in host or "[" in hostport or "]" in hostport:
        return None
    return host, port


# --- Go filepath.Match -------------------------------------------------------------------------------


class _CharClass(NamedTuple):
    negate: bool
    ranges: tuple[tuple[str, str], ...]

    def matches(self, ch: str) -> bool:
        return any(lo <= ch <= hi for lo, hi in self.ranges) != self.negate


# A glob compiles to tokens: "*" (any run without "/"), "?" (one char but "/"), a literal
# one-character string wrapped as ("lit", c), or a character class.
_Token = tuple[str, str | _CharClass | None]


def _glob_escaped_char(pattern: str, i: int) -> tuple[str, int] | None:
    """Go's getEsc inside a character class."""
    if i >= len(pattern) or pattern[i] in "-]":
        return None
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            return None
    ch = pattern[i]
    i += 1
    if i >= len(pattern):
        return None
    return ch, i


def _compile_glob(pattern: str) -> list[_Token] | None:
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if not tokens or tokens[-1][0] != "star":  # "**" matches what "*" does
                tokens.append(("star", None))
            i += 1
        elif c == "?":
            tokens.append(("any", None))
            i += 1
        elif c == "\\":
            if i + 1 >= len(pattern):
                return None
            tokens.append(("lit", pattern[i + 1]))
            i += 2
        elif c == "[":
            i += 1
            negate = i < len(pattern) and pattern[i] == "^"
            if negate:
                i += 1
            ranges: list[tuple[str, str]] = []
            while True:
                if i < len(pattern) and pattern[i] == "]" and ranges:
                    i += 1
                    break
                low = _glob_escaped_char(pattern, i)
                if low is None:
                    return None
                lo, i = low
                hi = lo
                if pattern[i] == "-":
                    high = _glob_escaped_char(pattern, i + 1)
                    if high is None:
                        return None
                    hi, i = high
                ranges.append((lo, hi))
            tokens.append(("class", _CharClass(negate, tuple(ranges))))
        else:
            tokens.append(("lit", c))
            i += 1
    return tokens


def _match_tokens(tokens: list[_Token], name: str) -> bool:
    """Run the tokens as a set of positions over ``name`` (bit ``i``: "at token ``i``").

    ``*`` stays put on any character but ``/`` or steps past itself for free; every other token
    consumes one accepted character. Each character costs a few operations on ``len(tokens)``-bit
    integers, so matching is linear in the name whatever the pattern (a backtracking matcher takes
    exponential time on ``*a*a*a...b`` against ``aaaa...``).
    """
    stars = 0
    for index, (kind, _) in enumerate(tokens):
        if kind == "star":
            stars |= 1 << index
    consumers: dict[str, int] = {}  # per character: the tokens that accept it

    def consuming(ch: str) -> int:
        mask = consumers.get(ch)
        if mask is None:
            mask = 0
            for index, (kind, arg) in enumerate(tokens):
                if (
                    (kind == "lit" and ch == arg)
                    or (kind == "any" and ch != "/")
                    or (kind == "class" and isinstance(arg, _CharClass) and arg.matches(ch))
                ):
                    mask |= 1 << index
            consumers[ch] = mask
        return mask

    def closure(states: int) -> int:
        while True:
            grown = states | ((states & stars) << 1)
            if grown == states:
                return states
            states = grown

    states = closure(1)
    for ch in name:
        states = closure(((states & consuming(ch)) << 1) | (states & stars if ch != "/" else 0))
        if not states:
            return False
    return bool(states >> len(tokens) & 1)


def go_path_match(pattern: str, name: str) -> bool:
    """Go's ``filepath.Match`` on Unix; a malformed pattern never matches (the kubelet ignores it)."""
    tokens = _compile_glob(pattern)
    return tokens is not None and _match_tokens(tokens, name)


# --- kubelet URLsMatch / keyring ---------------------------------------------------------------------


def split_url_host(host: str) -> tuple[list[str], str]:
    split = go_split_host_port(host)
    name, port = split if split is not None else (host, "")
    return name.split("."), port


class UrlParts(NamedTuple):
    """A schemeless URL as ``URLsMatch`` compares it: host labels, port, path."""

    labels: list[str]
    port: str
    path: str


def url_parts(url: str) -> UrlParts | None:
    """``url`` (schemeless) parsed once, for :func:`parts_match`; ``None`` if Go would not parse
    it (which then matches nothing)."""
    parsed = go_parse_url("https://" + url)
    if parsed is None:
        return None
    labels, port = split_url_host(parsed.host)
    return UrlParts(labels, port, parsed.path)


def parts_match(glob: UrlParts, target: UrlParts) -> bool:
    """:func:`urls_match` on parsed URLs (a caller matching many pairs parses each once)."""
    if glob.port != target.port or len(glob.labels) != len(target.labels):
        return False
    if not target.path.startswith(glob.path):
        return False
    return all(go_path_match(g, t) for g, t in zip(glob.labels, target.labels, strict=True))


def urls_match(glob: str, target: str) -> bool:
    """The kubelet's ``URLsMatchStr(glob, target)`` for schemeless strings."""
    glob_parts, target_parts = url_parts(glob), url_parts(target)
    return (
        glob_parts is not None
        and target_parts is not None
        and parts_match(glob_parts, target_parts)
    )


def keyring_key(auth_key: str) -> str | None:
    """The index key the kubelet stores an ``auth`` entry under, or ``None`` if it drops the entry."""
    value = auth_key
    if not (value.startswith("https://") or value.startswith("http://")):
        value = "https://" + value
    parsed = go_parse_url(value)
    if parsed is None:
        return None
    path = parsed.path
    if path.startswith("/v2/") or path.startswith("/v1/"):
        path = path[3:]
    return parsed.host + path if path and path != "/" else parsed.host


def is_default_registry_image(image: str) -> bool:
    """The kubelet's ``isDefaultRegistryMatch``: does the image live on Docker Hub?"""
    first, sep, _ = image.partition("/")
    if not first:
        return False
    if not sep:
        return True
    if first in (DEFAULT_REGISTRY, LEGACY_DEFAULT_REGISTRY):
        return True
    return not any(c in first for c in ".:")


def keyring_lookup(auth_keys: list[str], image: str) -> list[str]:
    """The response keys whose credentials the kubelet would use for ``image``, in its order.

    Keys are indexed like ``BasicDockerKeyring.Add`` (scheme and ``/v1/``, ``/v2/`` stripped,
    invalid keys dropped), tried in reverse lexicographic order of their index key, and every matching
    key is returned; with none, the ``index.docker.io`` entry serves Docker Hub images.
    """
    indexed: dict[str, list[str]] = {}
    for key in auth_keys:
        index_key = keyring_key(key)
        if index_key is not None:
            indexed.setdefault(index_key, []).append(key)
    matched = [
        original
        for index_key in sorted(indexed, reverse=True)
        if urls_match(index_key, image)
        for original in indexed[index_key]
    ]
    if not matched and is_default_registry_image(image):
        matched = indexed.get(LEGACY_DEFAULT_REGISTRY, [])
    return matched
