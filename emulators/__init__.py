"""The loopback emulators: each cloud's services (ECR and STS; IMDS, Entra ID and ACR; the GCE
metadata server and STS), the HTTP and TLS they serve with, the kubelet's half of the exec
protocol, and the Go builds of the kubelet harness and the upstream plugins.

Product infrastructure, not tests: ``make demo``, ``make bench``, the contract suite and the tests
all import it. It binds loopback only and reaches nothing else.
"""
