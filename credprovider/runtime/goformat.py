"""Go's text forms, as the kubelet and the upstream plugins print and read them: ``time.Duration``
(``1h2m3.5s``, nanoseconds underneath) and ``strconv.Quote`` (``%q``). Stdlib only; pure."""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import Final
from credprovider.runtime.excerpt import QUOTE_LIMIT, clip

NANOSECOND: Final = 1
MICROSECOND: Final = 1000 * NANOSECOND
MILLISECOND: Final = 1000 * MICROSECOND
SECOND: Final = 1000 * MILLISECOND
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE
_MAX_INT64: Final = (1 << 63) - 1
_INT64_DIGITS: Final = len(str(_MAX_INT64))  # 19


class DurationError(CredproviderError, ValueError):
    """A string is not a Go duration (``time.ParseDuration`` would reject it)."""


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

    Errors carry Go's messages (``time: invalid duration "5"``, ``time: unknown unit ...``),
    quoting at most :data:`QUOTE_LIMIT` characters of ``text`` (Go quotes it whole).
    """
    quoted = go_quote(clip(text, QUOTE_LIMIT))
    negative = text[:1] == "-"
    if text[:1] in ("-", "+"):
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise _invalid(quoted)
    total = 0
    while text:
        if not (text[0] == "." or "0" <= text[0] <= "9"):
            raise _invalid(quoted)
        whole_digits, text = _split_digits(text)
        if len(whole_digits.lstrip("0")) > _INT64_DIGITS:  # Go's leadingInt overflows here too
            raise _invalid(quoted)
        whole = int(whole_digits) if whole_digits else 0
        if whole > _MAX_INT64 + 1:
            raise _invalid(quoted)
        frac, scale, has_frac = 0, 1.0, False
        if text.startswith("."):
            frac, scale, has_frac, text = _fraction(text[1:])
        if not whole_digits and not has_frac:
            raise _invalid(quoted)
        unit_name, text = _split_unit(text)
        if not unit_name:
            raise DurationError(f"time: missing unit in duration {quoted}")
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise DurationError(f"time: unknown unit {go_quote(unit_name)} in duration {quoted}")
        if whole > (1 << 63) // unit:
            raise _invalid(quoted)
        value = whole * unit
        if frac > 0:
            value += int(float(frac) * (float(unit) / scale))
            if value > 1 << 63:
                raise _invalid(quoted)
        total += value
        if total > 1 << 63:
            raise _invalid(quoted)
    if negative:
        return -total
    if total > _MAX_INT64:
        raise _invalid(quoted)
    return total


def parse_seconds(text: str) -> float:
    """A time-out as our flags take it: a Go duration (``30s``, ``1m30s``) or plain seconds
    (``30``, ``2.5``). Raises :class:`DurationError`; the range is the caller's."""
    if text.isascii() and text.replace(".", "", 1).isdigit():
        return float(text)
    return parse_go_duration(text) / SECOND


def _invalid(quoted: str) -> DurationError:
    return DurationError(f"time: invalid duration {quoted}")


def _split_digits(text: str) -> tuple[str, str]:
    """The leading decimal digits of ``text``, and the rest."""
    i = 0
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    return text[:i], text[i:]


def _fraction(text: str) -> tuple[int, float, bool, str]:
    """The digits after a decimal point as Go reads them: the value, its scale (10 per digit kept),
    whether there were any digits, and the rest. Go stops adding precision before an overflow."""
    frac, scale, j, overflow = 0, 1.0, 0, False
    while j < len(text) and "0" <= text[j] <= "9":
        if not overflow:
            if frac > (_MAX_INT64 - 9) // 10:
                overflow = True
            else:
                frac = frac * 10 + int(text[j])
                scale *= 10
        j += 1
    return frac, scale, j > 0, text[j:]


def _split_unit(text: str) -> tuple[str, str]:
    """The unit name (everything up to the next digit or point), and the rest."""
    k = 0
    while k < len(text) and not (text[k] == "." or "0" <= text[k] <= "9"):
        k += 1
    return text[:k], text[k:]
