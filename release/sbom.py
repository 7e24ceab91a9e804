"""A CycloneDX 1.5 SBOM of one bundle: every Python distribution and every native library in it.

Read from the bundle itself wherever the bundle says it: Python distributions from the ``.dist-info``
folders it carries (name, version, licence), libraries vendored inside wheels from their files, the
OpenSSL statically linked into ``cryptography`` from the version string in its binary. Native libraries
built by release/native.py come from the source lock they were built from, and are listed only
when their files are in the bundle.
"""

from __future__ import annotations

import email.parser
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from release.sources import Lock

CONTENTS: Final = "_internal"


@dataclass(frozen=True)
class Native:
    """A library release/native.py builds, and the bundle files it is in."""

    package: str  # Debian source package in sources.lock.json
    name: str
    license: str  # SPDX expression
    license_file: str  # inside the source tree
    files: tuple[str, ...]  # globs under _internal/


NATIVE: Final = (
    Native("python3.11", "cpython", "PSF-2.0", "LICENSE", ("credprovider-main", "libpython3.*.so*", "lib/python3.*/lib-dynload/*.so")),
    Native("openssl", "openssl", "Apache-2.0", "LICENSE.txt", ("libssl.so.*", "libcrypto.so.*")),
    Native("zlib", "zlib", "Zlib", "LICENSE", ("libz.so.*", "lib/python3.*/lib-dynload/zlib.*.so")),
    Native("bzip2", "bzip2", "bzip2-1.0.6", "LICENSE", ("lib/python3.*/lib-dynload/_bz2.*.so",)),
    Native("xz-utils", "xz", "0BSD OR LicenseRef-xz-public-domain", "COPYING", ("lib/python3.*/lib-dynload/_lzma.*.so",)),
    Native("libffi", "libffi", "MIT", "LICENSE", ("lib/python3.*/lib-dynload/_ctypes.*.so",)),
    Native("expat", "expat", "MIT", "expat/COPYING", ("lib/python3.*/lib-dynload/pyexpat.*.so", "lib/python3.*/lib-dynload/_elementtree.*.so")),
)  # fmt: skip

_OPENSSL_IN_BINARY: Final = re.compile(rb"OpenSSL (\d+\.\d+\.\d+[a-z]?) ")
_LICENSE_CLASSIFIER: Final = "License :: OSI Approved :: "


@dataclass(frozen=True)
class Component:
    name: str
    version: str
    purl: str
    license: str  # SPDX expression or a licence's name; may be empty
    files: tuple[str, ...] = ()
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "type": "library",
            "bom-ref": self.purl,
            "name": self.name,
            "version": self.version,
            "purl": self.purl,
        }
        if self.description:
            entry["description"] = self.description
        if self.license:
            if re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*", self.license):
                entry["licenses"] = [{"expression": self.license}]
            else:
                entry["licenses"] = [{"license": {"name": self.license}}]
        if self.files:
            entry["properties"] = [{"name": "credprovider:file", "value": f} for f in self.files]
        return entry


def distribution_license(metadata: email.message.Message) -> str:
    """License-Expression, else a one-line License field, else the OSI classifiers."""
    expression = metadata.get("License-Expression")
    if expression:
        return str(expression).strip()
    field = str(metadata.get("License") or "").strip()
    if field and "\n" not in field and len(field) <= 80 and field.upper() != "UNKNOWN":
        return field
    classifiers = [
        c[len(_LICENSE_CLASSIFIER) :]
        for c in metadata.get_all("Classifier") or []
        if c.startswith(_LICENSE_CLASSIFIER)
    ]
    return " OR ".join(classifiers)


def python_components(contents: Path) -> list[Component]:
    components = []
    for info in sorted(contents.glob("*.dist-info")):
        metadata = email.parser.Parser().parsestr(
            (info / "METADATA").read_text(encoding="utf-8"), headersonly=True
        )
        name, version = str(metadata["Name"]), str(metadata["Version"])
        normalized = re.sub(r"[-_.]+", "-", name).lower()
        components.append(
            Component(
                name, version, f"pkg:pypi/{normalized}@{version}", distribution_license(metadata)
            )
        )
    return components


def vendored_components(contents: Path) -> list[Component]:
    """Libraries auditwheel vendored into wheels (``<package>.libs/``), and cryptography's OpenSSL."""
    components = []
    for library in sorted(contents.glob("*.libs/*.so*")):
        match = re.match(r"(lib[a-zA-Z0-9_+]+?)-[0-9a-f]{8}\.so\.?([0-9.]*)$", library.name)
        name, version = (
            (match.group(1), match.group(2) or "unknown") if match else (library.name, "unknown")
        )
        owner = library.parent.name.removesuffix(".libs")
        relative = library.relative_to(contents).as_posix()
        components.append(
            Component(
                name,
                version,
                f"pkg:generic/{name}@{version}",
                "",
                (relative,),
                f"vendored by the {owner} wheel",
            )
        )
    for binary in sorted(contents.glob("cryptography/hazmat/bindings/_rust*.so")):
        found = _OPENSSL_IN_BINARY.search(binary.read_bytes())
        if found:
            version = found.group(1).decode()
            relative = binary.relative_to(contents).as_posix()
            components.append(
                Component(
                    "openssl",
                    version,
                    f"pkg:generic/openssl@{version}?package=cryptography",
                    "Apache-2.0",
                    (relative,),
                    "statically linked into the cryptography wheel",
                )
            )
    return components


def native_components(
    contents: Path, lock: Lock, extra: Iterable[Component] = ()
) -> list[Component]:
    components = []
    for native in NATIVE:
        files = sorted(
            {
                p.relative_to(contents).as_posix()
                for pattern in native.files
                for p in contents.glob(pattern)
            }
        )
        if not files:
            continue
        package = lock.packages[native.package]
        purl = f"pkg:deb/debian/{native.package}@{package.version}?arch=source&distro={lock.suite}"
        description = f"built from Debian's {native.package} {package.version} source"
        if package.patches_from:
            description += f" with its patches from {package.patches_from} on"
        components.append(
            Component(
                native.name,
                package.upstream_version,
                purl,
                native.license,
                tuple(files),
                description,
            )
        )
    return [*components, *extra]


def document(
    *,
    version: str,
    arch: str,
    commit: str,
    built: str,
    components: list[Component],
    root_ref: str | None = None,
) -> dict[str, Any]:
    """The CycloneDX document; its serial number is derived from its content, so rebuilds match.
    ``root_ref`` is what the document describes (default: the tarball's generic purl; a package's
    own purl for the .deb and the .rpm)."""
    seen: set[str] = set()
    unique = []
    for component in components:
        if component.purl not in seen:
            seen.add(component.purl)
            unique.append(component)
    root_ref = root_ref or f"pkg:generic/credprovider@{version}?arch={arch}"
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{root_ref}#{commit}#" + ",".join(sorted(seen)))
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": built,
            "tools": {
                "components": [
                    {"type": "application", "name": "credprovider release (release/sbom.py)"}
                ]
            },
            "component": {
                "type": "application",
                "bom-ref": root_ref,
                "name": "credprovider",
                "version": version,
                "purl": root_ref,
                "licenses": [{"expression": "Apache-2.0"}],
                "properties": [
                    {"name": "credprovider:commit", "value": commit},
                    {"name": "credprovider:arch", "value": arch},
                ],
            },
        },
        "components": [component.to_json() for component in unique],
        "dependencies": [{"ref": root_ref, "dependsOn": [component.purl for component in unique]}],
    }
