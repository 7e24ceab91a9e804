"""Whether the bundle this process runs from is whole, asked only when something has failed.

A release bundle (release/bundle.py) lists every file of ``_internal/`` with its size in
``credprovider.files``. The launcher (release/launcher.c) checks on each exec only the few files
the interpreter needs to reach ``credprovider.entry`` (``credprovider.start``): a lone copied
executable, or a bundle missing its interpreter, libraries or loader, still ends there with one
line. The rest of the list (a thousand files, about 3 ms per exec) is checked here instead, and
only after a start has failed: an exception no program expected (a module that would not import, a
data file an SDK could not open, truncated bytecode) becomes, when the bundle is damaged, one line
naming the first file that is missing or of another size, instead of ``No module named ...``.

Nothing here is imported by a successful exec; it imports nothing the interpreter does not hold.
"""

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

# The bundle's manifests, in _internal/ (release/bundle.py writes them; the launcher reads the
# second, and is built with its name).
FILES_MANIFEST: "Final" = "credprovider.files"
START_MANIFEST: "Final" = "credprovider.start"
# A thousand lines of about 60 bytes; far past it the file is not the one the release wrote.
MAX_MANIFEST_BYTES: "Final" = 4 << 20


# How that line's advice begins: the tool knows a bundle that cannot start by it
# (credprovider/tool/images/startcheck.py).
INSTALL_HINT_START: "Final" = "install the whole credprovider-"


def install_hint(version: str, arch: str) -> str:
    """What a lone copy or a damaged bundle is told to do (the launcher is built with this text)."""
    return (
        f"{INSTALL_HINT_START}{version}/ directory, not one file (tar -xzf "
        f"credprovider-{version}-linux-{arch}.tar.gz -C /opt), then symlink the plugin names into "
        "the kubelet's --image-credential-provider-bin-dir (see INSTALL in the tarball)"
    )


def own_contents() -> str | None:
    """The ``_internal/`` directory of the bundle this module was loaded from, or ``None`` when it
    runs from source (neither manifest there: the launcher required the start one)."""
    contents = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for manifest in (START_MANIFEST, FILES_MANIFEST):
        if os.path.isfile(os.path.join(contents, manifest)):
            return contents
    return None


def damage(contents: str) -> str | None:
    """What is wrong with the bundle whose ``_internal/`` is ``contents``, as the launcher would
    say it, or ``None`` when every listed file is there with its size."""
    manifest = os.path.join(contents, FILES_MANIFEST)
    try:
        lines = _listing(manifest).decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc.__class__.__name__
        return f"the bundle is damaged: cannot read {manifest} ({why})"
    for line in lines:
        size, _, relative = line.partition(" ")
        if not (size.isascii() and size.isdigit() and len(size) <= 15) or not relative:
            return f"the bundle is damaged: {manifest} has a bad line"
        path = os.path.join(contents, relative)
        try:
            found = os.stat(path).st_size
        except OSError as exc:
            return f"the bundle is damaged: {path} is missing ({exc.strerror})"
        if found != int(size):
            return f"the bundle is damaged: {path} has {found} bytes, not {size}"
    return None


def _listing(manifest: str) -> bytes:
    """The manifest's bytes, read as every file on a failed start's path is read: opened without
    blocking, a regular file only (a FIFO is never waited on), at most
    :data:`MAX_MANIFEST_BYTES` (``OSError`` otherwise; runtime/nodefile.py, which says why in
    words, is not imported here)."""
    descriptor = os.open(manifest, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", manifest)
        # in pieces: one read of the whole bound asks for 4 MiB at once, which a process short
        # of memory (the failure being explained may be that) cannot have
        data = b""
        while len(data) <= MAX_MANIFEST_BYTES and (more := os.read(descriptor, 1 << 16)):
            data += more
        if len(data) > MAX_MANIFEST_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_MANIFEST_BYTES >> 20} MiB", manifest)
        return data
    finally:
        os.close(descriptor)


def damage_line() -> str | None:
    """The one line to print instead of an unexpected failure, when this process runs from a
    damaged bundle (``None``: run from source, or the bundle is whole)."""
    contents = own_contents()
    if contents is None:
        return None
    found = damage(contents)
    if found is None:
        return None
    from credprovider.version import build_info

    info = build_info()
    return f"{found}; {install_hint(info['version'], info['arch'])}"
