"""The node as it is: the running kubelet (``kubelet_proc``), its flags and configuration
(``kubelet_flags``), the distributions' layouts (``layouts``), and what they add up to
(``discovery``). Read-only: nothing here writes to the node."""
