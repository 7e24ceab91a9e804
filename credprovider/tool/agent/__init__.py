"""The fleet agent: what it does on each kind of node, as one of a cluster.

``platforms`` (each distribution's rules), ``envfile`` (kubeadm's flag files: the flags in force,
an edit of KUBELET_EXTRA_ARGS, the in-tree cloud refused or migrated), ``mounts`` (what of the
host the chart's pod mounts for each platform: platforms.yaml), ``plan`` (what the node should
hold; ``flagplan``, the kubelet's flags in it), ``apply`` and ``uninstall`` (the change;
``undo``, the uninstall as ``credprovider undo`` runs it by hand, planned and checked first),
``confirm`` (the kubelet's restart with its health wait, or the rollback),
``recovery`` (what a killed run left in the one journal: finished, or given up by uninstall),
``placement`` (whether the node's mounts let it place what the kubelet runs: writable, exec,
lasting),
``bootstrap`` (what provisioning lays for mode files, and uninstall leaves, so the kubelet starts),
``lasting`` (the platform's own lasting way where the agent may not change the node: Talos,
OpenShift; ``credprovider render`` prints it),
``state`` (what it remembers on the node), ``statecheck`` (that state read as hostile input:
loaded only if it is the agent's own), ``rewritten`` (what it wrote, still as it wrote it:
doctor says), ``restart`` and ``systemd`` (restarting the kubelet),
``watchdog`` (the node's own rollback when the agent dies mid-change), ``run`` (a run as one of
the fleet: the change, the dry run, staying until stopped; or alone, with no API server), ``health`` (is the kubelet
well), ``cluster`` (its Leases, annotations and Events on the API server, through
``tool/cluster``), ``removal`` (helm uninstall's pre-delete step: every node told to uninstall,
and waited for), ``daemon`` (the agent as a member of
the fleet: restart slots, Events, annotations) and ``termination`` (SIGTERM during a change). The
``agent`` commands (credprovider/tool/commands/agent.py, agent_pod.py) parse and print.
"""
