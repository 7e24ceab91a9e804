"""The kubelet's CredentialProviderConfig, as the kubelet reads and checks it.

``document`` (a file's text decoded as the kubelet's codec decodes it, and its error),
``model`` (the pydantic models; reading a file or directory as ``readCredentialProviderConfig``
does), ``validate`` (the kubelet's ``validateCredentialProviderConfig`` and :func:`load_config`),
``lint`` (what the kubelet accepts but will not do what was meant), ``envnames`` (an env name one
slip from one the plugin reads), ``secrets`` (a secret in a file others may read) and ``overlap``
(two providers that match one image). Pure but for reading the files (through
``node.yamldoc``); pydantic and YAML load here, never on a plugin's exec path.
"""
