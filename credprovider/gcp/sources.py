"""The subject token sources of a Workload Identity Federation config (``credential_source``)
that read node files or run a program, given to google-auth in place of its own: a ``file``
(:func:`bounded_file_supplier`), an ``executable`` (:func:`bounded_executable`) and an X.509
``certificate`` (:func:`bounded_certificate`). Each reads as every node file on the exec path is
read (runtime/nodefile.py) and runs what it runs under the deadline (runtime/child.py); google-auth
keeps its protocol: the opt-ins, the variables, the parsing of answers, the exchange at STS.
"""

from __future__ import annotations

from credprovider.runtime._typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


def bounded_file_supplier(source: dict[str, Any]) -> Any:
    """The subject token of a Workload Identity Federation ``credential_source.file``, read as
    every node file on the exec path is (runtime/nodefile.py: a regular file, at most its cap;
    never a FIFO, a device or ``/dev/zero`` read into memory), its ``format`` as google-auth
    takes it (``text``, or ``json`` and ``subject_token_field_name``)."""
    from google.auth import exceptions, identity_pool

    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.nodefile import NodeFileError, read_node_text

    path = str(source["file"])
    form = source.get("format") or {}
    kind = str(form.get("type", "text")) if isinstance(form, dict) else "text"
    field = form.get("subject_token_field_name") if isinstance(form, dict) else None
    if kind == "json" and not field:
        raise ValueError("credential_source.format json names no subject_token_field_name")

    class Supplier(identity_pool.SubjectTokenSupplier):
        def get_subject_token(self, context: Any, request: Any) -> str:
            try:
                text = read_node_text(path)
            except NodeFileError as exc:
                raise exceptions.RefreshError(
                    f"the subject token file {path} {exc.strerror}"
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                why = getattr(exc, "strerror", None) or "is not UTF-8 text"
                raise exceptions.RefreshError(f"the subject token file {path}: {why}") from None
            if kind != "json":
                return text
            try:
                token = decode_json(text).get(field) if text.strip() else None
            except (BadAnswer, ValueError, AttributeError):
                token = None
            if not isinstance(token, str) or not token:
                raise exceptions.RefreshError(
                    f"the subject token file {path} is not JSON with a string {field!r}"
                )
            return token

    return Supplier()


def bounded_executable() -> Any:
    """google-auth's executable-sourced credentials (``credential_source.executable``), the helper
    run by :func:`~credprovider.runtime.child.run_bounded` instead of ``subprocess.run``: within
    the fetch's time left as well as the config's ``timeout_millis`` (google-auth's own bound,
    30 s by default, may outlast the deadline, whose line then blamed the network and left the
    helper running), its output capped, and its ``output_file`` read as a node file. Everything
    else is google-auth's: its opt-in (GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1), the
    variables the helper is given, and the parsing of its answer."""
    import os
    import shlex

    from google.auth import exceptions, pluggable

    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.child import ChildFailed, TooSlow, run_helper
    from credprovider.runtime.excerpt import clip
    from credprovider.runtime.nodefile import read_node_file
    from credprovider.runtime.redact import printable

    def cached(path: str) -> Any:
        """The output file's answer, or None where google-auth would ignore it."""
        try:
            return decode_json(read_node_file(path))
        except (OSError, ValueError, BadAnswer):
            return None

    class Executable(pluggable.Credentials):
        def __init__(self, *args: Any, remaining: Callable[[], float], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._remaining = remaining

        def _constructor_args(self) -> Any:  # the copies google-auth makes (impersonation)
            return {**super()._constructor_args(), "remaining": self._remaining}

        def retrieve_subject_token(self, request: Any) -> Any:
            self._validate_running_mode()
            if self.interactive:
                raise exceptions.RefreshError("an interactive executable cannot run for a plugin")
            output_file = self._credential_source_executable_output_file
            if output_file:
                response = cached(output_file)
                if isinstance(response, dict) and "expiration_time" in response:
                    try:
                        return self._parse_subject_token(response)
                    except (exceptions.MalformedError, exceptions.InvalidValue):
                        raise
                    except exceptions.RefreshError:
                        pass  # expired, or unsuccessful: the helper is run (google-auth's rule)
            env = os.environ.copy()
            self._inject_env_variables(env)
            env["GOOGLE_EXTERNAL_ACCOUNT_REVOKE"] = "0"
            command = str(self._credential_source_executable_command)
            argv = shlex.split(command)
            said = f"the executable {clip(printable(argv[0] if argv else command))}"
            own = float(self._credential_source_executable_timeout_millis) / 1000
            try:
                finished = run_helper(
                    argv, self._remaining(), limit=own, env=env, merge_stderr=True
                )
            except TooSlow as exc:
                bound = "the deadline" if exc.by_deadline else f"its timeout_millis ({own:g}s)"
                raise exceptions.RefreshError(
                    f"{said} did not answer within {bound}: stopped"
                ) from None
            except ChildFailed as exc:
                raise exceptions.RefreshError(f"{said} {exc.said}") from None
            if finished.code != 0:
                complaint = finished.complaint() or "(no output)"
                raise exceptions.RefreshError(
                    f"{said} exited with status {finished.code}: {complaint}"
                )
            try:
                response = decode_json(finished.stdout) if finished.stdout.strip() else None
            except BadAnswer as exc:
                raise exceptions.RefreshError(
                    f"{said} answered JSON that {exc.predicate}"
                ) from None
            except ValueError:
                raise exceptions.RefreshError(f"{said} answered no JSON") from None
            if not response and output_file:
                response = cached(output_file)
            if not isinstance(response, dict):
                raise exceptions.RefreshError(f"{said} answered no JSON object")
            try:
                return self._parse_subject_token(response)
            except (KeyError, TypeError) as exc:
                raise exceptions.RefreshError(
                    f"{said} answered a field of the wrong kind ({type(exc).__name__})"
                ) from None

    return Executable


def bounded_certificate() -> Any:
    """google-auth's X.509 federation (``credential_source.certificate``) with every file it reads
    read or checked first as a node file (runtime/nodefile.py): the certificate config (read here:
    the certificate's and key's paths come from it), the certificate (read here and given to
    google-auth), the key and the trust chain (checked here: OpenSSL loads the key by its path and
    google-auth opens the chain). google-auth read each whole and blocking, a FIFO held the plugin
    to its deadline (whose line blamed the network), and a file it could not use was "Failed to
    retrieve or parse certificate". The config is found as google-auth finds it
    (``certificate_config_location``, else GOOGLE_API_CERTIFICATE_CONFIG, else gcloud's
    ``certificate_config.json``) and read by the same rules (``cert_configs.workload``)."""
    import os

    from cryptography.exceptions import UnsupportedAlgorithm
    from google.auth import _cloud_sdk, exceptions, identity_pool
    from google.auth.transport import _mtls_helper

    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.excerpt import clip
    from credprovider.runtime.nodefile import (
        NodeFileError,
        read_node_file,
        reason,
        require_node_file,
    )
    from credprovider.runtime.redact import printable

    def failed(what: str, path: object, said: str | OSError | ValueError) -> Exception:
        """google-auth's ``RefreshError``, which its ``refresh`` passes on as it is (it rewords
        ``OSError``, ``ValueError`` and ``ClientCertError`` into "Failed to retrieve...")."""
        if isinstance(said, NodeFileError):
            said = str(said.strerror)
        elif not isinstance(said, str):
            said = f"cannot be read: {reason(said)}"
        return exceptions.RefreshError(f"{what} {clip(printable(str(path)))} {said}")

    def workload(path: str) -> Any:
        data = read("the certificate config", path)
        try:
            config = decode_json(data)
        except BadAnswer as exc:
            raise failed("the certificate config", path, exc.predicate) from None
        except ValueError:
            raise failed("the certificate config", path, "is not JSON") from None
        configs = config.get("cert_configs") if isinstance(config, dict) else None
        return configs.get("workload") if isinstance(configs, dict) else None

    def read(what: str, path: str) -> bytes:
        try:
            return read_node_file(path)
        except (OSError, ValueError) as exc:
            raise failed(what, path, exc) from None

    def usable(cert_path: str, key_path: str) -> bytes:
        """The certificate chain, once the key is checked to be its key (OpenSSL's own word for
        a key that is not was "PEM lib", and it asked a terminal for an encrypted key's
        passphrase)."""
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        data = read("the certificate file", cert_path)
        try:
            chain: bytes = _mtls_helper._extract_cert_chain(data, cert_path)
            leaf = x509.load_pem_x509_certificate(chain)
        except (ValueError, exceptions.ClientCertError):
            raise failed("the certificate file", cert_path, "holds no PEM certificate") from None
        key_data = read("the key file", key_path)
        try:
            key = load_pem_private_key(key_data, password=None)
        except TypeError:  # cryptography's word for a key that needs a passphrase
            said = "is encrypted: give a key without a passphrase"
            raise failed("the key file", key_path, said) from None
        except (ValueError, exceptions.ClientCertError, UnsupportedAlgorithm):
            raise failed("the key file", key_path, "holds no PEM private key") from None
        if key.public_key() != leaf.public_key():
            raise failed("the key file", key_path, f"is not the key of {cert_path}")
        return chain

    class Certificate(identity_pool.Credentials):
        _found: tuple[str, str, bytes] | None = None

        def _get_mtls_cert_and_key_paths(self) -> tuple[str, str]:
            cert_path, key_path, _ = self._checked()
            return cert_path, key_path

        def _get_cert_bytes(self) -> bytes:
            return self._checked()[2]

        def _checked(self) -> tuple[str, str, bytes]:
            """The workload's certificate and key paths and its chain, each file read or checked
            once (google-auth asks for the paths and the bytes in turn)."""
            if self._found is None:
                self._found = self._check()
            return self._found

        def _check(self) -> tuple[str, str, bytes]:
            named = self._certificate_config_location
            path = _mtls_helper._get_cert_config_path(named)
            if path is None and named:
                raise failed("the certificate config", named, "is not there")
            if path is None:
                raise exceptions.RefreshError(
                    "no certificate config is there (GOOGLE_API_CERTIFICATE_CONFIG, else "
                    "gcloud's certificate_config.json)"
                )
            found = workload(path)
            home = os.path.join(_cloud_sdk.get_config_path(), "certificate_config.json")
            if found is None and not named and os.path.exists(home):
                path, found = home, workload(home)  # google-auth's fallback to gcloud's own
            cert_path, key_path = [
                found.get(key) if isinstance(found, dict) else None
                for key in ("cert_path", "key_path")
            ]
            if not (
                isinstance(cert_path, str) and cert_path and isinstance(key_path, str) and key_path
            ):
                raise failed(
                    "the certificate config",
                    path,
                    "names no workload cert_path and key_path (cert_configs.workload)",
                )
            chain = usable(cert_path, key_path)
            if self._trust_chain_path:
                try:
                    require_node_file(str(self._trust_chain_path))
                except (OSError, ValueError) as exc:
                    raise failed("the trust chain file", self._trust_chain_path, exc) from None
            return cert_path, key_path, chain

    return Certificate
