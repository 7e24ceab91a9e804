"""What an endpoint may answer: the one bounded reader and the one bounded JSON decoder.

Every answer a plugin reads is held to these caps before anything parses it, on every route: the
stdlib client (:mod:`credprovider.runtime.http`), and the SDK transports, which read through
:func:`sdk_body` (botocore's ``AWSResponse.content``, requests' response hook for google-auth,
azure-identity and the ACR exchange). A JWT's claims are decoded here too. An answer past a cap is
a :class:`BadAnswer`, which the caller turns into one line naming the endpoint.

The caps, and why each is what it is (docs/security.md lists them for operators):

* :data:`MAX_BODY_BYTES`, 1 MiB. The largest real answer is a few KiB: an ECR token is about 2 KiB,
  STS credentials 2 KiB, an AAD or Google token 1-3 KiB, Azure's cloud metadata 10 KiB. A body that
  announces more, or streams past it (chunked, or unframed until the connection closes), is
  refused at the cap without reading further.
* :data:`MAX_JSON_DEPTH`, 32 levels. Real answers nest at most 4 (Azure's cloud metadata). Python's
  decoder recurses once per level and fails near a thousand with a ``RecursionError``; botocore
  walks STS's XML the same way, so XML is held to the same depth.
* :data:`MAX_JSON_NUMBER`, 2**53. I-JSON (RFC 7493) keeps numbers where a float64 holds every
  integer exactly; an expiry in Unix milliseconds is 1.7e12. A number past it, or one that
  overflows to infinity, would break the expiry arithmetic; a number carried in a string
  (Azure's ``expires_on``) is held to the same range by :func:`number_in_string`.
* The deadline. A body is read in blocks, and the plugin's deadline is checked between them: a
  server that trickles a byte at a time ends the read when the deadline does.
* ``Content-Encoding``. Every route asks for ``identity``; a gzip or deflate answer is decoded
  under the same size cap, and any other encoding is refused.
"""

from __future__ import annotations

from credprovider.errors import ProviderError
from credprovider.runtime import cjson
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final
from credprovider.runtime.advice import NOT_THE_SERVICE
from credprovider.runtime.excerpt import byte_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MAX_BODY_BYTES: Final = 1 << 20
MAX_JSON_DEPTH: Final = 32
MAX_JSON_NUMBER: Final = 2**53
MAX_NUMBER_DIGITS: Final = len(str(MAX_JSON_NUMBER))
READ_BLOCK_BYTES: Final = 1 << 16
DECODED_ENCODINGS: Final = ("gzip", "x-gzip", "deflate")


class BadAnswer(ProviderError, ValueError):
    """An endpoint's answer is past one of the caps (or its encoding cannot be read).

    ``predicate`` says what is wrong ("is larger than 1 MiB"); ``where`` (the URL, once known)
    names the endpoint. :attr:`detail` is the sentence a caller puts after its own context; the
    message adds what to check, for an answer that reaches the edge unwrapped."""

    def __init__(self, predicate: str, where: str = "") -> None:
        self.predicate, self.where = predicate, where
        super().__init__(self.detail, NOT_THE_SERVICE)

    @property
    def detail(self) -> str:
        subject = f"the answer from {self.where}" if self.where else "the answer"
        return f"{subject} {self.predicate}"

    def at(self, where: str) -> BadAnswer:
        """The same verdict, naming the endpoint (a URL's query is left out: it may hold a
        token or a client id)."""
        return self if self.where else BadAnswer(self.predicate, where.split("?")[0])


def too_large(cap: int = MAX_BODY_BYTES) -> str:
    return f"is larger than {byte_size(cap)}"


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS or abs(value := int(text)) > MAX_JSON_NUMBER:
        raise BadAnswer(f"has a number out of range ({_excerpt(text)})")
    return value


def _real(text: str) -> float:
    value = float(text)
    if not abs(value) <= MAX_JSON_NUMBER:  # also true for an infinity
        raise BadAnswer(f"has a number out of range ({_excerpt(text)})")
    return value


def _excerpt(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}…({len(text)} characters)"


