"""What the bundle's interpreter runs: ``_internal/credprovider-boot.py``.

The launcher execs ``_internal/credprovider-main -I -S -B <this file> <argv[0]> <args...>`` through the
bundle's own glibc loader (``_internal/ld-linux-*``):
``credprovider-main`` is CPython's own ``python3.11`` (no PyInstaller bootloader, so no second exec
and no archive to unpack), isolated from PYTHON* variables and the user's site directory. The
standard library it imports lies in ``_internal/lib/python3.11``; everything else (credprovider and
the cloud SDKs, as bytecode) lies in ``_internal/`` itself, or for pure-Python packages in
``_internal/modules.zip`` (release/layout.py): this file appends both to ``sys.path``. ``sys.argv``
becomes the launcher's own (argv[0] names the plugin), and the dispatcher runs.
"""

import sys

_internal = __file__.rpartition("/")[0]
sys.path += [_internal, _internal + "/modules.zip"]
del sys.argv[0]
from credprovider.entry import main  # noqa: E402

main()
