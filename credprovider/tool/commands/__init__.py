"""The ``credprovider`` subcommands, one module each: ``register(sub)`` adds its parser and sets its
handler (``args -> exit status``). :data:`COMMANDS` is their order in ``--help`` (a module's
``_`` is the command's ``-``)."""

from __future__ import annotations

from typing import Final

COMMANDS: Final = (
    "doctor", "validate", "get", "explain", "match", "install", "migrate", "agent", "fleet",
    "package_removal_check",
)  # fmt: skip
