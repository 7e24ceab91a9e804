"""What the bundle's interpreter runs: ``_internal/credprovider-boot.py``.

The launcher execs ``_internal/credprovider-main -I -S -B <this file> <argv[0]> <args...>`` through the
bundle's own glibc loader (``_internal/ld-linux-*``):
``credprovider-main`` is CPython's own ``python3.11`` (no PyInstaller bootloader, so no second exec
and no archive to unpack), isolated from PYTHON* variables and the user's site directory. The
standard library it imports lies in ``_internal/lib/python3.11``; everything else (credprovider and
the cloud SDKs, as bytecode) lies in ``_internal/`` itself, or for pure-Python packages in
``_internal/modules.zip`` (release/layout.py): this file appends both to ``sys.path``. ``sys.argv``
becomes the launcher's own (argv[0] names the plugin), and the dispatcher runs. The plugins' own
modules come from one table, ``_internal/credprovider-exec.bin`` (release/layout.py), read once: a
finder ahead of the path finder serves them, each with the ``__file__`` and ``__path__`` its file
would have had (the tool's modules, files under ``credprovider/tool/``, are found by that path). A
failure no program expected is first checked against the bundle's whole manifest (the launcher
checks only the files start-up needs): a damaged bundle is one line naming the file.
"""

import marshal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: this runs on every exec
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

_internal = __file__.rpartition("/")[0]
sys.path += [_internal, _internal + "/modules.zip"]
try:
    with open(_internal + "/credprovider-exec.bin", "rb") as _file:
        _table = marshal.loads(_file.read())  # noqa: S302 - the bundle's own bytecode, as a .pyc
except (OSError, EOFError, ValueError, TypeError):
    _table = {}  # the import that needs it fails, and the check below names the file


class _ExecModules:
    """Finder and loader of the modules in the table: ``{name: (is package, path, code)}``."""

    @staticmethod
    def find_spec(
        name: str, path: "Sequence[str] | None" = None, target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        entry = _table.get(name)
        if entry is None:
            return None
        from _frozen_importlib import ModuleSpec  # loaded already (importlib: 0.4 ms more)

        where = f"{_internal}/{entry[1]}"
        # the class is its own loader (static methods): no instance to make on each exec
        loader = _ExecModules
        spec: ModuleSpec = ModuleSpec(name, loader, origin=where, is_package=entry[0])  # type: ignore[arg-type]
        spec.has_location = True  # __file__ is set from origin
        if entry[0]:
            spec.submodule_search_locations = [where.rpartition("/")[0]]
        return spec

    @staticmethod
    def create_module(spec: "ModuleSpec") -> None:
        return None

    @staticmethod
    def exec_module(module: "ModuleType") -> None:
        exec(marshal.loads(_table[module.__name__][2]), module.__dict__)  # noqa: S102, S302


# ahead of the path finder, behind the builtin and frozen modules' finders
sys.meta_path.insert(len(sys.meta_path) - 1, _ExecModules)
del sys.argv[0]
try:
    from credprovider.entry import main

    main()
except MemoryError:
    # Short of memory before the plugin's own handling (its imports): one line, nothing more
    # asked of memory (runtime/serve.py says the same past that point)
    _name = sys.argv[0].rpartition("/")[2] if sys.argv else "credprovider"
    sys.stderr.write(f"{_name}: error: out of memory before it could start (a limit on it?)\n")
    sys.exit(1)
except Exception:
    # The launcher checked only the files needed to get here; an unexpected failure may be a
    # damaged bundle (a file missing or cut short): then one line names the file
    # (credprovider/runtime/bundlecheck.py), else the failure is what it is.
    from credprovider.runtime.bundlecheck import damage_line

    line = damage_line()
    if line is None:
        raise
    name = sys.argv[0].rpartition("/")[2] if sys.argv else "credprovider"
    sys.stderr.write(f"{name}: {line}\n")
    sys.exit(1)
