"""The one writer of the release's .tar.gz files (the bundle tarballs, the chart): reproducible, so
that the same tree gives the same bytes on any machine: every member root's with one time
(``epoch``, the commit's), PAX format, gzip without a name or a time."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable
from pathlib import Path


def _normalized(epoch: int):  # type: ignore[no-untyped-def]
    def normalize(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = epoch
        return info

    return normalize


def write(output: Path, members: Iterable[tuple[Path, str]], epoch: int) -> None:
    """``output`` holding each ``(path, name)`` in the order given (a directory without its
    contents: name those too)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, name in members:
            tar.add(path, arcname=name, recursive=False, filter=_normalized(epoch))
    with (
        output.open("wb") as handle,
        gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(raw.getvalue())
