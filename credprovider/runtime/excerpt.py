"""How much of something it was given a message carries: an error quotes a short excerpt, a log
line a longer one, and no line is longer than :data:`LINE_LIMIT`, each cut saying the original
size. Imports nothing: the formatting modules (goformat, redact) both use it.
"""

from __future__ import annotations

from credprovider.runtime._typing import Final

# A value echoed in a message (an image, a server's error text) is cut to this many characters.
VALUE_LIMIT: Final = 256
# A whole stderr line is cut to this many characters.
LINE_LIMIT: Final = 1024


def clip(text: str, limit: int = VALUE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: ``abc…(600000 bytes)``."""
    if len(text) <= limit:
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}…({size} bytes)"


# What an error quotes of a value it was given (an image, a duration, a key).
QUOTE_LIMIT: Final = 64


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr`` of an echoed value, cut to ``limit`` characters first: what a message quotes of
    something it was given (a 600 kB image costs the line a short excerpt)."""
    return repr(clip(value, limit)) if isinstance(value, str) else clip(_short_repr(value), limit)


def _short_repr(value: object) -> str:
    """``repr`` of a value from outside at the cost of its excerpt: a structure walked only as deep
    and as wide as an excerpt shows (a YAML "billion laughs" in azure.json was written out whole,
    10^10 strings, until the deadline, whose line blamed the network), an int past Python's digit
    limit not written at all."""
    import reprlib  # only when a message quotes something that is not a string

    shortener = reprlib.Repr()
    shortener.maxlevel = 3
    shortener.maxlist = shortener.maxtuple = shortener.maxdict = shortener.maxset = 6
    shortener.maxstring = shortener.maxother = shortener.maxlong = QUOTE_LIMIT
    try:
        return shortener.repr(value)
    except ValueError:  # int's repr refuses more than sys.get_int_max_str_digits() digits
        return f"an {type(value).__name__} too large to write"  # an int: the one that raises


def byte_size(count: int) -> str:
    """A size as a cap is stated: ``1 MiB``, ``64 KiB``, ``100 bytes``."""
    if count >= 1 << 20 and count % (1 << 20) == 0:
        return f"{count >> 20} MiB"
    return f"{count >> 10} KiB" if count >= 1024 and count % 1024 == 0 else f"{count} bytes"
