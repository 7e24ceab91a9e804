"""AKS identity bindings (upstream cloud-provider-azure PR #9907, v1.36): what an AKS node with
identity bindings is provisioned with (``--ib-sni-name``, ``--ib-apiserver-ip``,
``--ib-default-client-id``, ``--ib-default-tenant-id``).

The pod's service account token is the client assertion of a client-credentials request to
``https://<sni-name>/`` for the ACR scope, with the client ID from the service account's
``kubernetes.azure.com/acr-client-id`` annotation (when the key is there, even empty) or else
``--ib-default-client-id``. The connection is dialled to the API server's address
(``--ib-apiserver-ip``, an IP or a name resolved once), TLS naming ``<sni-name>``, trusting only
the cluster CA in ``/etc/kubernetes/certs/ca.crt``, never through a proxy. The access token it
answers goes through the usual ACR exchange. Upstream's error strings are kept.
"""

from __future__ import annotations

from credprovider.errors import ProviderError, UsageError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.excerpt import quoted

if TYPE_CHECKING:
    import ssl

    from credprovider.azure.imds import AccessToken
    from credprovider.runtime.api import CredentialProviderRequest
    from credprovider.runtime.provider import Context

CA_FILE: Final = "/etc/kubernetes/certs/ca.crt"
ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
CLIENT_ID_ANNOTATION: Final = "kubernetes.azure.com/acr-client-id"
TENANT_ID_ANNOTATION: Final = "kubernetes.azure.com/acr-tenant-id"
PER_CALL_TIMEOUT_SECONDS: Final = 10.0
# The longest a host name may be (RFC 1035), and the characters of its labels.
_NAME_CHARACTERS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-."
)


class Bindings(NamedTuple):
    """The identity-bindings flags: ``sni_name`` is ``host`` or ``host:port``."""

    sni_name: str
    apiserver: str  # an IP, or a name resolved when the token is asked for
    default_client_id: str = ""
    default_tenant_id: str = ""


def is_ip(value: str) -> bool:
    import socket

    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, value)
        except OSError:
            continue
        return True
    return False


def bindings_from_flags(
    sni: str, apiserver: str, client_id: str, tenant_id: str
) -> Bindings | None:
    """Upstream's checks, in upstream's order and words (``ParseIdentityBindingsConfig``); the
    bindings, or ``None`` when no flag asks for them."""
    if sni.startswith(("https://", "http://")):
        raise UsageError(
            f"--ib-sni-name must not contain protocol prefix (https:// or http://), got: {sni}"
        )
    if sni and not apiserver:
        raise UsageError("--ib-apiserver-ip must be set when --ib-sni-name is provided")
    if client_id and not sni:
        raise UsageError("--ib-sni-name must be set when --ib-default-client-id is provided")
    if tenant_id and not sni:
        raise UsageError("--ib-sni-name must be set when --ib-default-tenant-id is provided")
    if apiserver and not _ip_or_name(apiserver):
        raise UsageError(
            f"--ib-apiserver-ip must be a valid IP address or resolvable FQDN, got: {apiserver}"
        )
    if apiserver and not sni:
        raise UsageError("--ib-sni-name must be set when --ib-apiserver-ip is provided")
    if sni and not _host_and_port(sni):  # a name TLS can carry: not in upstream, which fails later
        raise UsageError(f"--ib-sni-name must be a host name or host:port, got: {quoted(sni)}")
    return Bindings(sni, apiserver, client_id, tenant_id) if sni else None


def _host_and_port(value: str) -> bool:
    name, colon, port = value.partition(":")
    return (
        _ip_or_name(name)
        and not is_ip(name)
        and (
            not colon
            or (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536)
        )
    )


def _ip_or_name(value: str) -> bool:
    if is_ip(value):
        return True
    labels = value.rstrip(".").split(".")
    return (
        len(value) <= 253
        and _NAME_CHARACTERS.issuperset(value)
        and all(0 < len(label) <= 63 and not label.startswith("-") for label in labels)
    )


def client_id_for(request: CredentialProviderRequest, bindings: Bindings) -> str:
    """The annotation's client ID when the key is there (even empty), else the default one."""
    annotations = request.service_account_annotations or {}
    if CLIENT_ID_ANNOTATION in annotations:
        return str(annotations[CLIENT_ID_ANNOTATION])
    return bindings.default_client_id


