"""The operator image as hack/build-images.sh built it (the docker-archive .local/images.json names): no package
manager, installer or compiler in it, every Python distribution in its venv listed by the SBOM that
hack/sbom.py writes, with its version, and the size the docs state. A missing image fails
these tests until `make images` has run. (Reproducibility: hack/build-images.sh
--verify, which hack/run-tests.sh runs beside the tests.)"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from testenv.localk8s.images import ImageFile, built_images, image_files
from unit import hack_scripts

pytestmark = pytest.mark.image

REPO = Path(__file__).resolve().parents[2]
SITE_PACKAGES = re.compile(r"opt/venv/lib/python3\.\d+/site-packages")
# Package managers, installers and compilers, by file name (with Debian's versioned and triplet-prefixed
# compiler names).
FORBIDDEN_NAME = re.compile(
    r"(dpkg|dpkg-\S+|apt|apt-\S+|aptitude|rpm|rpm\S+|dnf|yum|microdnf|apk|pip|pip3(\.\d+)?|easy_install\S*"
    r"|(x86_64-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|cpp|clang|ld|ld\.bfd|ld\.gold|as)(-\d+(\.\d+)*)?|make|tcc|rustc|cargo)"
)
# Directories of the same: Python's installers (in any site-packages or the standard library) and
# Debian's package database and configuration.
FORBIDDEN_DIR = re.compile(
    r"(.*/(site|dist)-packages/|usr/(local/)?lib/python3\.\d+/)(pip|setuptools|_distutils_hack|wheel|ensurepip)"
    r"|var/lib/(dpkg|apt)|etc/apt|usr/lib/apt"
)


def _is_metadata(path: str) -> bool:
    return path.endswith(".dist-info/METADATA")


def operator_archive() -> Path:
    return built_images()["operator"].archive  # ImagesMissingError says which build script makes it


@functools.cache
def operator_files() -> dict[str, ImageFile]:
    return image_files(operator_archive(), read=_is_metadata)


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_no_package_manager_installer_or_compiler() -> None:
    files = operator_files()
    assert "opt/venv/bin/liqo-peering-operator" in files and "opt/venv/bin/python" in files
    named = sorted(p for p, f in files.items() if not f.info.isdir() and FORBIDDEN_NAME.fullmatch(os.path.basename(p)))
    assert not named, named
    dirs = sorted(p for p, f in files.items() if f.info.isdir() and FORBIDDEN_DIR.fullmatch(p))
    assert not dirs, dirs


def test_the_sbom_lists_every_python_distribution_with_its_version(tmp_path: Path) -> None:
    files = operator_files()
    dist_infos = {p for p in files if p.endswith(".dist-info") and files[p].info.isdir()}
    # Only the venv holds distributions: what the image's interpreter sees is what the SBOM lists.
    assert dist_infos and all(SITE_PACKAGES.fullmatch(os.path.dirname(p)) for p in dist_infos), sorted(dist_infos)
    expected = set()
    for path in dist_infos:
        name, version = os.path.basename(path).removesuffix(".dist-info").rsplit("-", 1)
        expected.add((normalized(name), version))
        metadata = files[f"{path}/METADATA"].data
        assert metadata, f"{path} has no METADATA"
        (tmp_path / os.path.basename(path)).mkdir()
        (tmp_path / os.path.basename(path) / "METADATA").write_bytes(metadata)
    sbom = hack_scripts.load("sbom")
    dists = sbom.installed([str(tmp_path)])
    assert {(normalized(n), v) for n, v in dists} == expected
    assert normalized("liqo-peering-operator") in {n for n, _ in expected}
    doc = sbom.sbom("liqo-peering-operator", "0.0.0", "sha256:" + "0" * 64, dists)
    listed = {(normalized(p["name"]), p["versionInfo"]) for p in doc["packages"] if p["SPDXID"] != "SPDXRef-Image"}
    assert listed == expected


def test_the_docs_state_the_image_size() -> None:
    size = operator_archive().stat().st_size / 1e6  # its layers, uncompressed, and its config
    page = (REPO / "docs" / "operations" / "releases.md").read_text()
    stated = re.search(r"The image is (\d+) MB", page)
    assert stated, "docs/operations/releases.md does not state the image's size ('The image is N MB ...')"
    assert abs(int(stated[1]) - size) <= 0.05 * size, f"the image is {size:.0f} MB"
