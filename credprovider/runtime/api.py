"""The kubelet's credential provider wire API (``credentialprovider.kubelet.k8s.io``).

Stdlib only: this module is on every plugin's exec path.

The kubelet writes one ``CredentialProviderRequest`` to the plugin's stdin and decodes one
``CredentialProviderResponse`` from its stdout with a *strict* decoder: unknown fields, duplicate keys,
``null`` where a string is expected or a numeric ``cacheDuration`` make it discard the whole response.
:func:`encode_response` therefore writes exactly the fields the kubelet knows, in the order its own
encoder uses, and nothing else.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime import cjson
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.runtime.excerpt import quoted
from credprovider.runtime.goformat import DurationError, format_go_duration, parse_go_duration

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


class RequestError(CredproviderError, ValueError):
    """The bytes on stdin are not a CredentialProviderRequest this plugin can answer."""


class ResponseError(CredproviderError, ValueError):
    """A plugin's stdout that the kubelet would reject (its message says why, as the kubelet would)."""


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
    lambda key: RequestError(f"request JSON has a duplicate key {quoted(key)}")
)
_response_object = _unique_keys(
    lambda key: ResponseError(f'strict decoding error: json: duplicate field "{key}"')
)


def _has_control_or_space(text: str) -> bool:
    return any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def parse_request(data: bytes) -> CredentialProviderRequest:
    """Parse and validate the request bytes the kubelet wrote to stdin.

    Raises :class:`RequestError` with one sentence saying what is wrong.
    """
    obj = _request_json(data)
    api_version, version = _request_api_version(obj)
    kind = obj.get("kind")
    if kind != REQUEST_KIND:
        raise RequestError(f"request kind is {quoted(kind)}, expected {REQUEST_KIND!r}")
    image = _request_image(obj)
    if version != "v1":  # v1alpha1 and v1beta1 carry no service account
        return CredentialProviderRequest(api_version, image, "", {})
    token, annotations = _request_service_account(obj)
    return CredentialProviderRequest(api_version, image, token, annotations)


def _request_json(data: bytes) -> dict[str, Any]:
    """The request's bytes as one JSON object (UTF-8, unique keys, no NaN)."""
    if not data.strip():
        raise RequestError("stdin was empty: expected a CredentialProviderRequest JSON object")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"request is not valid UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):  # as the kubelet's decoder, refused; said in an operator's terms
        raise RequestError(
            "request starts with a byte-order mark (an editor's), which JSON does not allow: save "
            "it as UTF-8 without one"
        )
    try:
        obj = cjson.loads(
            text, object_pairs_hook=_request_object, parse_constant=cjson.reject_constant
        )
    except RequestError:
        raise
    except cjson.NotJson as exc:
        raise RequestError(f"request JSON contains {exc.constant}, which is not JSON") from None
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
        raise RequestError(f"request must be a JSON object, got a JSON {cjson.json_type(obj)}")
    return obj


def _request_api_version(obj: dict[str, Any]) -> tuple[str, str]:
    """The request's apiVersion, whole and its version part; one the kubelet speaks."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        raise RequestError(f"request has no apiVersion: expected one of {', '.join(API_VERSIONS)}")
    group, _, version = api_version.rpartition("/")
    if group != GROUP:
        raise RequestError(
            f"unsupported apiVersion {quoted(api_version)}: the group must be {GROUP}"
        )
    if version not in VERSIONS:
        raise RequestError(
            f"unsupported apiVersion {quoted(api_version)}: supported versions are {', '.join(VERSIONS)}"
        )
    return api_version, version


def _request_image(obj: dict[str, Any]) -> str:
    image = obj.get("image")
    if image is None:
        raise RequestError("request has no image field")
    if not isinstance(image, str):
        raise RequestError(
            f"request field image must be a string, got a JSON {cjson.json_type(image)}"
        )
    if not image:
        raise RequestError("image in plugin request was empty")
    if _has_control_or_space(image):
        raise RequestError(f"image {quoted(image)} contains whitespace or control characters")
    return image


def _request_service_account(obj: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A v1 request's service account token and annotations (both optional)."""
    token = obj.get("serviceAccountToken")
    if token is not None and not isinstance(token, str):
        raise RequestError("request field serviceAccountToken must be a string")
    annotations = obj.get("serviceAccountAnnotations")
    if annotations is not None and (
        not isinstance(annotations, dict)
        or not all(isinstance(v, str) for v in annotations.values())
    ):
        raise RequestError("request field serviceAccountAnnotations must be an object of strings")
    return token or "", dict(annotations or {})


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


_RESPONSE_FIELDS: Final = ("kind", "apiVersion", "cacheKeyType", "cacheDuration", "auth")


def parse_response(data: bytes, expected_api_version: str) -> CredentialProviderResponse:
    """Decode a plugin's stdout like the kubelet (strict): the first problem raises ResponseError.

    The messages follow the kubelet's: a GVK that cannot be read, an apiVersion other than the one
    configured, then strict decoding (unknown or duplicate fields, wrong types), then cacheKeyType.
    """
    obj = _response_json(data)
    api_version = obj.get("apiVersion")
    if api_version != expected_api_version:
        raise ResponseError(
            "apiVersion from credential plugin response did not match expected apiVersion:"
            f"{expected_api_version}, actual apiVersion:{api_version if api_version else ''}"
        )
    problems = [f'unknown field "{key}"' for key in obj if key not in _RESPONSE_FIELDS]
    if obj.get("kind") != RESPONSE_KIND:
        problems.append(f"kind is {obj.get('kind')!r}, expected {RESPONSE_KIND}")
    duration = _response_duration(obj.get("cacheDuration"), problems)
    auth = _response_auth(obj.get("auth"), problems)
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


def _response_json(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
        obj = cjson.loads(
            text, object_pairs_hook=_response_object, parse_constant=cjson.reject_constant
        )
    except ResponseError:
        raise
    except RecursionError:
        raise ResponseError("error reading GVK from response: nested too deeply") from None
    except ValueError as exc:  # not UTF-8, not JSON, NaN, or an integer of over 4300 digits
        raise ResponseError(f"error reading GVK from response: {exc}") from None
    if not isinstance(obj, dict):
        raise ResponseError("error reading GVK from response: the response is not a JSON object")
    return obj


def _response_duration(raw: object, problems: list[str]) -> int | None:
    """``cacheDuration`` in nanoseconds; what is wrong with it goes to ``problems``."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append('cacheDuration must be a duration string such as "1h0m0s"')
        return None
    try:
        return parse_go_duration(raw)
    except DurationError as exc:
        problems.append(f"cacheDuration: {exc}")
        return None


def _response_auth(raw: object, problems: list[str]) -> dict[str, AuthConfig]:
    """The ``auth`` map; what is wrong with an entry goes to ``problems``."""
    auth: dict[str, AuthConfig] = {}
    if raw is None:
        return auth
    if not isinstance(raw, dict):
        problems.append("auth must be an object")
        return auth
    for key, entry in raw.items():
        if not isinstance(entry, dict):
            problems.append(f"auth[{quoted(key)}] must be an object")
            continue
        extra = [f for f in entry if f not in ("username", "password")]
        if extra:
            problems.append(f'unknown field "auth[{key}].{extra[0]}"')
        user, password = entry.get("username", ""), entry.get("password", "")
        if not isinstance(user, str) or not isinstance(password, str):
            problems.append(f"auth[{quoted(key)}] username and password must be strings")
            continue
        auth[key] = AuthConfig(user, password)
    return auth
