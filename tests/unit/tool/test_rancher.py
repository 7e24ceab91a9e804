"""What k3s and RKE2 give their kubelet (credprovider/tool/node/rancher.py), read as they read their
configuration (k3s-io/k3s pkg/configfilearg and pkg/cli/cmds/agent.go): the defaults, the config
file and its drop-ins in name order, the service's command line over both, ``kubelet-arg`` over
all, and a file they could not read refused in one line. Nodes are k3s' install.sh unit
(tests/platformnodes.k3s) with the operator's files beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.tool.node.rancher import GivenPaths, RancherConfigError, given_paths
from credprovider.tool.node.units import on_node
from tests.platformnodes import k3s

UNIT = "/etc/systemd/system/k3s-agent.service"
CONFIG = "/etc/rancher/k3s/config.yaml"


def read(tmp_path: Path, files: dict[str, str], command: str = "") -> GivenPaths:
    node = k3s()
    root = node.build(tmp_path / "node")
    if command:  # install.sh quotes each word of the command it was given
        unit = root / UNIT.lstrip("/")
        unit.write_text(unit.read_text().replace("    agent \\\n", f"    agent \\\n    {command}"))
    for path, text in files.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    return given_paths("k3s", *on_node(lambda p: str(root / p.lstrip("/"))))


def test_nothing_named_is_k3s_defaults(tmp_path: Path) -> None:
    assert read(tmp_path, {}) == GivenPaths(
        "/var/lib/rancher/credentialprovider/config.yaml",
        "/var/lib/rancher/credentialprovider/bin",
        "",
    )
    assert read(tmp_path / "b", {CONFIG: "server: https://10.0.0.2:6443\n"}).said_by == ""


def test_the_config_file_then_its_drop_ins_in_name_order(tmp_path: Path) -> None:
    files = {
        CONFIG: "image-credential-provider-config: /etc/cp/a.yaml\n"
        "image-credential-provider-bin-dir: /opt/cp/bin\n",
        f"{CONFIG}.d/20-cp.yml": "image-credential-provider-config: /etc/cp/b.yaml\n",
        f"{CONFIG}.d/10-cp.yaml": "image-credential-provider-config: /etc/cp/c.yaml\n",
        f"{CONFIG}.d/30-notes.txt": "image-credential-provider-config: /not/read\n",
    }
    assert read(tmp_path, files) == GivenPaths(
        "/etc/cp/b.yaml", "/opt/cp/bin", f"{CONFIG}.d/20-cp.yml"
    )


def test_a_directory_named_as_a_drop_in_is_skipped_as_k3s_skips_it(tmp_path: Path) -> None:
    """k3s lists ``config.yaml.d`` skipping directories (pkg/configfilearg/parser.go
    ``dotDFiles``: ``file.IsDir()``) and takes ``.YAML`` as ``.yaml``: a node k3s starts on is
    read, not refused."""
    node = k3s().build(tmp_path / "node")
    (node / f"{CONFIG}.d/40-old.yaml".lstrip("/")).mkdir(parents=True)
    (node / f"{CONFIG}.d/50-cp.YAML".lstrip("/")).write_text(
        "image-credential-provider-bin-dir: /opt/cp/bin\n"
    )
    given = given_paths("k3s", *on_node(lambda p: str(node / p.lstrip("/"))))
    assert (given.bin_dir, given.said_by) == ("/opt/cp/bin", f"{CONFIG}.d/50-cp.YAML")


def test_a_config_file_k3s_fetches_over_the_network_is_said_not_guessed(tmp_path: Path) -> None:
    """K3S_CONFIG_FILE may be an https:// address k3s fetches as it starts (parser.go
    ``readConfigFileData``): its paths are not on the node, so no default is assumed."""
    files = {"/etc/default/k3s-agent": "K3S_CONFIG_FILE=https://10.0.0.9/k3s.yaml\n"}
    with pytest.raises(RancherConfigError) as raised:
        read(tmp_path, files)
    assert str(raised.value) == (
        "k3s takes its configuration from 'https://10.0.0.9/k3s.yaml', over the network: what it "
        "gives the kubelet cannot be read from the node's files"
    )


def test_the_services_command_line_wins_over_its_files(tmp_path: Path) -> None:
    files = {CONFIG: "image-credential-provider-config: /etc/cp/a.yaml\n"}
    command = "'--image-credential-provider-config' '/srv/cp.yaml' \\\n"
    given = read(tmp_path, files, command)
    assert (given.config, given.said_by) == ("/srv/cp.yaml", "the service's command line")


def test_a_config_file_named_elsewhere_is_the_one_read(tmp_path: Path) -> None:
    """``--config`` on the command line; the environment's K3S_CONFIG_FILE over it (k3s reads
    the variable first), from the unit's environment file as install.sh writes it."""
    files = {
        CONFIG: "image-credential-provider-config: /not/this.yaml\n",
        "/srv/k3s.yaml": "image-credential-provider-config: /srv/cp.yaml\n",
        "/srv/env.yaml": "image-credential-provider-config: /srv/env-cp.yaml\n",
    }
    assert read(tmp_path, files, "'--config' '/srv/k3s.yaml' \\\n").config == "/srv/cp.yaml"
    env = {**files, f"{UNIT}.env": "K3S_URL=https://10.0.0.2:6443\nK3S_CONFIG_FILE=/srv/env.yaml\n"}
    assert read(tmp_path / "b", env, "'--config' '/srv/k3s.yaml' \\\n").config == "/srv/env-cp.yaml"


