"""The kubelet's flags in kubeadm's environment files, as the agent reads and edits them: the
flags in force (kubeadm's own ``kubeadm-flags.env``, then the distribution's file whose
``KUBELET_EXTRA_ARGS`` kubeadm's drop-in passes last), an edit of ``KUBELET_EXTRA_ARGS``, and
whether the node is still on the in-tree cloud login (refused, or with ``migrate`` moved to
``--cloud-provider=external``). Pure but for reading the files (``read``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from credprovider.tool.change.flagedit import FlagChanges, extra_args_place
from credprovider.tool.node.discovery import in_tree
from credprovider.tool.node.flagfiles import flags_from_file, rewrite
from credprovider.tool.node.kubelet_facts import CLOUD_LOGIN_GATE
from credprovider.tool.node.kubelet_flags import CLOUD_PROVIDER_FLAG, flag_value, settings_from
from credprovider.tool.node.layouts import KUBEADM_FLAGS_ENV

EXTERNAL: Final = f"--{CLOUD_PROVIDER_FLAG}=external"


def texts(
    read: Callable[[str], str | None], extra_args_files: Sequence[str]
) -> dict[str, str | None]:
    """Each file the kubelet's env flags come from (kubeadm-flags.env, then the platform's), its
    text or ``None`` (absent)."""
    return {path: read(path) for path in (KUBEADM_FLAGS_ENV, *extra_args_files)}


def args(found: Mapping[str, str | None]) -> list[str]:
    """The kubelet flags ``found``'s files give, in the order the kubelet gets them."""
    return shlex.split(" ".join(flags_from_file(text) for text in found.values() if text))


def with_extra_args(text: str, changes: FlagChanges, wanted: Sequence[str]) -> str:
    """``text`` with ``changes`` made and ``wanted`` added to its KUBELET_EXTRA_ARGS (one made at
    its end when it has none)."""
    placed, extra = extra_args_place(text)
    return rewrite(placed, changes.edit, list(wanted), extra)


@dataclass(frozen=True)
class InTree:
    """What the agent does about the in-tree cloud login on a kubeadm node: ``refused`` (why it
    leaves the node alone) or ``migrating`` (the cloud it moves to external); neither when the
    node is not on it."""

    refused: str = ""
    migrating: str = ""

    @property
    def changes(self) -> FlagChanges:
        """What a migration takes out of the flags file the agent edits."""
        return FlagChanges(frozenset({CLOUD_PROVIDER_FLAG}), frozenset({CLOUD_LOGIN_GATE}))

    def restored(self, text: str) -> str:
        """The flags file ``text`` as uninstall leaves a migrated node's: as it was, but with the
        in-tree flags moved to ``--cloud-provider=external`` (the in-tree flag would stop a
        kubelet 1.31 or newer)."""
        return with_extra_args(text, self.changes, [EXTERNAL])


def in_tree_decision(
    given: Sequence[str], found: Mapping[str, str | None], migrate: bool, edits_env: bool
) -> InTree:
    """A node whose kubelet flags (``given``; ``found``: each env file's text, when they are in
    env files) still give the in-tree cloud login (``--cloud-provider=<cloud>``, or the removed
    gate) is refused: the plugins' flags beside it would be "installed" on a kubelet that its next
    upgrade past 1.31 does not start. With ``migrate`` (and ``edits_env``: the agent edits
    KUBELET_EXTRA_ARGS), its ``--cloud-provider`` is moved to external there, passed last so that
    it wins; not the gate in kubeadm's own file, which is not the agent's to change."""
    if not in_tree(settings_from(given)):
        return InTree()
    cloud = flag_value(given, CLOUD_PROVIDER_FLAG)
    generated = settings_from(args({KUBEADM_FLAGS_ENV: found.get(KUBEADM_FLAGS_ENV)}))
    if migrate and edits_env and CLOUD_LOGIN_GATE not in generated.feature_gates:
        return InTree(migrating=str(cloud or ""))
    said = f"--{CLOUD_PROVIDER_FLAG}={cloud}" if cloud else CLOUD_LOGIN_GATE
    holder = next((p for p, t in found.items() if t and in_tree(settings_from(args({p: t})))), "")
    command = f"credprovider migrate --kubelet-flags-file {holder or 'FILE'} --write"
    offer = ", or set flags.migrateInTree (it moves --cloud-provider, not that gate)"
    return InTree(
        refused=(
            f"the kubelet's flags still give the in-tree cloud login ({said}): the plugins' flags "
            "beside it would leave a kubelet that does not start once it is 1.31 or newer; "
            f"nothing is changed: move the node first ({command} on it; docs/operators.md), and "
            "the agent installs at its next start" + (offer if edits_env and not migrate else "")
        )
    )