class BindingCredential:
    """The ``get_token`` of azure-identity's credentials, for identity bindings: one
    client-credentials request with the pod's token as the assertion."""

    def __init__(
        self, bindings: Bindings, request: CredentialProviderRequest, ctx: Context
    ) -> None:
        failed = f"failed to get identity bindings token credential for image {request.image}"
        if not request.service_account_token:
            raise ProviderError(f"{failed}: service account token not found in request")
        if not bindings.sni_name:
            raise ProviderError(f"{failed}: SNI name not provided in identity bindings config")
        if not bindings.apiserver:
            raise ProviderError(f"{failed}: API server IP not provided in identity bindings config")
        client_id = client_id_for(request, bindings)
        if not client_id:
            raise ProviderError(
                f"{failed}: client ID not found in service account annotations (checked "
                f"{CLIENT_ID_ANNOTATION}) and no default client ID configured"
            )
        self.bindings = bindings
        self.client_id = client_id
        self._assertion = request.service_account_token
        self._ctx = ctx

    def get_token(self, *scopes: str) -> AccessToken:
        from urllib.parse import urlencode

        from credprovider.runtime.http import HttpError, exchange, stdlib_send

        if len(scopes) != 1:
            raise ProviderError(f"expected exactly one scope, got {len(scopes)}")
        ctx, sni = self._ctx, self.bindings.sni_name
        address = _dialled(self.bindings.apiserver, ctx)
        url = f"https://{sni}/"
        ctx.log.v(4, f"POST {url} (dialled at {address})")
        body = urlencode(
            {
                "grant_type": "client_credentials",
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": self._assertion,
                "client_id": self.client_id,
                "scope": scopes[0],
            }
        ).encode()
        try:
            answer = exchange(
                ctx,
                "POST",
                url,
                what=f"identity bindings token request at {sni}",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
                body=body,
                send=stdlib_send(cluster_ca_context(), connect_to=address),
                timeout_cap=PER_CALL_TIMEOUT_SECONDS,
            )
        except HttpError as exc:
            raise ProviderError(
                f"identity bindings token request to {sni} (at {address}) failed: {exc}; check "
                "that the node reaches the API server's address"
            ) from None
        if answer.status != 200:
            from credprovider.runtime.excerpt import clip

            raise ProviderError(
                f"token request failed with status {answer.status}: {clip(answer.text(), 300)}"
            )
        return _token_of(answer.body, ctx.now())


def _dialled(apiserver: str, ctx: Context) -> str:
    """The API server's address: the IP given, or the name's first address (resolved once)."""
    if is_ip(apiserver):
        return apiserver
    import socket

    ctx.deadline.phase = f"resolving {apiserver}"
    try:
        found = socket.getaddrinfo(apiserver, None, type=socket.SOCK_STREAM)
    except OSError:
        found = []
    if not found:
        raise ProviderError(
            f"--ib-apiserver-ip must be a valid IP address or resolvable FQDN, got: {apiserver}"
        )
    return str(found[0][4][0])


def cluster_ca_context(path: str = CA_FILE) -> ssl.SSLContext:
    """TLS 1.2 or newer, trusting only the cluster CA at ``path`` (upstream's messages)."""
    import ssl

    from credprovider.runtime.nodefile import read_node_file

    try:
        pem = read_node_file(path)
    except OSError as exc:
        raise ProviderError(f"read CA file {path}: {exc.strerror or exc}") from None
    if not pem.strip():
        raise ProviderError(f"CA file {path} is empty")
    try:
        context = ssl.create_default_context(cadata=pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError):
        raise ProviderError(f"parse CA file {path}: no valid certificates found") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _token_of(body: bytes, now: float) -> AccessToken:
    """``access_token`` and ``expires_in`` (seconds) of the endpoint's answer."""
    from credprovider.azure.imds import AccessToken
    from credprovider.runtime.advice import NOT_THE_SERVICE
    from credprovider.runtime.answer import decode_json

    try:
        answer = decode_json(body)
    except ValueError:
        answer = None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    expires_in = answer.get("expires_in") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ProviderError(
            "the identity bindings endpoint answered without an access_token", NOT_THE_SERVICE
        )
    from credprovider.runtime.redact import register_secret

    register_secret(token)
    seconds = expires_in if isinstance(expires_in, int) and not isinstance(expires_in, bool) else 0
    return AccessToken(token, int(now) + max(0, seconds))
