"""credprovider/tool/node/flagfiles.py: the kubelet's flags in the files operators keep them in, edited in place.

Each case edits one file the way migrate does (the in-tree cloud flag and the credential flags
replaced, a removed feature gate taken out) and expects the file byte for byte: every other byte,
comment, quote and continued line stays as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.flagfiles import flags_from_file, rewrite, units

DROP = {"--cloud-provider=aws", "--image-credential-provider-config=/etc/old.yaml"}
NEW = ["--cloud-provider=external", "--image-credential-provider-config=/etc/new.yaml"]


def _drop_listed(words: Sequence[str]) -> tuple[set[int], dict[int, str]]:
    drop = {i for i, word in enumerate(words) if word in DROP}
    replace = {
        i: "--feature-gates=Foo=true"
        for i, w in enumerate(words)
        if w.startswith("--feature-gates=")
    }
    return drop, replace


@pytest.mark.parametrize(
    ("name", "before", "after"),
    [
        ("kubeadm-flags.env",
         'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws --v=2"\n',
         'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --v=2 --cloud-provider=external '
         '--image-credential-provider-config=/etc/new.yaml"\n'),
        ("the only flag, unquoted",
         "KUBELET_EXTRA_ARGS=--cloud-provider=aws\n",
         'KUBELET_EXTRA_ARGS="--cloud-provider=external --image-credential-provider-config=/etc/new.yaml"\n'),
        ("single quotes and export, a comment kept",
         "# set by the AMI\nexport KUBELET_EXTRA_ARGS='--cloud-provider=aws --image-credential-provider-config=/etc/old.yaml'\n",
         "# set by the AMI\nexport KUBELET_EXTRA_ARGS='--cloud-provider=external --image-credential-provider-config=/etc/new.yaml'\n"),
        ("a systemd Environment= among others",
         '[Service]\nEnvironment="A=1" "KUBELET_EXTRA_ARGS=--cloud-provider=aws --max-pods=58" "B=2"\n',
         '[Service]\nEnvironment="A=1" "KUBELET_EXTRA_ARGS=--max-pods=58 --cloud-provider=external '
         '--image-credential-provider-config=/etc/new.yaml" "B=2"\n'),
        ("an unquoted Environment= assignment",
         "[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--cloud-provider=aws\n",
         '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--cloud-provider=external '
         '--image-credential-provider-config=/etc/new.yaml"\n'),
        ("ExecStart= over continued lines",
         "[Service]\nExecStart=/usr/bin/kubelet \\\n  --cloud-provider=aws \\\n  --feature-gates=Foo=true,KubeletCredentialProviders=true \\\n  --v=2\nRestart=always\n",
         "[Service]\nExecStart=/usr/bin/kubelet \\\n  --feature-gates=Foo=true \\\n  --v=2 --cloud-provider=external "
         "--image-credential-provider-config=/etc/new.yaml\nRestart=always\n"),
        ("ExecStart= with $VARIABLES and nothing to drop",
         "[Service]\nExecStart=/usr/bin/kubelet $KUBELET_ARGS\n",
         "[Service]\nExecStart=/usr/bin/kubelet $KUBELET_ARGS --cloud-provider=external "
         "--image-credential-provider-config=/etc/new.yaml\n"),
        ("just the flags, the dropped one first",
         "--cloud-provider=aws --v=2\n",
         "--v=2 --cloud-provider=external --image-credential-provider-config=/etc/new.yaml\n"),
        ("an empty variable",
         'KUBELET_EXTRA_ARGS=""\n',
         'KUBELET_EXTRA_ARGS="--cloud-provider=external --image-credential-provider-config=/etc/new.yaml"\n'),
    ],
)  # fmt: skip
def test_rewrite_changes_only_the_words_it_names(name: str, before: str, after: str) -> None:
    assert rewrite(before, _drop_listed, NEW, add_to=0) == after, name


def test_rewrite_without_additions_leaves_untouched_files_alone() -> None:
    text = "HOME=/root\n# KUBELET_EXTRA_ARGS=--cloud-provider=aws\n[Unit]\n"
    assert units(text) == []
    assert rewrite(text, _drop_listed, NEW, add_to=None) == text


def test_every_unit_is_edited_and_the_additions_go_to_one() -> None:
    text = 'KUBELET_A_ARGS="--cloud-provider=aws"\nKUBELET_B_ARGS="--image-credential-provider-config=/etc/old.yaml --v=1"\n'
    assert rewrite(text, _drop_listed, NEW, add_to=1) == (
        'KUBELET_A_ARGS=""\nKUBELET_B_ARGS="--v=1 --cloud-provider=external '
        '--image-credential-provider-config=/etc/new.yaml"\n'
    )


def test_the_words_are_what_the_kubelet_receives() -> None:
    text = "KUBELET_EXTRA_ARGS='--node-labels=\"a=b\" --v=2'\n"
    assert [w.value for w in units(text)[0].words] == ["--node-labels=a=b", "--v=2"]
    assert flags_from_file(text) == "--node-labels=a=b --v=2"


def test_an_unclosed_quote_is_an_error() -> None:
    with pytest.raises(NodeChangeError, match="No closing quotation"):
        units('ExecStart=/usr/bin/kubelet --node-labels="a=b\n')


@pytest.mark.parametrize(
    "text",
    [
        "[Service]\nEnvironment=" + "a" * 4_000_000 + "\n",  # one name-like run, no '='
        'KUBELET_EXTRA_ARGS="' + "--x " * 1_000_000 + "\n",  # a quote never closed
        "ExecStart=/usr/bin/kubelet " + "'" + "y" * 4_000_000 + "\n",
    ],
    ids=["a 4 MB name", "an unclosed double quote", "an unclosed single quote"],
)
def test_a_hostile_file_is_read_in_one_pass(text: str) -> None:
    """A file as large as nodefiles allows (4 MiB) is scanned once: no per-character rescans, no
    backtracking stack (this took minutes, or half a gigabyte, before)."""
    import resource
    import time

    start, before = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        units(text)
    except NodeChangeError as exc:
        assert "No closing quotation" in str(exc)
    assert time.monotonic() - start < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
