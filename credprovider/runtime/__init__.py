"""The exec runtime shared by every plugin: stdin → provider → stdout, written once for all clouds.

A provider implements :class:`~credprovider.runtime.provider.Provider` and never touches stdin,
stdout or the process exit code. One module per job:

* ``provider``: the seam: the runtime parses the image once, the Provider makes a pure ``Plan``
  (keys, identity, its own decisions), the caching decorator looks it up, and on a miss the
  provider fulfils that same plan; Credentials, Context, PluginSpec, and the one cache policy
  (:func:`~credprovider.runtime.provider.cache_duration_for`);
* ``deadline``: the time left, counted from exec, always shorter than the kubelet's 60 s kill;
* ``log``: klog-style verbosity on stderr, every line scrubbed; SDK ``logging`` routed into it;
* ``args``: the runtime's own flags and a plugin's, and ``--help``;
* ``caching``: the persistent cache as a decorator around any provider (``cachestore``: its files);
* ``serve``: read the request, ask the provider, write one response or one error line;
* ``redact``: every secret seen replaced by its redacted form before text is printed.

Stdlib only: nothing here may import an SDK, pydantic or YAML.
"""
