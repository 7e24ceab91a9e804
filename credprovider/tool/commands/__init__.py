"""The ``credprovider`` subcommands, one module each: ``register(sub)`` adds its parser and sets its
handler (``args -> exit status``). :data:`COMMANDS` is their order in ``--help`` (a module's
``_`` is the command's ``-``): ``doctor``, ``validate``, ``get``, ``explain``, ``match``,
``install``, ``migrate``, ``undo``, ``agent`` (with ``agent_pod``: the chart's pod), ``fleet``, ``render`` and
``package_removal_check``. ``common`` holds what they share: exit statuses, JSON, the node's
defaults. They parse arguments and print; the work is in the packages beside them.
"""

from __future__ import annotations

from typing import Final

COMMANDS: Final = (
    "doctor", "validate", "get", "explain", "match", "install", "migrate", "undo", "agent", "fleet",
    "render", "package_removal_check",
)  # fmt: skip
