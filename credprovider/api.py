"""The kubelet's credential provider wire API (``credentialprovider.kubelet.k8s.io``).

Stdlib only: this module is on every plugin's exec path.

The kubelet writes one ``CredentialProviderRequest`` to the plugin's stdin and decodes one
``CredentialProviderResponse`` from its stdout with a *strict* decoder: unknown fields, duplicate keys,
``null`` where a string is expected or a numeric ``cacheDuration`` make it discard the whole response.
:func:`encode_response` therefore writes exactly the fields the kubelet knows, in the order its own
encoder uses, and nothing else.
"""

from __future__ import annotations

from credprovider import cjson
from credprovider._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.errors import CredproviderError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import MappingProxyType
else:
    MappingProxyType = type(type.__dict__)  # types.MappingProxyType, without importing types

GROUP: Final = "credentialprovider.kubelet.k8s.io"
VERSIONS: Final = ("v1", "v1beta1", "v1alpha1")
API_VERSIONS: Final = tuple(f"{GROUP}/{v}" for v in VERSIONS)
API_V1: Final = f"{GROUP}/v1"
REQUEST_KIND: Final = "CredentialProviderRequest"
RESPONSE_KIND: Final = "CredentialProviderResponse"

CACHE_KEY_IMAGE: Final = "Image"
CACHE_KEY_REGISTRY: Final = "Registry"
CACHE_KEY_GLOBAL: Final = "Global"
CACHE_KEY_TYPES: Final = (CACHE_KEY_IMAGE, CACHE_KEY_REGISTRY, CACHE_KEY_GLOBAL)

NANOSECOND: Final = 1
MICROSECOND: Final = 1000 * NANOSECOND
MILLISECOND: Final = 1000 * MICROSECOND
SECOND: Final = 1000 * MILLISECOND
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE

_MAX_INT64: Final = (1 << 63) - 1


class RequestError(CredproviderError, ValueError):
    """The bytes on stdin are not a CredentialProviderRequest this plugin can answer."""


class ResponseError(CredproviderError, ValueError):
    """A plugin's stdout that the kubelet would reject (its message says why, as the kubelet would)."""


class DurationError(CredproviderError, ValueError):
    """A string is not a Go duration (``time.ParseDuration`` would reject it)."""


class CredentialProviderRequest(NamedTuple):
    """One request from the kubelet. Service-account fields are only read for ``v1``."""

    api_version: str
    image: str
    service_account_token: str = ""
    service_account_annotations: Mapping[str, str] = MappingProxyType({})


class AuthConfig(NamedTuple):
    """One credential pair for a registry key (v1 ``AuthConfig`` has exactly these two fields)."""

    username: str
    password: str


class CredentialProviderResponse(NamedTuple):
    """A response; ``cache_duration`` is in nanoseconds, ``None`` to omit it (kubelet default applies)."""

    api_version: str
    cache_key_type: str
    cache_duration: int | None = None
    auth: Mapping[str, AuthConfig] = MappingProxyType({})


def _unique_keys(
    duplicate: Callable[[str], Exception],
) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A ``json.loads`` object hook that raises ``duplicate(key)`` for a key seen twice."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise duplicate(key)
            result[key] = value
        return result

    return hook


_request_object = _unique_keys(
    lambda key: RequestError(f"request JSON has a duplicate key {key!r}")
)
_response_object = _unique_keys(
    lambda key: ResponseError(f'strict decoding error: json: duplicate field "{key}"')
)


def _reject_constant(name: str) -> Any:
    raise RequestError(f"request JSON contains {name}, which is not JSON")


