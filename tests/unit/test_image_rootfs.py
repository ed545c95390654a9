"""hack/images/rootfs.py, which assembles the operator image's root filesystem in the Dockerfile: what it
reads from `ldd` and how it copies paths with the symlinks that lead to them (the image it makes:
tests/unit/test_image_contents.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd5a1f2000)
\tlibssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x00007f3a1c200000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f3a1c000000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f3a1c5a0000)
"""


def _rootfs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rootfs", REPO / "hack" / "images" / "rootfs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ldd_output_gives_the_libraries_by_path() -> None:
    rootfs = _rootfs()
    found, missing = rootfs.ldd_libraries(LDD + "\tlibtk8.6.so => not found\n")
    assert found == [
        "/lib/x86_64-linux-gnu/libssl.so.3",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    ]
    assert missing == ["libtk8.6.so"]
    # The host's interpreter, as the image build runs ldd on the base's.
    assert any(path.endswith("/libc.so.6") for path in rootfs.libraries_of([Path(os.path.realpath(sys.executable))]))


def test_a_path_comes_with_the_symlinks_on_its_way_and_a_tree_without_bytecode(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (src / "usr/lib/x86_64-linux-gnu/libc.so.6").write_text("libc")
    (src / "usr/lib/x86_64-linux-gnu/libgone.so").write_text("not asked for")
    os.symlink("usr/lib", src / "lib")
    (src / "usr/lib/python3.11/json/__pycache__").mkdir(parents=True)
    (src / "usr/lib/python3.11/json/__init__.py").write_text("")
    (src / "usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc").write_text("")
    (src / "usr/lib/python3.11/ensurepip").mkdir()
    (src / "usr/lib/python3.11/json/tests").mkdir()
    (src / "etc/python3.11").mkdir(parents=True)
    (src / "etc/python3.11/sitecustomize.py").write_text("")
    os.symlink("/etc/python3.11/sitecustomize.py", src / "usr/lib/python3.11/sitecustomize.py")
    fs = _rootfs().Rootfs(dest, source=src)
    fs.keep("/lib/x86_64-linux-gnu/libc.so.6")
    fs.tree("/usr/lib/python3.11", {"ensurepip"}, {"tests"})
    found = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert found == [
        "etc",
        "etc/python3.11",
        "etc/python3.11/sitecustomize.py",
        "lib",
        "usr",
        "usr/lib",
        "usr/lib/python3.11",
        "usr/lib/python3.11/json",
        "usr/lib/python3.11/json/__init__.py",
        "usr/lib/python3.11/sitecustomize.py",
        "usr/lib/x86_64-linux-gnu",
        "usr/lib/x86_64-linux-gnu/libc.so.6",
    ]
    assert os.readlink(dest / "lib") == "usr/lib"
    assert (dest / "lib/x86_64-linux-gnu/libc.so.6").read_text() == "libc"
