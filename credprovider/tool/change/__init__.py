"""Changes to a node's files, made as transactions.

``engine`` (every change as ops, carried out by one executor, as one journaled transaction
finished by the next run after a kill), ``journal`` (the one journal's transactions: by hand
beside the config, then the record of the last change; the agent's beside its state),
``journalformat`` (its names, its typed entries, read as hostile input), ``abort`` (a change by
hand that failed part way put back from its journal), ``kept`` (what a path
was before a change, as the journal and the agent's state both record it, and the op that puts
it back), ``confine`` (what a journal or record may make the node do),
``durable`` (atomic, flushed writes), ``render`` (what is written: the config for the chosen
plugins, the flags, the bundle's place), ``settings`` (what the operator gives a provider in
place of its defaults: ``--provider-settings``, the chart's ``providerSettings``), ``merge`` (the
node's config beside ours: the providers kept, whether one holds the other), ``install``
(``credprovider install``: planned, all or nothing), ``install_apply`` (its ops, applied as one
transaction), ``migrate`` (from the in-tree
cloud login: the plan and the merged config), ``flagedit`` (the kubelet's flags files as a change
leaves them), ``migrate_write``
(what ``migrate --write`` may replace, writes, and its journaled transaction),
``undo`` (``credprovider undo``: the last change reversed from its record), ``startcheck``
(would the kubelet start with the config as a change leaves it), ``results`` (what a change did
and what each step does), ``lock`` (the node's one change lock) and
``failpoint`` (the crash tests' kill points). The agent's changes (``credprovider.tool.agent``) go
through the same engine, journal, recovery, lock and checks. Not on the exec path.
"""
