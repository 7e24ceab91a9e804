"""Images and the providers the kubelet runs for them.

``selection`` (which providers match an image, the one rule ``get``, ``explain``, ``match`` and
``validate`` share), ``claims`` (what our plugin would do for it, offline), ``lookup`` (the
kubelet's lookup, step by step, running the plugins) and ``startcheck`` (does a provider's binary
start as the kubelet starts it). Checks carry their provider as data.
"""
