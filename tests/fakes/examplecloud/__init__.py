"""A cloud that exists only in the tests, to show what adding a cloud takes: this folder (a
descriptor and a plugin) and one line in ``credprovider.entry.PLUGIN_PACKAGES``, which
tests/integration/test_new_cloud.py adds. Its registries hand out the token kept in a file on the
node, so it needs no emulator."""
