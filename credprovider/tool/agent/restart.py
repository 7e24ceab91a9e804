"""How the agent restarts the kubelet's unit: over systemd's private socket (agent/systemd.py, the
chart's way, which the node's own rollback needs), or by running an operator's command
(``--restart-command``, for hosts without that socket). Either raises NodeChangeError with one line."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Final

from credprovider.runtime.child import run_bounded
from credprovider.runtime.provider import one_line
from credprovider.tool.agent.platforms import Loaded, every_service
from credprovider.tool.errors import NodeChangeError

# How a unit is restarted (its name given): over systemd's socket, or by a command.
Restart = Callable[[str], None]
"""``unit -> None``: restarts it, or raises NodeChangeError."""

COMMAND_TIMEOUT_SECONDS: Final = 120
# What is kept of its output: the last line of stderr says why it failed.
OUTPUT_CAP: Final = 64 * 1024


def by_command(command_template: str, unit: str) -> None:
    """Run ``command_template`` (``{unit}`` replaced, shell-quoted) for ``unit``; NodeChangeError
    with its last line if it failed."""
    command = shlex.split(command_template.format(unit=shlex.quote(unit)))
    try:  # bounded in time and output, its whole group stopped if it hangs (runtime/child.py)
        done = run_bounded(command, None, b"", COMMAND_TIMEOUT_SECONDS, OUTPUT_CAP)
    except (OSError, ValueError) as exc:
        raise NodeChangeError(f"restarting {unit} failed: {exc}") from exc
    if done.timed_out:
        raise NodeChangeError(
            f"restarting {unit} failed: {command[0] if command else ''} did not end within "
            f"{COMMAND_TIMEOUT_SECONDS}s (stopped)"
        )
    if done.code != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        said = one_line(lines[-1]) if lines else "no output"
        raise NodeChangeError(f"restarting {unit} failed ({done.code}): {said}")


def restarter(systemd_socket: str, command_template: str) -> Restart:
    """Over ``systemd_socket`` when one is given, else by ``command_template``."""
    if systemd_socket:
        from credprovider.tool.agent.systemd import restart_unit

        return lambda unit: restart_unit(unit, systemd_socket)
    return lambda unit: by_command(command_template, unit)


def units_loaded(systemd_socket: str) -> Loaded:
    """The platforms' units systemd has loaded, asked over ``systemd_socket``: what a restart
    through it finds, though the pod sees only the unit directories its chart value mounts (RKE2
    from its tarball keeps its units in /usr/local/lib/systemd/system). None without a socket, or
    when systemd cannot be asked (gone, or not answering as systemd): the unit files under the
    root then tell."""
    if not systemd_socket:
        return None
    from credprovider.tool.agent.systemd import SystemdError, loaded_units

    try:
        return loaded_units(every_service(), systemd_socket)
    except SystemdError:
        return None
