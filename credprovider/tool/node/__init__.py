"""The node as it is, read as root reads what it does not trust.

``root`` (a node under ``--root``, paths that never escape it), ``access`` (reading the files an
operator names: bounded, no FIFOs, "run this as root"), ``trust`` (who may have written a file),
``kubelet_proc`` (the running kubelet, proven to be the node's), ``kubelet_flags`` (its flags and
configuration), ``kubelet_facts`` (its version and loaded config hash, read by doctor and the
agent), ``kubelet_http`` (asking the node's own kubelet over HTTP: one getter, bounded, for
doctor and the agent), ``flagfiles`` (the files flags are kept in: read and edited in place, pure), ``layouts``
(the distributions' layouts), ``units`` (the kubelet's systemd unit as systemd starts it;
``unitsyntax``: systemd's quoting, expansion and environment files),
``rancher`` (the config and bin dir k3s and RKE2 give their kubelet, from their own configuration),
``discovery`` (what they add up to), ``inuse`` (the package's plugins
a kubelet still names), ``structured`` (bounded JSON) and ``yamldoc`` (YAML as the kubelet's strict decoder takes it).
Nothing here writes to the node.
"""
