"""The node agent: what it would do on each kind of node (platforms), and its plan."""
