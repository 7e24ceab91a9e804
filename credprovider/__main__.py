"""``python -m credprovider <name> [args]``: the same dispatcher as the bundled executable."""

from credprovider.entry import main

main()
