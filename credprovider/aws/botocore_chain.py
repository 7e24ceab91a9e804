"""The botocore session and the credential chain it resolves, made by the plugin so that nothing
botocore would read or run on the node is unbounded: its models are only those it ships, the
profile files and boto's config are checked before it parses them, the web identity, container
token and EC2 tools' files are read by the node-file reader, and a profile's
``credential_process`` runs under the deadline (aws/process.py). botocore itself is
imported here and in aws/botocore_api.py, its calls; nowhere else."""

from __future__ import annotations

import errno
import logging
import os
import stat

import botocore.credentials
import botocore.session
import botocore.utils

from credprovider.aws.direct import PROFILE_FILES
from credprovider.aws.process import bounded_popen
from credprovider.aws.tokenapi import SettingsError
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final
from credprovider.runtime.nodefile import (
    UnusableFileError,
    reason,
    require_node_file,
    setting_file_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# botocore loggers that print raw request/response bodies at DEBUG: the token and the assumed role's
# keys would be printed before the plugin can register them for redaction, so they stay at INFO.
BODY_LOGGERS: Final = ("botocore.parsers", "botocore.endpoint", "botocore.auth")
# The legacy files botocore's chain reads last (credentials.py: OriginalEC2Provider, BotoProvider).
EC2_TOOLS_FILE: Final = "AWS_CREDENTIAL_FILE"
BOTO_CONFIG: Final = "BOTO_CONFIG"
# The container credentials' authorization token: a file, else the value (botocore's ContainerProvider).
CONTAINER_TOKEN_FILE: Final = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
CONTAINER_TOKEN: Final = "AWS_CONTAINER_AUTHORIZATION_TOKEN"


def session(environ: Mapping[str, str]) -> Any:
    """A botocore session, its body loggers kept quiet. botocore reads a token file whole with
    ``open().read()`` (a FIFO would hold it to the deadline, ``/dev/zero`` until memory runs out):
    its two token readers are given the node-file reader (:func:`read_for_it`), and the profile
    files it would parse, named or at their defaults, are checked here."""
    for name in BODY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    for setting, default, what in PROFILE_FILES:
        # as botocore's configloader names it: variables, then ~
        named = environ.get(setting)  # set but empty: botocore reads no file
        path = os.path.expanduser(os.path.expandvars(f"~/{default}" if named is None else named))
        if path and _regular(path):
            _require_parseable(what, path, setting, named=named is not None)
        elif named and os.path.lexists(path):  # botocore would skip it without a word
            _require_parseable(what, path, setting, named=True)
    made = botocore.session.get_session()
    made.register_component("data_loader", _bundled_models())
    return made


def _require_parseable(what: str, path: str, setting: str, *, named: bool) -> None:
    """A regular file botocore would parse whole is at most a node file's cap: else one line
    naming it and ``setting``, which named it or, unset, left botocore its default."""
    try:
        require_node_file(path)
    except (OSError, ValueError) as exc:
        if named:
            raise UnusableFileError(what, path, setting, reason(exc)) from None
        raise ProviderError(
            f"{what} {path} (botocore's default, {setting} being unset) cannot be used: "
            f"{reason(exc)}",
            "fix or remove it",
        ) from None


def _bundled_models() -> Any:
    """botocore's model loader for the models botocore ships only. Its default also searches
    ``AWS_DATA_PATH`` (or a profile's ``data_path``) and ``~/.aws/models`` first, reading any model
    found there whole (a 2 GiB file there was a ``MemoryError``, a gzipped one inflated without a
    bound) and calling ECR by its API and endpoint rules (a broken one was blamed on a proxy):
    the AWS SDK for Go, whose plugin this replaces, has no such search."""
    from botocore.loaders import Loader

    return Loader(extra_search_paths=[Loader.BUILTIN_DATA_PATH], include_default_search_paths=False)


def refused_setting(exc: ValueError) -> SettingsError:
    """botocore's bare ``ValueError`` for a setting it will not use (an endpoint URL, a container
    credentials URL), as the settings' error: the node's to fix, not an answer's fault."""
    from credprovider.runtime.provider import one_line

    return SettingsError(f"botocore cannot use the settings: {one_line(exc)}")


def read_for_it(
    sdk: Any, environ: Mapping[str, str], region: str, remaining: Callable[[], float]
) -> None:
    """Makes the credential chain of ``sdk`` (once, before a client resolves it), its two token
    files read through the node-file reader, its helpers run within ``remaining()`` (the fetch's
    time left). It is made as botocore makes it at a first client, for that client's region (its
    STS clients', in a role chain, are in that region). Making it reads the profile files:
    botocore's errors (a profile that does not exist, a file it cannot parse) are the caller's to
    say."""
    if sdk.__dict__.get("credprovider_chain"):
        return
    try:
        resolver = botocore.credentials.create_credential_resolver(sdk, region_name=region)
    except ValueError as exc:  # an IMDS endpoint it cannot use (AWS_EC2_METADATA_SERVICE_ENDPOINT)
        raise refused_setting(exc) from None
    # botocore's seams for both (the constructor's token_loader_cls; the headers' one method)
    tokens = _web_identity_tokens(environ)
    resolver.get_provider("assume-role-with-web-identity")._token_loader_cls = tokens
    container = resolver.get_provider("container-role")
    container._build_headers = _container_headers(container._environ)
    # a role chain's source profile gets a web identity provider (and a credential_process
    # provider) of its own, made when it is resolved (ProfileProviderBuilder): each is given the
    # same reader, or runner, as it is made
    builder = resolver.get_provider("assume-role")._profile_provider_builder
    _each_made_with(builder, "_create_web_identity_provider", "_token_loader_cls", tokens)
    # a profile's credential_process, and a source profile's, run under the deadline and caps
    popen = bounded_popen(remaining)
    resolver.get_provider("custom-process")._popen = popen
    _each_made_with(builder, "_create_process_provider", "_popen", popen)
    # IAM Identity Center's and `aws login`'s cached tokens, read through the node-file reader by
    # the providers made already and by those a source profile makes
    sso, login = _token_caches()
    builder._sso_token_cache, builder._login_token_cache = sso, login
    made = resolver.get_provider("sso")
    made._token_cache = made._token_provider._cache = sso
    made._token_provider._token_loader = botocore.utils.SSOTokenLoader(cache=sso)
    resolver.get_provider("login")._token_cache = login
    # the legacy files, parsed when the chain reaches them (their constructors' parser seams)
    resolver.get_provider("ec2-credentials-file")._parser = _ec2_tools_file
    resolver.get_provider("boto-config")._ini_parser = _boto_config(environ)
    sdk.register_component("credential_provider", resolver)
    sdk.__dict__["credprovider_chain"] = True


def _token_caches() -> tuple[Any, Any]:
    """botocore's token caches for IAM Identity Center (``~/.aws/sso/cache``) and ``aws login``,
    whose entries botocore read with ``open()`` and ``json.load`` whole (a 2 GiB file there was a
    ``MemoryError``): read here as node files under the plugins' JSON caps. What botocore treats
    as no token (a file that is not there, not a regular file, not JSON) is still no token; a file
    past the cap is one line naming it."""
    from botocore.tokens import SSOTokenProvider, _sso_json_dumps
    from botocore.utils import JSONFileCache, get_login_token_cache_directory

    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.nodefile import NodeFileError, read_node_text

    class NodeFileCache(JSONFileCache):  # type: ignore[misc]
        def __getitem__(self, cache_key: str) -> Any:
            path = self._convert_cache_key(cache_key)
            try:
                return decode_json(read_node_text(path))
            except NodeFileError as exc:
                if exc.errno != errno.EFBIG:
                    raise KeyError(cache_key) from None
                raise ProviderError(
                    f"botocore's token cache file {path} cannot be used: {exc.strerror}",
                    "remove it (signing in again writes it anew)",
                ) from None
            except (OSError, ValueError, BadAnswer):
                raise KeyError(cache_key) from None

    return (
        NodeFileCache(SSOTokenProvider._SSO_TOKEN_CACHE_DIR, dumps_func=_sso_json_dumps),
        NodeFileCache(get_login_token_cache_directory()),
    )


def _ec2_tools_file(path: str) -> dict[str, str]:
    """botocore's parser of the EC2 tools' credentials file (``AWS_CREDENTIAL_FILE``), which opened
    the path blindly (a FIFO held it to the deadline) and read it whole: read here as a node
    file, parsed by botocore. One that is not there stops the chain, as in botocore, whose
    ``ConfigNotFound`` was said as the service failing: here it is the setting to fix."""
    from botocore.utils import parse_key_val_file_contents

    text = setting_file_text("the EC2 tools' credentials file", path, EC2_TOOLS_FILE)
    parsed: dict[str, str] = parse_key_val_file_contents(text)
    return parsed


def _boto_config(environ: Mapping[str, str]) -> Callable[[str], dict[str, Any]]:
    """botocore's parser of boto's config (``BOTO_CONFIG``, else ``/etc/boto.cfg`` and ``~/.boto``,
    where a GCE image keeps gsutil's settings): checked as a node file before botocore parses a
    regular one (it read one of any size whole); anything else is skipped, as botocore skips it."""
    from botocore.configloader import raw_config_parse

    named = environ.get(BOTO_CONFIG) is not None

    def parse(path: str) -> dict[str, Any]:
        full = os.path.expanduser(os.path.expandvars(path))
        if _regular(full):
            _require_parseable("boto's config", full, BOTO_CONFIG, named=named)
        parsed: dict[str, Any] = raw_config_parse(path)
        return parsed

    return parse


def _each_made_with(builder: Any, factory: str, attribute: str, value: Any) -> None:
    """Every provider ``builder.factory`` makes from now on has ``attribute`` set to ``value``."""
    made = getattr(builder, factory)

    def making(*args: Any, **kwargs: Any) -> Any:
        provider = made(*args, **kwargs)
        setattr(provider, attribute, value)
        return provider

    setattr(builder, factory, making)


def _regular(path: str) -> bool:
    """Whether botocore would parse the profile file at ``path`` (it skips what is not a file)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _web_identity_tokens(environ: Mapping[str, str]) -> Callable[[str], Callable[[], str]]:
    """botocore's web identity token loader (``FileWebIdentityTokenLoader``'s contract: made with
    the path, called for the token), reading through the node-file reader."""

    def loader(path: str) -> Callable[[], str]:
        env = "AWS_WEB_IDENTITY_TOKEN_FILE"
        setting = env if environ.get(env) == path else "the profile's web_identity_token_file"
        return lambda: setting_file_text("the web identity token file", path, setting)

    return loader


def _container_headers(environ: Mapping[str, str]) -> Callable[[], dict[str, str] | None]:
    """``ContainerProvider._build_headers`` as botocore has it (the token file first, then the
    token itself, one line), the file read through the node-file reader."""

    def build() -> dict[str, str] | None:
        if CONTAINER_TOKEN_FILE in environ:
            path = environ[CONTAINER_TOKEN_FILE]
            where = f"the file {path} named by {CONTAINER_TOKEN_FILE}"
            token = setting_file_text("the container token file", path, CONTAINER_TOKEN_FILE)
        elif CONTAINER_TOKEN in environ:
            where, token = CONTAINER_TOKEN, environ[CONTAINER_TOKEN]
        else:
            return None
        if "\r" in token or "\n" in token:  # botocore's rule: a header value is one line
            raise ProviderError(
                f"the container authorization token in {where} holds a line break",
                "write it as one line without a trailing newline",
            )
        return {"Authorization": token}

    return build
