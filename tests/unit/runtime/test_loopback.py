"""Test mode's connect guard: on before anything can connect, without importing socket up front.

Each case runs in a fresh interpreter (the guard patches the process's socket module for good). No
case connects anywhere: a refused address is refused before the connect system call, and the allowed
one is a loopback port nobody listens on.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from release.bundle import REPO

PROBE = """
import sys
from credprovider.runtime import loopback

{before}
notice = loopback.activate_from_env({environ!r})
print("socket loaded after activation:", "socket" in sys.modules)
import socket
for address in ("10.255.255.1", "169.254.169.254", "127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        try:
            sock.connect((address, 9))
            print(address, "connected")
        except loopback.LoopbackError as exc:
            print(address, "blocked:", exc)
        except OSError as exc:
            print(address, "allowed:", type(exc).__name__)
print("resolved:", socket.getaddrinfo("registry.example", 443)[0][4])
"""


def _python(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter that sees only this repository; its stdout lines.

    It runs in a network namespace of its own (``unshare --net``): should the guard ever fail, the
    non-loopback connects below still cannot leave this machine."""
    result = subprocess.run(
        ["unshare", "--net", sys.executable, "-S", "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _probe(before: str, environ: dict[str, str]) -> list[str]:
    return _python(PROBE.format(before=before, environ=environ))


@pytest.mark.parametrize(
    ("before", "socket_loaded"),
    [
        ("", False),  # the plugin's own path: socket comes later, with the SDK
        ("import socket", True),  # something loaded socket first
    ],
)
def test_guard_refuses_non_loopback_whenever_socket_is_imported(
    before: str, socket_loaded: bool
) -> None:
    environ = {
        "CREDPROVIDER_TEST_LOOPBACK_ONLY": "1",
        "CREDPROVIDER_TEST_RESOLVE": "registry.example=127.0.0.1:8443",
    }
    lines = _probe(before, environ)
    assert lines[0] == f"socket loaded after activation: {socket_loaded}"
    assert lines[1] == (
        "10.255.255.1 blocked: blocked connection to non-loopback address 10.255.255.1 (test mode)"
    )
    assert lines[2].startswith("169.254.169.254 blocked:")
    assert lines[3].startswith("127.0.0.1 allowed:")  # not refused by the guard (lo is down)
    assert lines[4] == "resolved: ('127.0.0.1', 8443)"


def test_without_test_mode_nothing_is_patched() -> None:
    lines = _python(
        "import sys\n"
        "from credprovider.runtime import loopback\n"
        "finders = list(sys.meta_path)\n"
        "assert loopback.activate_from_env({}) is None\n"
        "import socket\n"
        "print(sys.meta_path == finders, getattr(socket.socket, '_credprovider_guarded', False))\n"
    )
    assert lines == ["True False"]


def test_the_resolve_override_is_removed_again() -> None:
    lines = _python(
        "import socket\n"
        "from credprovider.runtime import loopback\n"
        "original = socket.getaddrinfo\n"
        "remove = loopback.install_resolve_map({'registry.example': ('127.0.0.2', 8443)})\n"
        "print(socket.getaddrinfo('registry.example', 443)[0][4])\n"
        "print(socket.getaddrinfo('127.0.0.1', 443)[0][4])\n"
        "remove()\n"
        "print(socket.getaddrinfo is original)\n"
    )
    assert lines == ["('127.0.0.2', 8443)", "('127.0.0.1', 443)", "True"]


LITERALS = ["127.0.0.1", "127.255.255.254", "127.1.2.3", "::1", "[::1]", "::1%lo", "0:0:0:0:0:0:0:1",
            "127.000.0.1", "127.0.0.01", "127.0.0.256", "127.0.0", "127.0.0.1.", "１２７.0.0.1",
            "128.0.0.1", "10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "::2", "", "localhost",
            "127.0.0.1 ", "+127.0.0.1", "127.-1.0.1"]  # fmt: skip


@pytest.mark.parametrize("literal", LITERALS)
def test_is_loopback_address_is_ipaddress_is_loopback(literal: str) -> None:
    import ipaddress

    from credprovider.runtime.loopback import is_loopback_address

    try:
        expected = ipaddress.ip_address(literal.strip("[]").split("%")[0]).is_loopback
    except ValueError:
        expected = False
    assert is_loopback_address(literal) is expected


def test_activating_test_mode_imports_no_costly_module() -> None:
    environ = {"CREDPROVIDER_TEST_RESOLVE": "sts.googleapis.com=127.0.0.1:8443,x.example=[::1]:9"}
    code = (
        "import sys; from credprovider.runtime import loopback\nfrom credprovider.runtime import redact\n"
        f"print(loopback.activate_from_env({environ!r}))\n"
        "redact.safe_line('a warning without a token')\n"
        "print(sorted({'ipaddress', 're', 'enum', 'functools', 'socket'} & set(sys.modules)))"
    )
    lines = _python(code)
    assert lines[-1] == "[]", lines
