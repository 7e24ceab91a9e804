"""``python -m credprovider [<name>] [args]``: the same dispatcher as the bundled executable. The
module's own path says no program name, so without one it is the ``credprovider`` tool
(``python -m credprovider --help``), as the bundle's ``credprovider`` is."""

import sys

from credprovider.entry import TOOL_NAME, main

main([TOOL_NAME, *sys.argv[1:]])