def test_a_kubelet_arg_naming_a_flag_wins_over_k3s_own(tmp_path: Path) -> None:
    files = {
        CONFIG: "image-credential-provider-bin-dir: /opt/cp/bin\n"
        "kubelet-arg:\n- image-credential-provider-bin-dir=/opt/kubelet/bin\n- v=2\n",
    }
    given = read(tmp_path, files)
    assert (given.bin_dir, given.said_by) == ("/opt/kubelet/bin", "its kubelet-arg")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("image-credential-provider-config: [unclosed\n", "is not a config they read: yaml: "),
        ("- a list\n", "is not a config they read: not a mapping of options"),
        ("a: 1\na: 2\n", "is not a config they read: strict decoding error: yaml: "),
    ],
)
def test_a_config_they_could_not_read_is_one_error(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(RancherConfigError) as raised:
        read(tmp_path, {CONFIG: text})
    assert str(raised.value).startswith(f"{CONFIG} {said}")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("kind", ["fifo", "directory", "too large"])
def test_a_config_that_cannot_be_read_is_refused_not_taken_as_absent(
    tmp_path: Path, kind: str
) -> None:
    """Hostile input: a FIFO would hang a reader, a 2 GiB sparse file fill its memory; k3s
    fails on either and on a directory. Each is one error, read no further than the bound."""
    import os

    node = k3s().build(tmp_path / "node")
    path = node / CONFIG.lstrip("/")
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        with path.open("wb") as sparse:
            sparse.truncate(2 << 30)
    with pytest.raises(RancherConfigError) as raised:
        given_paths("k3s", *on_node(lambda p: str(node / p.lstrip("/"))))
    assert str(raised.value).startswith(f"{CONFIG} cannot be read: ")
    assert "\n" not in str(raised.value)


def test_the_units_environment_file_named_by_its_own_name_is_read(tmp_path: Path) -> None:
    """install.sh's unit names ``EnvironmentFile=-/etc/default/%N``: systemd reads
    /etc/default/k3s-agent for the unit k3s-agent.service (systemd.unit(5) specifiers)."""
    files = {
        "/etc/default/k3s-agent": "K3S_CONFIG_FILE=/srv/k3s.yaml\n",
        "/srv/k3s.yaml": "image-credential-provider-bin-dir: /srv/bin\n",
    }
    given = read(tmp_path, files)
    assert (given.bin_dir, given.said_by) == ("/srv/bin", "/srv/k3s.yaml")


@pytest.mark.parametrize(
    "value",
    ["relative/cp.yaml", "[/a, /b]", "{a: 1}", '"/x\\n/y"', "/" + "x" * 5000],
    ids=["relative", "list", "mapping", "two lines", "huge"],
)
def test_a_path_that_is_not_one_is_refused_in_one_short_line(tmp_path: Path, value: str) -> None:
    """Hostile input: what k3s' configuration names is a path the agent writes to; anything
    but an absolute path on one line is refused, printed no longer than 80 characters."""
    with pytest.raises(RancherConfigError) as raised:
        read(tmp_path, {CONFIG: f"image-credential-provider-bin-dir: {value}\n"})
    said = str(raised.value)
    assert said.startswith(f"{CONFIG}: image-credential-provider-bin-dir is not an absolute path")
    assert "\n" not in said and len(said) < 200
