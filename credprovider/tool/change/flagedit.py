"""The kubelet's flags files as a change leaves them (``credprovider migrate``, and the agent's
edits of kubeadm's environment file): which flags go (:class:`FlagChanges`: by name, with their
value, and feature gates taken out of ``--feature-gates``), and where new flags are added, each
file's other bytes kept (:mod:`credprovider.tool.node.flagfiles`). On kubeadm the new flags go in
the distribution's file its drop-in passes last, never in ``kubeadm-flags.env``, which kubeadm
writes anew. Pure functions.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from credprovider.tool.node.flagfiles import rewrite, units
from credprovider.tool.node.layouts import KUBEADM_EXTRA_ARGS_FILES

KUBEADM_GENERATED: Final = "kubeadm-flags.env"
EXTRA_ARGS: Final = "KUBELET_EXTRA_ARGS"  # the flags kubeadm's drop-in passes last


@dataclass(frozen=True)
class FlagChanges:
    """Flags dropped by name (with their value) and feature gates taken out of --feature-gates."""

    drop: frozenset[str]
    gates: frozenset[str]

    def changes(self, words: Sequence[str]) -> list[tuple[tuple[int, ...], list[str]]]:
        """Each change to ``words``: the indices of a flag (and its value, for ``--flag value``)
        and the words put in their place (none: removed)."""
        found: list[tuple[tuple[int, ...], list[str]]] = []
        index = 0
        while index < len(words):
            word = words[index]
            dashes = word[: len(word) - len(word.lstrip("-"))]
            name, equals, value = word[len(dashes) :].partition("=")
            paired = bool(dashes) and not equals and index + 1 < len(words)
            paired = paired and not words[index + 1].startswith("-")
            at = (index, index + 1) if paired else (index,)
            change: list[str] | None = None
            if dashes and name in self.drop:
                change = []
            elif dashes and name == "feature-gates" and (equals or paired):
                items = (value if equals else words[index + 1]).split(",")
                kept = ",".join(i for i in items if i.partition("=")[0].strip() not in self.gates)
                if kept != ",".join(items):
                    change = [f"{dashes}{name}={kept}"] if kept else []
            if change is not None:
                found.append((at, change))
            index += len(at) if change is not None else 1
        return found

    def edit(self, words: Sequence[str]) -> tuple[set[int], dict[int, str]]:
        """For :func:`credprovider.tool.node.flagfiles.rewrite`: the words to drop and to replace."""
        drop: set[int] = set()
        replace: dict[int, str] = {}
        for at, new in self.changes(words):
            if new:
                replace[at[0]] = new[0]
                drop.update(at[1:])
            else:
                drop.update(at)
        return drop, replace

    def describe(self, words: Sequence[str]) -> tuple[list[str], list[str]]:
        """What this edit removes from ``words`` and what it puts back, flag by flag."""
        removed: list[str] = []
        added: list[str] = []
        for at, new in self.changes(words):
            removed.append(shlex.join(words[i] for i in at))
            added.extend(new)
        return removed, added


def rewritten_files(
    flag_files: Mapping[str, str],
    changes: FlagChanges,
    new_flags: list[str],
    flags_text: str,
    notes: list[str],
) -> dict[str, str]:
    """Each flags file as it reads after the change; the new flags go where the old credential or
    cloud flags were, else into the first place flags are written."""
    texts = _with_extra_args_place(flag_files)
    places = [
        (path, index, unit)
        for path, text in texts.items()
        for index, unit in enumerate(units(text))
    ]
    home = next(
        (
            (path, index)
            for path, index, unit in places
            if changes.edit([w.value for w in unit.words])[0]
        ),
        (places[0][0], places[0][1]) if places else None,
    )
    lasting = [(path, index) for path, index, _ in places if not generated(path)]
    if new_flags and home is not None and generated(home[0]) and lasting:
        # kubeadm rewrites its kubeadm-flags.env on upgrade, and its drop-in passes the
        # distribution's file (KUBELET_EXTRA_ARGS) after it: the new flags last there
        home = lasting[-1]
        notes.append(
            f"The new flags go into {home[0]}: kubeadm rewrites {KUBEADM_GENERATED} on upgrade "
            "and its drop-in passes this file's flags after it."
        )
    elif new_flags and home is not None and generated(home[0]):
        # no file of the user's is given (a unit of its own reading kubeadm's file alone)
        notes.append(
            f"The new flags go into {home[0]}, the only flags file given, which kubeadm writes "
            "anew at upgrade (and join): add them to the kubeadm configuration's "
            "nodeRegistration.kubeletExtraArgs too, or they are lost then."
        )
    if new_flags and home is None and flag_files and not flags_text:
        notes.append(
            f"No place in {', '.join(flag_files)} writes kubelet flags: add "
            f"{' '.join(new_flags)} to the kubelet's command line yourself."
        )
    rewritten: dict[str, str] = {}
    for path, text in flag_files.items():
        add_to = home[1] if home and home[0] == path and new_flags else None
        new = rewrite(text if add_to is None else texts[path], changes.edit, new_flags, add_to)
        if new != text:
            rewritten[path] = new
    return rewritten


def _with_extra_args_place(flag_files: Mapping[str, str]) -> dict[str, str]:
    """The flags files, and beside kubeadm's own the distribution's file its drop-in reads
    (``KUBEADM_EXTRA_ARGS_FILES``: none there yet, or one with no assignment) given an empty
    ``KUBELET_EXTRA_ARGS=`` to take the new flags (:func:`extra_args_place`), which kubeadm's
    rewrite of its own file would lose. Written only if the new flags go there."""
    texts = dict(flag_files)
    if not any(map(generated, flag_files)):
        return texts
    for path, text in flag_files.items():
        if path in KUBEADM_EXTRA_ARGS_FILES and not units(text):
            texts[path] = extra_args_place(text)[0]
    return texts


def extra_args_place(text: str) -> tuple[str, int]:
    """An environment file's ``text`` with its ``KUBELET_EXTRA_ARGS`` assignment (an empty one
    added at its end when it has none), and that assignment's index in :func:`units`: where
    :func:`~credprovider.tool.node.flagfiles.rewrite` adds the flags kubeadm's drop-in passes
    last. The one way migrate and the agent add that line."""
    found = units(text)
    for index, unit in enumerate(found):
        line = text[text.rfind("\n", 0, unit.start) + 1 : unit.start].strip()
        if line.removeprefix("export").strip().startswith(f"{EXTRA_ARGS}="):
            return text, index
    ended = text if text.endswith("\n") or not text else f"{text}\n"
    return f"{ended}{EXTRA_ARGS}=\n", len(found)


def generated(path: str) -> bool:
    """kubeadm's own flags file, which it writes anew at init, join and upgrade."""
    return path.rsplit("/", 1)[-1] == KUBEADM_GENERATED
