"""The runtime's own flags (verbosity, deadline, cache directory, version, help, klog's), a plugin's
own arguments, and the ``--help`` every plugin prints. No argparse: it costs every exec."""

from __future__ import annotations

from credprovider.errors import UsageError
from credprovider.runtime._typing import TYPE_CHECKING, Final
from credprovider.runtime.deadline import DEADLINE_ENV, DEFAULT_DEADLINE_SECONDS, parse_deadline
from credprovider.runtime.log import VERBOSITY_SCHEME

if TYPE_CHECKING:
    from collections.abc import Mapping

    from credprovider.runtime.provider import PluginSpec

# klog flags the upstream Go plugins accept; we accept them too so existing configs keep working.
_KLOG_BOOL_FLAGS: Final = frozenset(
    {
        "logtostderr",
        "alsologtostderr",
        "skip_headers",
        "skip_log_headers",
        "one_output",
        "add_dir_header",
        "log-json-split-stream",
    }
)


_KLOG_VALUE_FLAGS: Final = frozenset(
    {
        "stderrthreshold",
        "vmodule",
        "log-flush-frequency",
        "log_dir",
        "log_file",
        "log_file_max_size",
        "log_backtrace_at",
        "logging-format",
        "log-json-info-buffer-size",
    }
)


def parse_arguments(
    args: list[str], options: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Parse a plugin's own arguments: ``options`` maps each spelling (``--authFlow``, ``-a``) to a
    destination; every option takes a value (``--flag value`` or ``--flag=value``).

    Returns (values, positionals). Unknown flags raise :class:`UsageError`. Small on purpose:
    argparse would cost every exec a few milliseconds of imports.
    """
    values: dict[str, str] = {}
    positionals: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        name, has_value, value = arg.partition("=")
        destination = options.get(name)
        if destination is None:
            # Flags are case-sensitive (upstream's are Go flags): say so for a case slip.
            same = [known for known in options if known.lower() == name.lower()]
            hint = f"; did you mean {same[0]}?" if same else ""
            raise UsageError(f"unrecognized arguments: {arg}{hint} (see --help)")
        if not has_value:
            if i >= len(args):
                raise UsageError(f"argument {name}: expected one argument (see --help)")
            value = args[i]
            i += 1
        values[destination] = value
    return values, positionals


class CommonOptions:
    """The runtime's own flags (see :func:`split_common_args`)."""

    def __init__(self) -> None:
        self.verbosity = 0
        self.deadline: float | None = None
        self.cache_dir: str | None = None
        self.show_version = False
        self.show_help = False
        self.ignored: list[str] = []


def _flag_name(arg: str) -> tuple[str, str | None]:
    name, sep, value = arg.lstrip("-").partition("=")
    return name, (value if sep else None)


def _is_number(text: str) -> bool:
    """A few ASCII digits: ``str.isdigit`` takes "²", and ``int`` refuses it (and 4,300 digits)."""
    return text.isascii() and text.isdigit() and len(text) <= 9


def split_common_args(argv: list[str]) -> tuple[CommonOptions, list[str]]:
    """Take the runtime's own flags out of ``argv``; return them and the provider's arguments.

    Understood: ``-v N``/``-v=N``/``--v=N`` (klog verbosity), bare ``-v``/``--version`` (as the
    upstream ECR plugin), ``-h``/``--help``, ``--deadline D``, and klog's logging flags (ignored).
    """
    opts = CommonOptions()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            rest.extend(argv[i - 1 :])
            break
        if not arg.startswith("-") or arg == "-":
            rest.append(arg)
            continue
        name, value = _flag_name(arg)
        if name == "v":
            if value is None and i < len(argv) and _is_number(argv[i].lstrip("-")):
                value = argv[i]
                i += 1
            if value is None:
                opts.show_version = True
                continue
            if not _is_number(value):
                raise UsageError(f"invalid verbosity {value!r} for -v: expected a number like -v=4")
            opts.verbosity = int(value)
        elif name == "version":
            opts.show_version = True
        elif name in ("h", "help"):
            opts.show_help = True
        elif name in ("deadline", "cache-dir"):
            if value is None:
                if i >= len(argv):
                    example = "a value such as 30s" if name == "deadline" else "a directory"
                    raise UsageError(f"--{name} needs {example}")
                value = argv[i]
                i += 1
            if name == "deadline":
                opts.deadline = parse_deadline(value, "--deadline")
            else:
                opts.cache_dir = value
        elif name in _KLOG_BOOL_FLAGS:
            opts.ignored.append(arg)
        elif name in _KLOG_VALUE_FLAGS:
            if value is None and i < len(argv):
                i += 1
            opts.ignored.append(arg)
        else:
            rest.append(arg)
    return opts, rest


# --help is written for a 100-column terminal
HELP_WIDTH: Final = 100


def help_text(spec: PluginSpec) -> str:
    import textwrap  # --help only

    verbosity = textwrap.fill(
        f"log verbosity on stderr, default 0: {VERBOSITY_SCHEME}. Secrets are always redacted",
        width=HELP_WIDTH,
        initial_indent=f"  {'-v=N, --v=N':<19}",
        subsequent_indent=" " * 21,
    )
    return f"""usage: {spec.name} [flags]{" " + spec.arguments_help.splitlines()[0] if spec.arguments_help else ""}

{textwrap.fill(spec.summary, width=HELP_WIDTH)}

The kubelet runs this plugin for image pulls that match the provider's matchImages: it writes one
CredentialProviderRequest (JSON) on stdin and reads one CredentialProviderResponse from stdout.
To try it by hand:

  echo '{{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"IMAGE"}}' | {spec.name} [args] -v=4

{spec.arguments_help}
Common flags:
{verbosity}
  --deadline=D       answer (or fail) within D, default {DEFAULT_DEADLINE_SECONDS:.0f}s; env {DEADLINE_ENV}.
                     Keep it under the kubelet's fixed 60s.
  --cache-dir=DIR    keep credentials across execs in DIR (0700, files 0600), shared by concurrent
                     execs; env CREDPROVIDER_CACHE_DIR
  --version, -v      print the version and exit
  -h, --help         this help
  klog flags (--logtostderr, --vmodule, ...) are accepted and ignored.

Exit status: 0 with one JSON response on stdout; 1 with one error line on stderr and nothing
on stdout.
"""
