"""Images and the providers the kubelet runs for them.

``selection`` (which providers match an image, the one rule ``get``, ``explain``, ``match`` and
``validate`` share), ``misses`` (why a pattern or an auth key misses an image, the rule that
fails first), ``claims`` (what our plugin would do for it, offline), ``lookup`` (the
kubelet's lookup, step by step, running the plugins), ``startcheck`` (does a provider's binary
start as the kubelet starts it) and ``bindir`` (every provider's binary in a bin dir, checked
that way). Checks carry their provider as data.
"""