def _has_control_or_space(text: str) -> bool:
    return any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def parse_request(data: bytes) -> CredentialProviderRequest:
    """Parse and validate the request bytes the kubelet wrote to stdin.

    Raises :class:`RequestError` with one sentence saying what is wrong.
    """
    if not data.strip():
        raise RequestError("stdin was empty: expected a CredentialProviderRequest JSON object")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"request is not valid UTF-8 (byte {exc.start})") from None
    try:
        obj = cjson.loads(text, object_pairs_hook=_request_object, parse_constant=_reject_constant)
    except RequestError:
        raise
    except RecursionError:
        raise RequestError("request JSON is nested too deeply") from None
    except ValueError as exc:
        import json  # only a request that is not JSON gets here

        if isinstance(exc, json.JSONDecodeError):
            raise RequestError(
                f"request is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        # an integer of more digits than Python converts (4300)
        raise RequestError(
            "request is not usable JSON: it holds a number of over 4300 digits"
        ) from None
    if not isinstance(obj, dict):
        raise RequestError(f"request must be a JSON object, got a JSON {_json_type(obj)}")
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        raise RequestError(f"request has no apiVersion: expected one of {', '.join(API_VERSIONS)}")
    group, _, version = api_version.rpartition("/")
    if group != GROUP:
        raise RequestError(f"unsupported apiVersion {api_version!r}: the group must be {GROUP}")
    if version not in VERSIONS:
        raise RequestError(
            f"unsupported apiVersion {api_version!r}: supported versions are {', '.join(VERSIONS)}"
        )
    kind = obj.get("kind")
    if kind != REQUEST_KIND:
        raise RequestError(f"request kind is {kind!r}, expected {REQUEST_KIND!r}")
    image = obj.get("image")
    if image is None:
        raise RequestError("request has no image field")
    if not isinstance(image, str):
        raise RequestError(f"request field image must be a string, got a JSON {_json_type(image)}")
    if not image:
        raise RequestError("image in plugin request was empty")
    if _has_control_or_space(image):
        raise RequestError(f"image {image!r} contains whitespace or control characters")
    token = ""
    annotations: dict[str, str] = {}
    if version == "v1":
        raw_token = obj.get("serviceAccountToken")
        if raw_token is not None:
            if not isinstance(raw_token, str):
                raise RequestError("request field serviceAccountToken must be a string")
            token = raw_token
        raw_annotations = obj.get("serviceAccountAnnotations")
        if raw_annotations is not None:
            if not isinstance(raw_annotations, dict) or not all(
                isinstance(v, str) for v in raw_annotations.values()
            ):
                raise RequestError(
                    "request field serviceAccountAnnotations must be an object of strings"
                )
            annotations = dict(raw_annotations)
    return CredentialProviderRequest(api_version, image, token, annotations)


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return "object"


def encode_request(
    image: str,
    api_version: str = API_V1,
    token: str = "",
    annotations: Mapping[str, str] | None = None,
) -> bytes:
    """A request exactly as the kubelet writes it (compact, this key order, one trailing newline)."""
    body: dict[str, object] = {"kind": REQUEST_KIND, "apiVersion": api_version, "image": image}
    if token:
        body["serviceAccountToken"] = token
    if annotations:
        body["serviceAccountAnnotations"] = dict(annotations)
    return (cjson.dumps(body) + "\n").encode()


def encode_response(response: CredentialProviderResponse) -> bytes:
    """Encode a response exactly as the kubelet's strict decoder accepts it.

    Compact JSON, key order ``kind, apiVersion, cacheKeyType, cacheDuration, auth``, ``auth`` keys
    sorted (as Go's map encoder does), ``cacheDuration``/``auth`` omitted when unset or empty, one
    trailing newline.
    """
    if response.api_version not in API_VERSIONS:
        raise ValueError(f"cannot answer with apiVersion {response.api_version!r}")
    if response.cache_key_type not in CACHE_KEY_TYPES:
        raise ValueError(f"invalid cacheKeyType {response.cache_key_type!r}")
    body: dict[str, object] = {
        "kind": RESPONSE_KIND,
        "apiVersion": response.api_version,
        "cacheKeyType": response.cache_key_type,
    }
    if response.cache_duration is not None:
        body["cacheDuration"] = format_go_duration(response.cache_duration)
    if response.auth:
        body["auth"] = {
            key: {"username": entry.username, "password": entry.password}
            for key, entry in sorted(response.auth.items())
        }
    return (cjson.dumps(body) + "\n").encode("ascii")


def _fmt_frac(value: int, precision: int) -> tuple[str, int]:
    """Go's fmtFrac: the fraction of ``value / 10**precision`` without trailing zeros."""
    digits = []
    printed = False
    for _ in range(precision):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits.append(str(digit))
        value //= 10
    frac = "." + "".join(reversed(digits)) if printed else ""
    return frac, value


def format_go_duration(nanoseconds: int) -> str:
    """Format like Go's ``time.Duration.String()``: ``6h0m0s``, ``59m59s``, ``1.5s``, ``0s``."""
    if not -(1 << 63) <= nanoseconds <= _MAX_INT64:
        raise ValueError("duration out of int64 range")
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < SECOND:
        if u < MICROSECOND:
            return f"{sign}{u}ns"
        precision, unit = (3, "µs") if u < MILLISECOND else (6, "ms")
        frac, whole = _fmt_frac(u, precision)
        return f"{sign}{whole}{frac}{unit}"
    frac, u = _fmt_frac(u, 9)
    text = f"{u % 60}{frac}s"
    u //= 60
    if u > 0:
        text = f"{u % 60}m{text}"
        u //= 60
        if u > 0:
            text = f"{u}h{text}"
    return sign + text


_UNITS: Final = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "µs": MICROSECOND,  # U+00B5 micro sign
    "μs": MICROSECOND,  # U+03BC Greek mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}


_GO_NAMED_ESCAPES: Final = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
}  # fmt: skip


