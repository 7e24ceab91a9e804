"""Changes to a node's files, made as transactions.

``render`` (what is written: the config for the chosen plugins, the flags, the bundle's place),
``install`` (``credprovider install``: planned, then applied all or nothing), ``migrate`` (from the
in-tree cloud login: the plan and the merged config), ``results`` (what a change did and what each
step does), ``durable`` (atomic, flushed writes), ``journal`` (a change's journal beside the file it
changes, replayed after a kill), ``lock`` (the node's one change lock) and ``failpoint`` (the crash
tests' kill points). The agent's changes (``credprovider.tool.agent``) use the same writes, lock
and checks. Not on the exec path.
"""
