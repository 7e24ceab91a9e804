"""Changes to a node's files (install, migrate --write, the agent), made durable: see
``durable``. Not on the exec path."""
