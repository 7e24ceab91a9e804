"""Pulling as another service account: ``--impersonate-service-account=[DELEGATE,…]TARGET`` (gcloud's
form: the last email is the account pulled as, any before it the delegation chain from the source),
exchanged at the IAM Credentials API's ``generateAccessToken``.

Parsing the flag and wording each failure are pure; :func:`impersonate` is the call, made with
google-auth's own impersonated credentials (:func:`credprovider.gcp.googleauth.impersonate`).
"""

from __future__ import annotations

from credprovider.errors import CredproviderError, ProviderError, UsageError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Sequence

IMPERSONATE_FLAG: Final = "--impersonate-service-account"
IAM_CREDENTIALS_HOST: Final = "iamcredentials.googleapis.com"
IAM_CREDENTIALS_API: Final = f"https://{IAM_CREDENTIALS_HOST}"
DELEGATE_PREFIX: Final = (
    "projects/-/serviceAccounts/"  # the form the API requires ('-', no project)
)
TOKEN_CREATOR_ROLE: Final = "roles/iam.serviceAccountTokenCreator"
# generateAccessToken's default and, without the org policy that allows 12 h, its maximum.
LIFETIME_SECONDS: Final = 3600
_NUMERIC_ID_MAX: Final = 21  # a service account's unique id is a 21-digit number


class Refused(CredproviderError):
    """The IAM Credentials API said no: worded by :func:`failure` once the source is named."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class Chain(NamedTuple):
    """Who a pull impersonates: ``target``, reached through ``delegates`` in order."""

    target: str
    delegates: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ",".join((*self.delegates, self.target))

    def onward(self) -> str:
        """``delegate → … → target``: what the source's identity turns into."""
        return " → ".join((*self.delegates, self.target))

    def path(self, source: str) -> str:
        return f"{source} → {self.onward()}"


def parse_chain(value: str) -> Chain:
    """``a@p.iam.gserviceaccount.com`` or ``d1@…,d2@…,target@…`` (the last is the target).

    Raises :class:`UsageError` for an empty entry, a space, or something that is neither an email
    nor a service account's numeric unique id.
    """
    entries = value.split(",")
    for entry in entries:
        if not entry:
            raise UsageError(
                f"{IMPERSONATE_FLAG} {value!r} has an empty entry: give one or more service "
                "account emails separated by commas, the account to pull as last"
            )
        local, at, domain = entry.partition("@")
        email = bool(at and local and "." in domain)
        unique_id = entry.isascii() and entry.isdigit() and len(entry) <= _NUMERIC_ID_MAX
        if not (email or unique_id) or any(c.isspace() or c in "/:@" for c in local + domain):
            raise UsageError(
                f"{IMPERSONATE_FLAG}: {entry!r} is not a service account email "
                "(name@project.iam.gserviceaccount.com) or unique id"
            )
    return Chain(entries[-1], tuple(entries[:-1]))


def chain_in_args(args: Sequence[str]) -> Chain | None:
    """The chain a provider's ``args`` name (``--flag=v`` or ``--flag v``), or ``None``: for the
    tool, which reads a config's args without building the plugin. Raises :class:`UsageError`."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{IMPERSONATE_FLAG}="):
            return parse_chain(arg.partition("=")[2])
        if arg == IMPERSONATE_FLAG and i + 1 < len(args):
            return parse_chain(args[i + 1])
    return None


def _google_error(body: str) -> tuple[int | None, str, str, str, dict[str, str]]:
    """(code, status, message, reason, ErrorInfo metadata) of a Google API error body; blanks for
    a body that is not one (a proxy's page)."""
    from credprovider.runtime.answer import BadAnswer, decode_json

    try:
        document = decode_json(body)
    except (BadAnswer, ValueError):
        return None, "", "", "", {}
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return None, "", "", "", {}
    code = error.get("code")
    reason, metadata = "", {}
    for detail in error.get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("ErrorInfo"):
            reason = str(detail.get("reason", ""))
            found = detail.get("metadata")
            metadata = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        str(error.get("status", "")),
        str(error.get("message", "")),
        reason,
        metadata,
    )


def failure(status: int, body: str, source: str, chain: Chain) -> ProviderError:
    """The one line for a refused ``generateAccessToken``: both identities, what the API said, and
    the fix (pure; ``body`` is the answer's text, already scrubbed of nothing secret: errors
    carry no token)."""
    from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL
    from credprovider.runtime.provider import answer_text, one_line

    code, api_status, message, reason, metadata = _google_error(body)
    code = code or status
    through = f" through {', '.join(chain.delegates)}" if chain.delegates else ""
    head = f"cannot impersonate {chain.target} as {source}{through}"
    said = f"HTTP {code} {api_status}".rstrip()
    if reason == "SERVICE_DISABLED" or "has not been used in project" in message:
        project = metadata.get("consumer", "").removeprefix("projects/") or "of the source identity"
        return ProviderError(
            f"{head}: the IAM Service Account Credentials API is disabled in project {project} "
            f"({said} SERVICE_DISABLED)",
            f"enable {IAM_CREDENTIALS_HOST} in project {project}, then retry",
        )
    if code == 403:
        if chain.delegates:
            return ProviderError(
                f"{head}: a link of the chain {chain.path(source)} is not granted ({said})",
                f"each account in the chain needs {TOKEN_CREATOR_ROLE} on the next one",
            )
        return ProviderError(
            f"{head}: the IAM Credentials API refused ({said})",
            f"grant {source} {TOKEN_CREATOR_ROLE} on {chain.target}",
        )
    if code == 404:
        named = [e for e in (*chain.delegates, chain.target) if e.lower() in message.lower()]
        missing = named[-1] if named else chain.target
        role = "the delegate" if missing != chain.target else "the service account"
        return ProviderError(
            f"{head}: {role} {missing} does not exist ({said})",
            f"check the emails in {IMPERSONATE_FLAG}",
        )
    if code == 401:
        return ProviderError(
            f"{head}: the IAM Credentials API did not accept the source's token ({said})",
            "the source credentials are not valid for Google APIs (expired, or of another audience)",
        )
    if code is None or api_status == "":
        return ProviderError(
            f"{head}: the IAM Credentials API answered HTTP {code}: {answer_text(body)}",
            NOT_THE_SERVICE,
        )
    advice = RETRIES_NEXT_PULL if code == 429 or code >= 500 else None
    return ProviderError(
        f"{head}: the IAM Credentials API answered {said}: {one_line(message)}", advice
    )
