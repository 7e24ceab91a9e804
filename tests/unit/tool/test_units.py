"""The kubelet's unit read as systemd reads it (credprovider/tool/node/units.py): quoting,
``$VAR`` against ``${VAR}``, drop-in order and precedence, ``ExecStart=`` resets, environment
files over ``Environment=``."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.tool.node.units import (
    k0s_kubelet_argv,
    kubelet_argv,
    on_node,
    read_kubelet_unit,
)
from credprovider.tool.node.unitsyntax import (
    UnitSyntaxError,
    expand,
    parse_environment_file,
    split_words,
)


def test_words_quotes_and_escapes_as_systemd_splits_them() -> None:
    assert split_words(r"""/usr/bin/kubelet "--a=b c" '--d e' --f\ g --h=\"x\" ${Y}z""") == [
        "/usr/bin/kubelet", "--a=b c", "--d e", "--f g", '--h="x"', "${Y}z",
    ]  # fmt: skip
    assert split_words("a \\\n b") == ["a", "b"]
    with pytest.raises(UnitSyntaxError):
        split_words('--a="unclosed')


def test_a_whole_word_variable_splits_a_braced_one_does_not() -> None:
    env = {"ARGS": '--one "--two three"', "LABELS": "a=1 b=2", "L": "4"}
    assert expand(["$ARGS", "--node-labels=${LABELS}", "${LABELS}", "--v=${L}"], env) == [
        "--one", "--two three", "--node-labels=a=1 b=2", "a=1 b=2", "--v=4",
    ]  # fmt: skip
    assert expand(["$MISSING", "${MISSING}x", "$$ARGS", "a$ARGS"], env) == ["x", "$ARGS", "a$ARGS"]


def test_an_environment_file_as_systemd_reads_it() -> None:
    text = (
        "# a comment\n; another\nKUBELET_OPTS=\"--v=2 --a='b c'\"\nPLAIN=one two  \n"
        "SINGLE='x \"y\"'\nJOINED=a \\\nb\nnot an assignment\n"
    )
    assert parse_environment_file(text) == {
        "KUBELET_OPTS": "--v=2 --a='b c'", "PLAIN": "one two", "SINGLE": 'x "y"', "JOINED": "a  b",
    }  # fmt: skip


def test_the_kubelet_behind_a_wrapper() -> None:
    assert kubelet_argv(["/usr/local/bin/kubenswrapper", "/usr/bin/kubelet", "--v=2"]) == ["--v=2"]
    assert kubelet_argv(["/usr/bin/hyperkube", "kubelet", "--v=2"]) == ["--v=2"]
    assert kubelet_argv(["-/opt/bin/kubelet"]) == []
    assert kubelet_argv(["/usr/bin/containerd"]) is None


def write(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    return root


def read(root: Path):  # type: ignore[no-untyped-def]
    return read_kubelet_unit(*on_node(lambda p: str(root / p.lstrip("/"))))


def test_drop_ins_in_name_order_an_earlier_directory_hiding_the_same_name(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --v=1\n",
        "/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --v=0\n",
        "/usr/lib/systemd/system/kubelet.service.d/10-a.conf":
            "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --from=usr-10 $X\n",
        "/etc/systemd/system/kubelet.service.d/20-b.conf": '[Service]\nEnvironment="X=--x=etc-20"\n',
        "/usr/lib/systemd/system/kubelet.service.d/20-b.conf": '[Service]\nEnvironment="X=--x=usr"\n',
        "/run/systemd/system/kubelet.service.d/05-c.conf": "[Unit]\nExecStart=/not/a/service/key\n",
    })  # fmt: skip
    unit = read(root)
    assert unit is not None
    assert unit.unit == "/etc/systemd/system/kubelet.service"
    assert unit.argv == ("--from=usr-10", "--x=etc-20")
    assert unit.sources == (
        "/etc/systemd/system/kubelet.service",
        "/run/systemd/system/kubelet.service.d/05-c.conf",
        "/usr/lib/systemd/system/kubelet.service.d/10-a.conf",
        "/etc/systemd/system/kubelet.service.d/20-b.conf",
    )