def nesting_depth(value: object) -> int:
    """How deeply ``value`` nests (a scalar is 0), walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def decode_json(
    data: bytes | str,
    *,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """``data`` decoded as JSON under the caps: :class:`BadAnswer` for an answer past one (too
    deep, a number out of range, NaN or Infinity), json's ``ValueError`` for one that is not
    JSON."""
    if len(data) > MAX_BODY_BYTES:
        raise BadAnswer(too_large())
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = cjson.loads(
            text,
            object_pairs_hook=object_pairs_hook,
            parse_constant=_constant,
            parse_int=_integer,
            parse_float=_real,
        )
    except RecursionError:
        raise BadAnswer(_too_deep()) from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    if nesting_depth(value) > MAX_JSON_DEPTH:
        raise BadAnswer(_too_deep())
    return value


def _too_deep() -> str:
    return f"is JSON nested more than {MAX_JSON_DEPTH} levels deep"


def _constant(name: str) -> Any:
    raise BadAnswer(f"has {name}, which is not a JSON number")


def check_structure(data: bytes) -> None:
    """For an SDK that parses ``data`` itself: :class:`BadAnswer` if it is JSON past a cap, or XML
    nested deeper than JSON may be (botocore walks an XML answer recursively). Anything else
    (text, broken JSON) is left to the SDK, which says so in its own words."""
    start = data.lstrip()[:1]
    if start == b"<":
        _check_xml_depth(data)
    if start not in (b"{", b"["):
        return
    try:
        decode_json(data)
    except BadAnswer:
        raise
    except ValueError:
        pass


def _check_xml_depth(data: bytes) -> None:
    import re

    depth = 0
    for tag in re.finditer(rb"<([/?!]?)[^>]*?(/?)>", data):
        closing, empty = tag.group(1), tag.group(2)
        if closing == b"/":
            depth -= 1
        elif not closing and not empty:
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise BadAnswer(f"is XML nested more than {MAX_JSON_DEPTH} levels deep")


def number_in_string(value: object) -> int:
    """An integer an endpoint sends as a string (or a number), held to the JSON number range:
    ``ValueError`` if it is not one, :class:`BadAnswer` if it is out of range."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"not an integer: {type(value).__name__}")
    return _integer(str(value).strip())


def read_bounded(
    blocks: Iterator[bytes],
    *,
    declared: str | None,
    remaining: Callable[[], float],
    cap: int = MAX_BODY_BYTES,
) -> bytes:
    """A body from ``blocks`` (an SDK's raw stream), refused past ``cap`` or past the deadline
    (``remaining`` seconds left, checked between blocks). ``declared`` is the Content-Length, if
    any: a larger one is refused before a byte is read."""
    length = (declared or "").strip()
    # ASCII digits only ("²" passes isdigit, int refuses it), and no int() of thousands of them
    if length.isascii() and length.isdigit() and (len(length) > 18 or int(length) > cap):
        raise BadAnswer(too_large(cap))
    data = bytearray()
    for block in blocks:
        data += block
        if len(data) > cap:
            raise BadAnswer(too_large(cap))
        if remaining() <= 0:
            raise BadAnswer("was still arriving when the deadline passed")
    return bytes(data)


def decoded(data: bytes, encoding: str, cap: int = MAX_BODY_BYTES) -> bytes:
    """``data`` undone from its ``Content-Encoding`` (gzip or deflate), at most ``cap`` bytes."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return data
    if name not in DECODED_ENCODINGS:
        raise BadAnswer(f"has Content-Encoding {_excerpt(encoding)!r}, which is not supported")
    import zlib

    # 47: a gzip or zlib header, detected; a bare deflate stream (as some servers send) is -15.
    wbits = 47 if data[:1] in (b"\x1f", b"x") else -15
    try:
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(data, cap + 1)
    except zlib.error:
        raise BadAnswer(f"is not valid {name}") from None
    if len(out) > cap or inflater.unconsumed_tail:
        raise BadAnswer(too_large(cap))
    return out


def sdk_body(
    blocks: Iterator[bytes],
    *,
    declared: str | None,
    encoding: str,
    remaining: Callable[[], float],
    where: str,
) -> bytes:
    """What an SDK's transport hands its parser: the body read, decoded and checked under every
    cap; :class:`BadAnswer` naming ``where`` if it is past one."""
    try:
        data = decoded(read_bounded(blocks, declared=declared, remaining=remaining), encoding)
        check_structure(data)
    except BadAnswer as exc:
        raise exc.at(where) from None
    return data


def jwt_claims(token: str) -> dict[str, Any] | None:
    """A JWT's claims, unverified (for sizing a cache or naming a namespace, never for trust), or
    ``None`` when ``token`` is not a JWT with an object for claims; :class:`BadAnswer` for claims
    past the caps (nested too deep, a number out of range): no issuer sends those."""
    import base64
    import binascii

    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = decode_json(base64.urlsafe_b64decode(payload.encode("ascii")))
    except BadAnswer:
        raise
    except (binascii.Error, ValueError, UnicodeError):
        return None
    return claims if isinstance(claims, dict) else None


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (unverified: see :func:`jwt_claims`), or ``None``."""
    claims = jwt_claims(token)
    exp = claims.get("exp") if claims is not None else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
