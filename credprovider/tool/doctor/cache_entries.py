"""The entries in a plugin cache as the plugins (root) judge them: each a regular file of root's,
readable by root alone, that the plugin would serve (this format, in date); anything else is
said. Only reads: entries are opened ``O_NOFOLLOW`` and non-blocking, at most
``MAX_ENTRY_BYTES`` of each and at most ``MAX_ENTRIES`` of them."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from typing import Final

from credprovider.runtime import cjson
from credprovider.runtime.cachestore import MAX_ENTRY_BYTES, decode_entry
from credprovider.runtime.provider import CacheScope

ENTRY_SUFFIX: Final = ".json"
MAX_ENTRIES: Final = 4096


@dataclass
class EntryCount:
    fresh: int = 0
    stale: dict[str, int] = field(default_factory=dict)  # why it would not be served -> count
    unsafe: list[str] = field(default_factory=list)  # what another user could have planted or read
    not_read: str = ""


def entry_problem(data: bytes, now: float) -> str | None:
    """``None`` if the plugin would serve this entry to the scope it names; else why not."""
    try:
        document = cjson.loads(data.decode("utf-8"), parse_constant=cjson.reject_constant)
    except (ValueError, RecursionError):
        return "not JSON"
    if not isinstance(document, dict):
        return "another format version"
    auth = document.get("auth")
    scope = CacheScope(
        str(document.get("provider", "")),
        str(document.get("registry", "")),
        {},
        tuple(auth) if isinstance(auth, dict) else (),
    )
    decoded = decode_entry(data, scope, now)
    return decoded if isinstance(decoded, str) else None


def count_entries(path: str, now: float | None = None) -> EntryCount:
    counted = EntryCount()
    moment = time.time() if now is None else now
    try:
        names = sorted(entry.name for entry in os.scandir(path))[:MAX_ENTRIES]
    except OSError as exc:
        counted.not_read = f"its entries cannot be listed as uid {os.geteuid()}: {exc.strerror}"
        return counted
    for name in names:
        if not name.endswith(ENTRY_SUFFIX):
            continue
        where = os.path.join(path, name)
        try:
            descriptor = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            counted.unsafe.append(f"{name}: cannot be opened ({exc.strerror})")
            continue
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                counted.unsafe.append(f"{name}: not a regular file")
                continue
            if info.st_uid != 0:
                counted.unsafe.append(f"{name}: owned by uid {info.st_uid} (planted?)")
                continue
            if info.st_mode & 0o077:
                counted.unsafe.append(
                    f"{name}: mode {stat.S_IMODE(info.st_mode):o}, credentials others can read"
                )
                continue
            data = os.read(descriptor, MAX_ENTRY_BYTES + 1)
        except OSError as exc:
            counted.unsafe.append(f"{name}: cannot be read ({exc.strerror})")
            continue
        finally:
            os.close(descriptor)
        problem = (
            f"larger than {MAX_ENTRY_BYTES} bytes"
            if len(data) > MAX_ENTRY_BYTES
            else entry_problem(data, moment)
        )
        if problem is None:
            counted.fresh += 1
        else:
            counted.stale[problem] = counted.stale.get(problem, 0) + 1
    return counted


def describe(counted: EntryCount) -> str:
    stale = sum(counted.stale.values())
    why = "; ".join(f"{count} {reason}" for reason, count in sorted(counted.stale.items()))
    return f"{counted.fresh} fresh entr{'y' if counted.fresh == 1 else 'ies'}" + (
        f", {stale} not served and replaced at the next fetch ({why})" if stale else ""
    )