def go_escape(ch: str) -> str:
    """One character as Go's ``strconv.Quote`` writes it: itself if printable, else an escape."""
    if ch in ('"', "\\"):
        return "\\" + ch
    if ch.isprintable():
        return ch
    named = _GO_NAMED_ESCAPES.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x80:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape): Go writes the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def go_quote(text: str) -> str:
    """Quote like Go's ``%q``: quotes and backslashes escaped, every non-printable character too
    (controls, C1, bidi overrides, ... as ``\\x``, ``\\u`` or ``\\U`` escapes)."""
    return '"' + "".join(map(go_escape, text)) + '"'


def parse_go_duration(text: str) -> int:
    """Parse a duration like Go's ``time.ParseDuration`` and return nanoseconds.

    Errors carry Go's messages (``time: invalid duration "5"``, ``time: unknown unit ...``).
    """
    original = text
    quoted = go_quote(original)
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise DurationError(f"time: invalid duration {quoted}")
    total = 0
    while text:
        if not (text[0] == "." or "0" <= text[0] <= "9"):
            raise DurationError(f"time: invalid duration {quoted}")
        i = 0
        while i < len(text) and "0" <= text[i] <= "9":
            i += 1
        whole_digits, text = text[:i], text[i:]
        whole = int(whole_digits) if whole_digits else 0
        if whole > _MAX_INT64 + 1:
            raise DurationError(f"time: invalid duration {quoted}")
        frac, scale, has_frac = 0, 1.0, False
        if text.startswith("."):
            text = text[1:]
            j = 0
            overflow = False
            while j < len(text) and "0" <= text[j] <= "9":
                if not overflow:
                    if frac > (_MAX_INT64 - 9) // 10:
                        overflow = True  # Go stops adding precision here
                    else:
                        frac = frac * 10 + int(text[j])
                        scale *= 10
                j += 1
            has_frac = j > 0
            text = text[j:]
        if not whole_digits and not has_frac:
            raise DurationError(f"time: invalid duration {quoted}")
        k = 0
        while k < len(text) and not (text[k] == "." or "0" <= text[k] <= "9"):
            k += 1
        if k == 0:
            raise DurationError(f"time: missing unit in duration {quoted}")
        unit_name, text = text[:k], text[k:]
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise DurationError(f"time: unknown unit {go_quote(unit_name)} in duration {quoted}")
        if whole > (1 << 63) // unit:
            raise DurationError(f"time: invalid duration {quoted}")
        value = whole * unit
        if frac > 0:
            value += int(float(frac) * (float(unit) / scale))
            if value > 1 << 63:
                raise DurationError(f"time: invalid duration {quoted}")
        total += value
        if total > 1 << 63:
            raise DurationError(f"time: invalid duration {quoted}")
    if negative:
        return -total
    if total > _MAX_INT64:
        raise DurationError(f"time: invalid duration {quoted}")
    return total


