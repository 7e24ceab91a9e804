"""Release tooling: portable bundles, tarballs, SBOMs and the checks that prove them."""
