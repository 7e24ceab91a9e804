"""Why an image pattern or a response's auth key misses an image: the first of the kubelet's
matching rules (credprovider/runtime/matching.py) that fails, with the fix where there is one, and
a provider's patterns nearest to an image. For ``explain``, ``match`` and doctor; never on a
plugin's exec path."""

from __future__ import annotations

from credprovider.runtime.matching import (
    go_parse_url,
    go_path_match,
    keyring_key,
    split_url_host,
    urls_match,
)


def explain_key_mismatch(auth_key: str, image: str) -> str | None:
    """Why the kubelet would not use ``auth_key`` for ``image`` (``None`` when it would)."""
    index_key = keyring_key(auth_key)
    if index_key is None:
        return "the kubelet cannot parse this key and ignores it"
    return explain_pattern_mismatch(index_key, image, "key")


def explain_pattern_mismatch(pattern: str, image: str, what: str = "pattern") -> str | None:
    """Why :func:`urls_match` is false for ``pattern`` and ``image`` (``None`` when it is true):
    the first rule of the kubelet's that fails, in its order, with the fix where there is one."""
    if urls_match(pattern, image):
        return None
    pattern_url = go_parse_url("https://" + pattern)
    image_url = go_parse_url("https://" + image)
    if pattern_url is None:
        return f"the kubelet cannot parse this {what} as a URL"
    if image_url is None:
        return "the image cannot be parsed as a URL"
    labels, port = split_url_host(pattern_url.host)
    image_labels, image_port = split_url_host(image_url.host)
    if port != image_port:
        reason = (
            f"port differs: {what} has {port or 'no port'}, image has {image_port or 'no port'} "
            "(ports must be equal)"
        )
        if image_port and len(labels) == len(image_labels):
            host = ".".join(labels)
            ported = f"{host}:{image_port}{pattern_url.path}"
            if urls_match(ported, image):
                reason += f": add {ported!r}"
        return reason
    if len(labels) != len(image_labels):
        return (
            f"host label count differs ({len(labels)} vs {len(image_labels)}): each '*' matches "
            "exactly one label"
        )
    if not image_url.path.startswith(pattern_url.path):
        return f"the image path does not start with the {what}'s path {pattern_url.path!r}"
    for position, (glob, label) in enumerate(zip(labels, image_labels, strict=True), 1):
        if not go_path_match(glob, label):
            case = (
                ": the kubelet compares host names case-sensitively, so write the host in lower case"
                if go_path_match(glob, label.lower())
                else ""
            )
            return f"host label {position} {label!r} does not match {glob!r}{case}"
    return f"a host label does not match the {what}'s pattern"


def _family_score(pattern: str, image: str) -> int:
    """How many host labels, from the right, ``pattern`` and ``image`` share (each label matched as
    a glob, case aside): how near the pattern is to being for the image's registry at all."""
    pattern_url = go_parse_url("https://" + pattern)
    image_url = go_parse_url("https://" + image)
    if pattern_url is None or image_url is None:
        return 0
    globs, _ = split_url_host(pattern_url.host)
    labels, _ = split_url_host(image_url.host)
    score = 0
    for glob, label in zip(reversed(globs), reversed(labels), strict=False):
        if not go_path_match(glob.lower(), label.lower()):
            break
        score += 1
    return score if score >= min(2, len(globs)) else 0


def closest_misses(patterns: list[str], image: str, limit: int = 3) -> list[tuple[str, str]]:
    """(pattern, why it misses) for the patterns nearest to matching ``image``, only those for the
    same host family (sharing at least the last two host labels, or all of a shorter pattern's):
    most labels shared first, then same port and label count, then config order. A provider whose
    patterns are all for other registries has none."""

    def rank(item: tuple[int, str, str]) -> tuple[int, int]:
        score, _, reason = item
        if reason.startswith("port differs"):
            return -score, 1
        return -score, 2 if reason.startswith(("host label count", "the kubelet cannot")) else 0

    near = [
        (score, pattern, reason)
        for pattern in patterns
        if (reason := explain_pattern_mismatch(pattern, image)) is not None
        and (score := _family_score(pattern, image))
    ]
    return [(pattern, reason) for _, pattern, reason in sorted(near, key=rank)[:limit]]
