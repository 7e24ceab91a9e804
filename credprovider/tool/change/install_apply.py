"""``credprovider install`` applied: the planned steps (:mod:`credprovider.tool.change.install`,
none refused) as the engine's ops, made as one journaled transaction beside the config (a killed
run is finished by the next install or migrate --write; a failed one put back), and the list of
links a distribution package's removal reads."""

from __future__ import annotations

from pathlib import Path

from credprovider.paths import PACKAGE_BIN_DIR, PACKAGE_LINKS_FILE
from credprovider.tool.change.engine import ChangeKind, Kind, Op
from credprovider.tool.change.install import InstallPlan
from credprovider.tool.change.journal import run
from credprovider.tool.change.journalformat import journal_for
from credprovider.tool.change.merge import config_mode
from credprovider.tool.change.render import BUNDLE_COPY_DIR
from credprovider.tool.change.results import Action
from credprovider.tool.node.access import read_text


def install_ops(plan: InstallPlan) -> list[Op]:
    """The engine's ops for the planned changes (none refused): the bundle copy before the links
    into it, the links, the config, and the package's list of links into it."""
    assert not plan.refused
    ops: list[Op] = []
    links = []
    for change in plan.changes:
        path = Path(change.path)
        backup = Path(change.backup) if change.backup else None
        is_copy = path.name == BUNDLE_COPY_DIR and path.parent == plan.bin_dir
        if not is_copy and path != plan.config_out:
            links.append(path)
        if change.action is Action.UNCHANGED:
            continue
        if is_copy:
            source = plan.executable.parent
            ops.append(Op(Kind.TREE, path, source=source, links=False, backup=backup))
        elif path == plan.config_out:
            data = plan.config_text.encode()
            ops.append(Op(Kind.FILE, path, data, config_mode(data), backup=backup))
        else:
            target = (
                plan.bin_dir / BUNDLE_COPY_DIR / plan.executable.name
                if plan.copy
                else plan.executable
            )
            ops.append(Op(Kind.LINK, path, target=str(target), backup=backup))
    if not plan.copy and plan.executable.parent == Path(PACKAGE_BIN_DIR):
        ops.append(package_links_op(links))
    return ops


def apply_install(plan: InstallPlan) -> list[Op]:
    """Make the planned changes as one journaled transaction (the journal beside the config:
    a killed run is finished by the next install or migrate --write). The ops carried out."""
    done = run(journal_for(plan.config_out), install_ops(plan), ChangeKind.INSTALL)
    kept = {str(op.path): str(op.backup) for op in done if op.backup is not None}
    for change in plan.changes:  # the name each was kept under (one taken this second: another)
        if change.backup is not None:
            change.backup = kept.get(change.path, change.backup)
    return done


def package_links_op(links: list[Path], links_file: str = PACKAGE_LINKS_FILE) -> Op:
    """``links`` (made to the distribution package's bin dir) added to the list the package's
    removal reads: it deletes those still pointing into the package, so that no bin dir keeps a
    dangling link (release/distpackages.py)."""
    record = Path(links_file)
    # bounded, and no FIFO or device planted there is read
    known = set(read_text(links_file).split("\n")) if record.exists() else set()
    lines = sorted((known | {str(link) for link in links}) - {""})
    return Op(Kind.FILE, record, "".join(f"{line}\n" for line in lines).encode())