_RESPONSE_FIELDS: Final = ("kind", "apiVersion", "cacheKeyType", "cacheDuration", "auth")


def parse_response(data: bytes, expected_api_version: str) -> CredentialProviderResponse:
    """Decode a plugin's stdout like the kubelet (strict): the first problem raises ResponseError.

    The messages follow the kubelet's: a GVK that cannot be read, an apiVersion other than the one
    configured, then strict decoding (unknown or duplicate fields, wrong types), then cacheKeyType.
    """
    try:
        text = data.decode("utf-8")
        obj = cjson.loads(text, object_pairs_hook=_response_object, parse_constant=_reject_constant)
    except ResponseError:
        raise
    except RecursionError:
        raise ResponseError("error reading GVK from response: nested too deeply") from None
    except ValueError as exc:  # not UTF-8, not JSON, NaN, or an integer of over 4300 digits
        raise ResponseError(f"error reading GVK from response: {exc}") from None
    if not isinstance(obj, dict):
        raise ResponseError("error reading GVK from response: the response is not a JSON object")
    api_version = obj.get("apiVersion")
    if api_version != expected_api_version:
        raise ResponseError(
            "apiVersion from credential plugin response did not match expected apiVersion:"
            f"{expected_api_version}, actual apiVersion:{api_version if api_version else ''}"
        )
    problems: list[str] = []
    for key in obj:
        if key not in _RESPONSE_FIELDS:
            problems.append(f'unknown field "{key}"')
    if obj.get("kind") != RESPONSE_KIND:
        problems.append(f"kind is {obj.get('kind')!r}, expected {RESPONSE_KIND}")
    duration: int | None = None
    raw_duration = obj.get("cacheDuration")
    if raw_duration is not None:
        if not isinstance(raw_duration, str):
            problems.append('cacheDuration must be a duration string such as "1h0m0s"')
        else:
            try:
                duration = parse_go_duration(raw_duration)
            except DurationError as exc:
                problems.append(f"cacheDuration: {exc}")
    auth: dict[str, AuthConfig] = {}
    raw_auth = obj.get("auth")
    if raw_auth is not None:
        if not isinstance(raw_auth, dict):
            problems.append("auth must be an object")
        else:
            for key, entry in raw_auth.items():
                if not isinstance(entry, dict):
                    problems.append(f"auth[{key!r}] must be an object")
                    continue
                extra = [f for f in entry if f not in ("username", "password")]
                if extra:
                    problems.append(f'unknown field "auth[{key}].{extra[0]}"')
                user, password = entry.get("username", ""), entry.get("password", "")
                if not isinstance(user, str) or not isinstance(password, str):
                    problems.append(f"auth[{key!r}] username and password must be strings")
                    continue
                auth[key] = AuthConfig(user, password)
    cache_key_type = obj.get("cacheKeyType")
    if not isinstance(cache_key_type, str) and cache_key_type is not None:
        problems.append("cacheKeyType must be a string")
    if problems:
        raise ResponseError(
            "error decoding credential provider plugin response from stdout: " + "; ".join(problems)
        )
    if cache_key_type not in CACHE_KEY_TYPES:
        raise ResponseError(
            f"credential provider plugin did not return a valid cacheKeyType: {cache_key_type or ''!r}"
        )
    return CredentialProviderResponse(str(api_version), str(cache_key_type), duration, auth)
