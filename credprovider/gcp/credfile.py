"""GOOGLE_APPLICATION_CREDENTIALS for google-auth: the file read once, by the plugin, as every node
file on the exec path is (runtime/nodefile.py: a regular file, at most its cap), and google-auth
given what was read, never the path. google-auth's own loader opens the path again, whole and
unbounded, and could find another file there than the one checked.

Every failure is a ``ValueError`` holding one sentence about the file (the caller names the
setting): google-auth's errors reworded where they name the source as the dict they were given,
and its loader's stray ``AttributeError``\\ s on a malformed file (``{"type":
"impersonated_service_account"}`` alone) said as the file's fault, not an internal error.
"""

from __future__ import annotations

from credprovider.gcp.registry import CLOUD_PLATFORM_SCOPE
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

# The types google-auth loads (google/auth/_default.py ``_VALID_TYPES``, google-auth 2.63).
KNOWN_TYPES: Final = (
    "service_account",
    "authorized_user",
    "external_account",
    "external_account_authorized_user",
    "impersonated_service_account",
    "gdch_service_account",
)
# How google-auth's loader names a source it was given as a dict (``load_credentials_from_dict``
# passes this string where ``load_credentials_from_file`` passes the path).
_DICT_SOURCE: Final = "dict object"


def load_credentials_file(path: str, remaining: Callable[[], float]) -> Any:
    """Credentials from a google-auth JSON file, without any call beyond the token itself.

    ``google.auth.load_credentials_from_file`` also resolves the project of an external-account
    config with a Cloud Resource Manager call, which an image pull does not need, so that type is
    built directly; every other type goes through google-auth's loader, given the parsed file.
    ``OSError`` (a file that cannot be read, as runtime/nodefile.py says it) passes through.
    ``remaining`` is the time an executable source's helper may take (the fetch's time left).
    """
    from google.auth import exceptions

    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.nodefile import read_node_text

    try:
        info = decode_json(read_node_text(path))
    except BadAnswer as exc:
        raise ValueError(f"the file {exc.predicate}") from None
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    except ValueError:
        raise ValueError("the file is not JSON") from None
    if not isinstance(info, dict):
        raise ValueError("the file holds no JSON object")
    kind = info.get("type")
    if kind not in KNOWN_TYPES:
        raise ValueError(
            f"the file's type is {_shown(kind)}, none google-auth loads "
            f"(one of {', '.join(KNOWN_TYPES)})"
        )
    if kind == "gdch_service_account":
        _require_ca_cert(info.get("ca_cert_path"))
    try:
        if kind == "external_account":
            return _external_account(info, remaining)
        return _by_google_auth(info)
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ValueError(_said(exc)) from None
    except (AttributeError, TypeError, KeyError) as exc:
        field = f" (the field {exc.args[0]!r})" if isinstance(exc, KeyError) and exc.args else ""
        raise ValueError(
            f"the file is not {kind} credentials google-auth can load: a field is missing or "
            f"holds the wrong kind of value{field}"
        ) from None


def _require_ca_cert(path: object) -> None:
    """A GDCH service account's ``ca_cert_path``, which google-auth hands requests to verify its
    token server with (OpenSSL then opened a FIFO there blocking, and read any size): a CA bundle
    or directory the plugin could use itself (runtime/tls.py's one rule)."""
    from credprovider.runtime.nodefile import reason
    from credprovider.runtime.tls import require_ca_location

    if not isinstance(path, str) or not path:
        return
    try:
        require_ca_location(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"the file's ca_cert_path {path} cannot be used: {reason(exc)}") from None


def _by_google_auth(info: dict[str, Any]) -> Any:
    """``info`` through google-auth's loader for its type. Its "generic load method"
    ``DeprecationWarning`` (as ``load_credentials_from_file``'s) is about configurations from an
    untrusted source, and Python's default filters keep it off stderr."""
    import google.auth

    credentials, _ = google.auth.load_credentials_from_dict(info, scopes=[CLOUD_PLATFORM_SCOPE])
    return credentials


def _external_account(info: dict[str, Any], remaining: Callable[[], float]) -> Any:
    """A Workload Identity Federation config, built by its own class (no project lookup), with
    the plugin's subject token sources where google-auth's would read or run (gcp/sources.py)."""
    from credprovider.gcp.sources import (
        bounded_certificate,
        bounded_executable,
        bounded_file_supplier,
    )

    source = info.get("credential_source")
    source = source if isinstance(source, dict) else {}
    if str(source.get("environment_id", "")).startswith("aws"):
        from google.auth import aws

        return aws.Credentials.from_info(info, scopes=[CLOUD_PLATFORM_SCOPE])
    if "executable" in source:
        return bounded_executable().from_info(
            info, scopes=[CLOUD_PLATFORM_SCOPE], remaining=remaining
        )
    if "certificate" in source:
        return bounded_certificate().from_info(info, scopes=[CLOUD_PLATFORM_SCOPE])
    from google.auth import identity_pool

    if "file" in source:  # read by the plugin, bounded (gcp/sources.py)
        rest = {key: value for key, value in info.items() if key != "credential_source"}
        return identity_pool.Credentials.from_info(
            rest,
            scopes=[CLOUD_PLATFORM_SCOPE],
            subject_token_supplier=bounded_file_supplier(source),
        )
    return identity_pool.Credentials.from_info(info, scopes=[CLOUD_PLATFORM_SCOPE])


def _said(exc: BaseException) -> str:
    """google-auth's error as one sentence: a ``DefaultCredentialsError`` carries its message and
    the error under it as two arguments (printed as a tuple), and names a dict source
    :data:`_DICT_SOURCE`, here the file."""
    parts = [str(arg) for arg in exc.args if isinstance(arg, str | BaseException) and str(arg)]
    text = ": ".join(parts) or type(exc).__name__
    return text.replace(f"from {_DICT_SOURCE}", "from the file").replace(_DICT_SOURCE, "the file")


def _shown(kind: object) -> str:
    if kind is None:
        return "missing"
    text = repr(kind) if isinstance(kind, str) else type(kind).__name__
    return text if len(text) <= 64 else f"{text[:60]}…"
