"""The cluster's API server, as the tool reads and writes it: below the agent, fleet and doctor.

* ``connect``: a client from a kubeconfig or the pod's service account, and one error line for
  whatever a call meets (:class:`~credprovider.tool.cluster.connect.ClusterError`);
* ``kubeconfigs``: kubeconfig files read as node files, ``$KUBECONFIG``'s list merged as kubectl;
* ``bounds``: every answer read under bounds before the client library parses it;
* ``clienttls``: the CA and client certificate the client speaks TLS with, no secret in a file;
* ``route``: through which proxy and under which TLS name the API server is reached;
* ``execcred``: a kubeconfig user's exec credential plugin, run as client-go runs it, bounded;
* ``nodes``: what a Node object says of its cloud (providerID, the taint a cloud controller
  manager removes), read with the node's own credentials;
* ``reviews``: what the API server lets the client do (may a node request service account tokens
  for an audience).
"""
