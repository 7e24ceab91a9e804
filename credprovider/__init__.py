"""credprovider: kubelet image credential provider plugins for AWS ECR, Azure ACR and Google."""

__version__ = "0.1.0"
