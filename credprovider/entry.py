"""Multi-call entry point: one executable, dispatched on the name it was started as.

The bundle installs ``ecr-credential-provider``, ``acr-credential-provider``, ``auth-provider-gcp``,
``registry-credential-provider`` and ``credprovider`` as symlinks to one executable; the kubelet runs ``<bin-dir>/<name>`` so
``basename(argv[0])`` says which plugin to run. Only that plugin's module (and so only its cloud SDK)
is imported. ``credprovider <name> ...`` and ``python -m credprovider <name> ...`` work too.
"""

from __future__ import annotations

import posix  # the interpreter holds it from its start: os is not imported on the exec path
import sys

# typing costs more to import than the rest of --version: annotations only (see credprovider/runtime/_typing.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

# The one table of clouds: plugin name -> its package. The package's ``main`` module has the
# plugin's ``SPEC`` (a runtime.provider.PluginSpec, served by SERVE_MODULE); its ``descriptor``
# module tells the tool about it (credprovider/cloud.py). Adding a cloud is a folder and
# a line here.
PLUGIN_PACKAGES: Final = {
    "ecr-credential-provider": "credprovider.aws",
    "acr-credential-provider": "credprovider.azure",
    "auth-provider-gcp": "credprovider.gcp",
    "registry-credential-provider": "credprovider.registries",
}
PLUGIN_MODULES: Final = {name: f"{package}.main" for name, package in PLUGIN_PACKAGES.items()}
TOOL_NAME: Final = "credprovider"
PROGRAM_MODULES: Final = {**PLUGIN_MODULES, TOOL_NAME: "credprovider.tool.cli"}
VERSION_FLAG: Final = "--version"
# Set to 1 by the tool's start check (validate --bin-dir, install, the agent): a plugin's --version
# reads its settings as a pull reads them (its args and the files they name, ECR's profile files),
# with no args too, and refuses them as a pull would; nothing is fetched. Without it, --version
# with args only parses them, and alone is answered before any of the plugin's code loads.
START_CHECK_ENV: Final = "CREDPROVIDER_START_CHECK"
SERVE_MODULE: Final = "credprovider.runtime.serve"
# How this executable refuses a name it does not know (the tool's start check recognises it).
UNKNOWN_PROGRAM_MARK: Final = "unknown program name; run as one of"
# A second provider of a plugin (another identity: other args, env or node file) needs a name of
# its own, as the kubelet execs <bin-dir>/<provider name>: <plugin name>-<suffix>, the suffix of
# letters, digits, '-', '_' and '.', starting with a letter or digit.
SUFFIX_CHARACTERS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
)
SUFFIXED_FORM: Final = "<plugin name>-<suffix>"


def register_cloud(name: str, package: str) -> None:
    """Add a cloud to the table at run time: ``name`` is its plugin name, ``package`` its folder
    (with ``main`` and ``descriptor`` modules). For a cloud that lives outside this tree (the
    tests' example cloud); called before :func:`main` and before the tool reads the catalog."""
    PLUGIN_PACKAGES[name] = package
    PLUGIN_MODULES[name] = f"{package}.main"
    PROGRAM_MODULES[name] = f"{package}.main"


def program_name(argv0: str) -> str:
    """The program name for ``argv[0]``: its basename without a Windows ``.exe`` suffix."""
    return without_exe(argv0.rpartition("/")[2])


def without_exe(name: str) -> str:
    """``name`` without a Windows ``.exe`` suffix (the kubelet's config may name one)."""
    return name[:-4] if name.lower().endswith(".exe") else name


def plugin_of(name: str) -> str | None:
    """The plugin a program name runs: the plugin's own name, or a plugin name with a suffix
    (``ecr-credential-provider-prod``: a second provider of that plugin); ``None`` otherwise."""
    if name in PLUGIN_MODULES:
        return name
    for plugin in PLUGIN_MODULES:
        suffix = name[len(plugin) + 1 :]
        if (
            name.startswith(plugin + "-")
            and suffix[:1].isalnum()
            and SUFFIX_CHARACTERS.issuperset(suffix)
        ):
            return plugin
    return None


def resolve(argv: list[str]) -> tuple[str, list[str]] | None:
    """Pick the program (the name it runs as) and its arguments, or ``None`` when no known name
    was given."""
    name = program_name(argv[0]) if argv else ""
    if plugin_of(name):
        return name, argv[1:]
    if len(argv) > 1 and (argv[1] in PROGRAM_MODULES or plugin_of(argv[1])):
        return argv[1], argv[2:]
    if name == TOOL_NAME:
        return name, argv[1:]
    return None


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    chosen = resolve(argv)
    if chosen is None:
        sys.stderr.write(
            f"{program_name(argv[0]) if argv else TOOL_NAME}: {UNKNOWN_PROGRAM_MARK} "
            f"{', '.join(PROGRAM_MODULES)} (a symlink to this executable), or as "
            f"{SUFFIXED_FORM} for a second provider of a plugin (e.g. "
            f"{next(iter(PLUGIN_MODULES))}-prod), or pass the name as the first argument\n"
        )
        sys.exit(1)
    name, args = chosen
    if args == [VERSION_FLAG] and not (
        plugin_of(name) and posix.environ.get(START_CHECK_ENV.encode())
    ):
        # What every program prints for --version, answered before any program is imported: the
        # cheapest exec, and the one an operator runs first.
        from credprovider.version import version_text

        code = print_out(name, version_text(name))
        if code:
            sys.exit(code)
        return
    plugin = plugin_of(name)
    module = PROGRAM_MODULES[plugin or name]
    # __import__ rather than importlib.import_module: the importlib package costs every exec its
    # import, and this is the only place the exec path would need it.
    __import__(module)
    if plugin is None:
        sys.modules[module].main(args)
        return
    # A plugin's main module is its PluginSpec; the one runtime serves every plugin. Under a
    # suffixed name it runs as that name: its lines say it, and its cache entries are its own.
    spec = sys.modules[module].SPEC
    if name != plugin:
        spec = spec._replace(name=name)
    __import__(SERVE_MODULE)
    sys.modules[SERVE_MODULE].main(spec, args)


# A whole text on stdout when stdout may take nothing: closed at exec (``>&-``), a full disk
# (``/dev/full``), a reader gone. Here, for every program's ``--version`` (which imports nothing
# else: ``make bench`` times that exec) and the tool.


def print_out(program: str, text: str) -> int:
    """``text`` on stdout, flushed: exit status 0; or 1 (141 for a reader that went away) after
    one line on stderr, with nothing left for Python to fail on at exit (``--version >/dev/full``
    was a traceback)."""
    if sys.stdout is None:
        return stdout_failed(program)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    except BrokenPipeError:
        drop_stdout()
        return 141  # 128 + SIGPIPE, as a shell reports it
    except OSError as exc:
        return stdout_failed(program, exc)


def stdout_failed(program: str, exc: OSError | None = None) -> int:
    """One line for a stdout that took nothing (``exc``; ``None``: it is closed), what is still
    buffered for it dropped: exit status 1."""
    why = "standard output is closed" if exc is None else exc.strerror or str(exc)
    drop_stdout()
    say_quietly(f"{program}: cannot write to standard output: {why}\n")
    return 1


def drop_stdout() -> None:
    """What is still buffered for stdout goes to /dev/null: the write that failed would fail
    again at exit, where Python prints it as an exception ignored."""
    import os

    try:
        if sys.stdout is not None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def say_quietly(line: str) -> None:
    """``line`` on stderr, if it can be written at all."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(line)
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
