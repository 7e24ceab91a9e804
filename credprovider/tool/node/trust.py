"""What the tool, often run as root, lets a plugin it runs inherit, and which binaries it runs at
all (``docs/security.md``).

* **The environment**: the plugins the tool runs (``get``, ``doctor``'s dry run, ``validate``'s
  start check) inherit the node's kubelet's environment, as they do under the kubelet, but never
  the variables that make the dynamic loader, the C library or an interpreter load code or read
  files of someone's choosing (``LD_PRELOAD``, ``GCONV_PATH``, ``PYTHONPATH``, ...): the list glibc
  itself drops for set-user-ID programs, the OpenSSL ones that load modules, and every ``LD_`` and
  ``PYTHON`` name. The kubelet's environment is only ever read from a trusted kubelet
  (``kubelet_proc``).
* **The binary**: a program is run only if nobody but root (or the user running the tool) could
  have put it there or changed it: the file, every directory above it, and every directory above
  the path it was named by, are owned by root or this user and writable by no one else (a
  directory with the sticky bit, as ``/tmp``, may be writable by all: others cannot replace what
  they do not own there). A bin dir any user can write to is a way to root on the node, for the
  kubelet as for the tool: it is reported, and what is in it is not run.

Pure functions over ``os.stat``; not on the exec path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Final

from credprovider.errors import CredproviderError

# glibc's unsecure-envvars.h (dropped for set-user-ID programs) and OpenSSL's module loaders.
UNSAFE_ENV: Final = frozenset(
    {
        "GCONV_PATH",
        "GETCONF_DIR",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TMPDIR",
        "TZDIR",
        "OPENSSL_CONF",
        "OPENSSL_ENGINES",
        "OPENSSL_MODULES",
    }
)
UNSAFE_ENV_PREFIXES: Final = ("LD_", "PYTHON")


class UntrustedProgram(CredproviderError):
    """A program the tool will not run: someone other than root could have changed it."""


def unsafe_name(name: str) -> bool:
    return name in UNSAFE_ENV or name.startswith(UNSAFE_ENV_PREFIXES)


def safe_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the loader's, the C library's and the interpreters' variables."""
    return {name: value for name, value in env.items() if not unsafe_name(name)}


def owner_problem(path: str, found: os.stat_result, user: int) -> str:
    """Why ``path`` (as ``found``) is not one only root or ``user`` controls ('' if it is)."""
    if found.st_uid not in (0, user):
        return f"{path} is owned by uid {found.st_uid}"
    mode = found.st_mode
    if stat.S_ISDIR(mode) and mode & stat.S_ISVTX:
        return ""  # others may add to it, never replace what root or this user put there
    if mode & stat.S_IWOTH or (mode & stat.S_IWGRP and found.st_gid != 0):
        return f"{path} is writable by others (mode {stat.filemode(mode)})"
    return ""


def _chain(path: str) -> list[str]:
    """``path`` and every directory above it."""
    chain = [path]
    while (parent := os.path.dirname(chain[-1])) != chain[-1]:
        chain.append(parent)
    return chain


def untrusted(path: str, user: int | None = None) -> str:
    """Why the program at ``path`` is not one only root (or ``user``, default this process's
    effective user) controls: '' when it is, or when nothing is there (exec then says so)."""
    user = os.geteuid() if user is None else user
    named = os.path.abspath(path)
    try:
        real = os.path.realpath(named)
    except (OSError, ValueError):
        return ""
    for each in dict.fromkeys([*_chain(os.path.dirname(named)), *_chain(real)]):
        try:
            found = os.stat(each)
        except (OSError, ValueError):
            continue  # missing: exec reports it as the kubelet would
        problem = owner_problem(each, found, user)
        if problem:
            return problem
    return ""


def config_problem(path: str) -> str:
    """Why a plugin may not be run with the ``env`` and ``args`` the config at ``path`` gives it
    ('' if it may): the same rule as for a program, since an ``env`` entry (``BASH_ENV``,
    ``AWS_CONFIG_FILE`` naming a ``credential_process``) can make a trusted plugin run anyone's
    code, and the kubelet (as the tool, when root) runs it as root."""
    problem = untrusted(path)
    if not problem:
        return ""
    return (
        f"not run with the env and args of {path}: {problem}, so someone other than root could "
        "have written them (and the kubelet runs the plugin as root with them): make the config "
        "and the directories above it root's, writable only by root"
    )


def place_problem(directory: str) -> str:
    """Why root must not put what the kubelet runs or reads in ``directory`` ('' if it may): it,
    or a directory above it, is one someone other than root could change (a directory not made
    yet is judged by those above it)."""
    problem = untrusted(os.path.join(directory, "."), user=0)
    if not problem:
        return ""
    return (
        f"{directory} is not root's alone ({problem}): the kubelet runs as root what it finds "
        "there (the plugins, the env and args their config gives them), so whoever can change it "
        "could run code as root; make it root's, writable only by root, or choose another place"
    )


def check_program(path: str) -> None:
    """Raise :class:`UntrustedProgram` (one sentence) if ``path`` is not to be run."""
    problem = untrusted(path)
    if problem:
        raise UntrustedProgram(
            f"{path} was not run: {problem}, so someone other than root could have replaced it "
            "(and the kubelet runs it as root): make the bin dir and the plugins root's, "
            "writable only by root"
        )
