"""The exec runtime shared by every plugin: stdin → provider → stdout, written once for all clouds.

A provider implements :class:`~credprovider.runtime.provider.Provider` and never touches stdin,
stdout or the process exit code. One module per job:

* ``provider``: the seam: the runtime parses the image once, the Provider makes a pure ``Plan``
  (keys, identity, its own decisions), the caching decorator looks it up, and on a miss the
  provider fulfils that same plan; Credentials, Context, PluginSpec, and the one cache policy
  (:func:`~credprovider.runtime.provider.cache_duration_for`);
* ``serve``: read the request, ask the provider, write one response or one error line
  (``stdio``: standard streams closed at exec);
* ``api``: the kubelet's wire API, strictly decoded and encoded; ``imageref`` (images as the
  kubelet normalizes them) and ``matching`` (its matchImages rules and the keyring);
* ``deadline``: the time left, counted from exec, always shorter than the kubelet's 60 s kill;
  ``retry``: bounded retries within it;
* ``http``: the plugins' own HTTP/1.1 client and the one transport seam (``http1``: its wire
  format and its one error, pure over bytes); ``answer``: the one
  bounded reader of what an endpoint answers; ``requests_session``: the same caps for the SDKs
  over requests; ``tls``: the CA bundle a setting names, read as a node file, in a verified
  context;
* ``caching``: the persistent cache as a decorator around any provider (``cachestore``: its files);
* ``nodefile``: the one reader of node files (regular files only, capped); ``child``: the one
  runner of a program credprovider does not control (a credential helper an SDK would run, and
  the programs the tool runs from an operator's config), bounded in time and output;
* ``log``: klog-style verbosity on stderr, every line scrubbed; SDK ``logging`` routed into it
  (``importhook``: code run after a module's first import);
* ``redact``: every secret seen replaced by its redacted form before text is printed;
  ``excerpt``: how much of an input a message quotes; ``advice``: what to do, for every cloud;
* ``args``: the runtime's own flags and a plugin's, and ``--help``; ``goformat``: Go's text forms;
  ``cjson`` and ``_typing``: json and typing without their import cost;
* ``loopback``: test mode (loopback-only connects, the resolve map); ``_os``: os without its
  import cost;
* ``bundlecheck``: whether the bundle this process runs from is whole, asked after a failed start.

Stdlib only: nothing here may import an SDK, pydantic or YAML.
"""