def test_a_directory_named_as_a_drop_in_is_no_drop_in(tmp_path: Path) -> None:
    """systemd lists drop-ins taking only files and links ("not a regular file with suffix",
    src/basic/conf-files.c): a directory named ``*.conf`` is skipped, never a drop-in that would
    stop the kubelet starting."""
    root = write(tmp_path, {
        "/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --v=0\n",
        "/etc/systemd/system/kubelet.service.d/20-b.conf": "[Service]\nExecStart=\n"
            "ExecStart=/usr/bin/kubelet --v=2\n",
    })  # fmt: skip
    (root / "etc/systemd/system/kubelet.service.d/10-old.conf").mkdir()
    unit = read(root)
    assert unit is not None and unit.argv == ("--v=2",) and unit.problems == ()
    assert unit.sources == (
        "/etc/systemd/system/kubelet.service",
        "/etc/systemd/system/kubelet.service.d/20-b.conf",
    )


def test_environment_files_override_environment_and_a_later_file_an_earlier(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "/lib/systemd/system/kubelet.service": (
            '[Service]\nEnvironment="A=--a=unit" "B=--b=unit"\n'
            "EnvironmentFile=/etc/one\nEnvironmentFile=-/etc/absent\nEnvironmentFile=/etc/two\n"
            "ExecStart=/usr/bin/kubelet $A $B $C\n"
        ),
        "/etc/one": "A=--a=one\nC=--c=one\n",
        "/etc/two": "C=--c=two\n",
    })  # fmt: skip
    unit = read(root)
    assert unit is not None and unit.argv == ("--a=one", "--b=unit", "--c=two")
    assert dict(unit.word_files) == {
        "--a=one": "/etc/one", "--b=unit": "/lib/systemd/system/kubelet.service",
        "--c=two": "/etc/two",
    }  # fmt: skip
    assert unit.problems == ()
    (root / "etc/one").unlink()
    unit = read(root)
    assert unit is not None and unit.argv == ("--a=unit", "--b=unit", "--c=two")
    assert unit.problems == (
        "EnvironmentFile=/etc/one is missing: systemd will not start the unit",
    )


def test_no_unit_or_no_kubelet_in_it(tmp_path: Path) -> None:
    assert read(tmp_path) is None
    write(tmp_path, {"/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/bin/true\n"})
    assert read(tmp_path) is None


def test_k0s_passes_the_kubelet_its_extra_args_split_as_a_shell_splits_them() -> None:
    flags = "--image-credential-provider-config=/c.yaml --image-credential-provider-bin-dir=/b"
    assert k0s_kubelet_argv(split_words(f"/usr/local/bin/k0s worker --kubelet-extra-args='{flags}'"), {}) == [
        "--image-credential-provider-config=/c.yaml", "--image-credential-provider-bin-dir=/b",
    ]  # fmt: skip
    # the value as its own word, from the environment, quoted inside
    words = split_words('k0s worker --token-file=/t --kubelet-extra-args "${EXTRA}"')
    env = {"EXTRA": "--v=2 '--node-labels=a=1 b'"}
    assert k0s_kubelet_argv(words, env) == ["--v=2", "--node-labels=a=1 b"]
    assert k0s_kubelet_argv(split_words("k0s worker --token-file=/t"), {}) == []
    assert k0s_kubelet_argv(split_words("/usr/bin/kubelet --v=2"), {}) is None


def test_a_k0s_node_without_a_kubelet_unit_is_read_through_its_own(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "/etc/systemd/system/k0sworker.service": "[Service]\nExecStart=/usr/local/bin/k0s "
            "worker --kubelet-extra-args='--image-credential-provider-bin-dir=/b'\n",
            "/etc/systemd/system/k0sworker.service.d/10-more.conf": "[Service]\nExecStart=\n"
            "ExecStart=/usr/local/bin/k0s worker --kubelet-extra-args=--v=4\n",
        },
    )
    unit = read(root)
    assert unit is not None and unit.unit == "/etc/systemd/system/k0sworker.service"
    assert unit.argv == ("--v=4",)  # its drop-in reset ExecStart=
    assert unit.sources[-1].endswith("10-more.conf")
