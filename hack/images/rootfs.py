"""The operator image's root filesystem: only what its Python runs with, copied out of the Python image the
Dockerfile builds on. The Dockerfile's `rootfs` stage runs it with the venv's interpreter:

    /opt/venv/bin/python rootfs.py /rootfs

and the final stage (FROM scratch) is that directory. Kept: the venv, the interpreter and its standard
library (not ensurepip, idlelib, tkinter, turtledemo, lib2to3, the test packages, nor the base's own
site-packages with pip, setuptools and wheel), every shared library the interpreter and the extension
modules load (as `ldd` finds them, with the symlinks that lead to them) and libgcc_s (glibc loads it when a
thread exits), CA certificates, the C.UTF-8 locale, /etc/passwd and /etc/group, the dynamic loader's
configuration and its cache rebuilt for what is kept, and /tmp. Not kept: the package manager (dpkg, apt),
shells and coreutils, perl, pip, compilers.

Reproducible: the bytecode is compiled anew, hash-based (no source times in it) and with a fixed hash seed
(sets in constants are marshalled in their iteration order), and every file's time is SOURCE_DATE_EPOCH
(default 0). Standard library only: it runs in the base image.
"""

from __future__ import annotations

import compileall
import os
import py_compile
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Set as AbstractSet
from pathlib import Path

# Standard library packages that only install, test or draw: none is imported by the operator.
STDLIB_LEFT_OUT = {
    "ensurepip",
    "idlelib",
    "tkinter",
    "turtledemo",
    "lib2to3",
    "test",
    "site-packages",
    "dist-packages",
    "config-3.11-x86_64-linux-gnu",
}
# Extension modules of the same kind: Tk (whose libraries a slim image lacks) and CPython's test modules.
DYNLOAD_LEFT_OUT = re.compile(r"^(_tkinter|_test|_xxtest|xx|_ctypes_test)")
# Single files and directories the runtime needs besides Python and its libraries; those missing in the
# base are skipped (`ldd` and the standard library are what must be there).
EXTRA = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/ssl/openssl.cnf",
    "/usr/lib/ssl/cert.pem",
    "/usr/lib/ssl/certs",
    "/usr/lib/ssl/openssl.cnf",
    "/usr/lib/locale/C.utf8",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
)
LDD_LIBRARY = re.compile(r"=>\s+(/\S+)\s+\(0x[0-9a-f]+\)$|^\s*(/\S+)\s+\(0x[0-9a-f]+\)$")


class RootfsError(RuntimeError):
    """A file the image needs is not in the base (a library of the interpreter, a path asked for)."""


def ldd_libraries(output: str) -> tuple[list[str], list[str]]:
    """The libraries in `ldd`'s output: those found (absolute paths, as the loader names them) and the
    names of those not found."""
    found, missing = [], []
    for line in output.splitlines():
        if "=> not found" in line:
            missing.append(line.split()[0])
            continue
        match = LDD_LIBRARY.search(line.strip())
        if match:
            found.append(match.group(1) or match.group(2))
    return found, missing


class Rootfs:
    """Copies paths of `source` (in the image build: `/`) to `dest`, each with its parent directories and
    the symlinks on the way (so /lib/x86_64-linux-gnu/libc.so.6 brings the symlink /lib and the file under
    /usr/lib)."""

    def __init__(self, dest: Path, source: Path = Path("/")) -> None:
        self.dest = dest
        self.source = source
        self.done: set[str] = set()

    def _src(self, path: str) -> Path:
        return self.source / path.lstrip("/")

    def _dst(self, path: str) -> Path:
        return self.dest / path.lstrip("/")

    def _dir(self, path: str) -> None:
        """The directory `path` (no content), with its parents, modes as in the source."""
        if path == "/":
            self.dest.mkdir(parents=True, exist_ok=True)
        elif not self._dst(path).is_dir():
            self._dir(os.path.dirname(path))
            self._dst(path).mkdir()
            shutil.copystat(self._src(path), self._dst(path))

    def keep(self, path: str, recursive: bool = False) -> None:
        """`path` (absolute) and the symlinks that lead to it; a directory with its content if `recursive`."""
        parts = [p for p in path.split("/") if p]
        current = "/"
        for i, part in enumerate(parts):
            candidate = os.path.join(current, part)
            if self._src(candidate).is_symlink():
                self._link(candidate)
                target = os.path.normpath(os.path.join(current, os.readlink(self._src(candidate))))
                self.keep(os.path.join(target, *parts[i + 1 :]), recursive)
                return
            current = candidate
        src = self._src(current)
        if not src.exists():
            raise RootfsError(f"{current} is not in the base image")
        if src.is_dir():
            self._dir(current)
            if recursive and current not in self.done:
                self.done.add(current)
                self.tree(current)
        elif current not in self.done:
            self.done.add(current)
            self._dir(os.path.dirname(current))
            shutil.copy2(src, self._dst(current), follow_symlinks=False)

    def _link(self, path: str) -> None:
        if path not in self.done:
            self.done.add(path)
            self._dir(os.path.dirname(path))
            os.symlink(os.readlink(self._src(path)), self._dst(path))

    def tree(
        self, top: str, left_out: AbstractSet[str] = frozenset(), nested_left_out: AbstractSet[str] = frozenset()
    ) -> None:
        """The directory `top` with its content, without bytecode (compiled anew), without the entries of
        `top` in `left_out` and those of its subdirectories in `nested_left_out`."""
        self._dir(top)
        self.done.add(top)
        for entry in sorted(os.scandir(self._src(top)), key=lambda e: e.name):
            path = os.path.join(top, entry.name)
            if entry.name in left_out or entry.name == "__pycache__" or entry.name.endswith(".pyc"):
                continue
            if entry.is_symlink():
                self._link(path)
                target = os.path.normpath(os.path.join(top, os.readlink(entry.path)))
                if self._src(target).exists():
                    self.keep(target, recursive=self._src(target).is_dir())
            elif entry.is_dir():
                self.tree(path, nested_left_out, nested_left_out)
            else:
                self.keep(path)


def elf_files(top: str) -> list[Path]:
    """The shared objects under `top` (extension modules and the libraries wheels bundle)."""
    return sorted(p for p in Path(top).rglob("*.so*") if p.is_file() and not p.is_symlink())


def libraries_of(binaries: list[Path]) -> list[str]:
    """Every library the binaries load. The interpreter's must all be in the base; an extension module
    whose library the base lacks cannot be imported there either, and is only reported."""
    found: set[str] = set()
    for binary in binaries:
        proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        if proc.returncode != 0 and "not a dynamic executable" in proc.stdout + proc.stderr:
            continue
        if proc.returncode != 0:
            raise RootfsError(f"ldd {binary}: {proc.stdout}{proc.stderr}")
        libraries, missing = ldd_libraries(proc.stdout)
        if missing and binary == binaries[0]:
            raise RootfsError(f"{binary} needs {', '.join(missing)}, not in the base image")
        if missing:
            print(f"warning: {binary} needs {', '.join(missing)}, not in the base image", file=sys.stderr)
        found.update(libraries)
    return sorted(found)


def set_times(root: Path, epoch: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (epoch, epoch), follow_symlinks=False)
    os.utime(root, (epoch, epoch))


def build(dest: Path, epoch: int) -> None:
    venv = sys.prefix
    if venv == sys.base_prefix:
        raise RootfsError("run rootfs.py with the venv's interpreter (/opt/venv/bin/python)")
    # The standard library as the interpreter finds it (in a venv, sysconfig's platstdlib is the venv's).
    stdlibs = sorted({sysconfig.get_path("stdlib"), os.path.dirname(os.__file__)})
    dynload = next(path for path in sys.path if os.path.basename(path) == "lib-dynload")
    fs = Rootfs(dest)
    fs.keep(venv, recursive=True)
    fs.keep(sys.executable)
    for lib in stdlibs:
        fs.tree(lib, STDLIB_LEFT_OUT | {"lib-dynload"}, {"test", "tests", "idle_test"})
    modules = [e.path for e in os.scandir(dynload) if e.is_file() and not DYNLOAD_LEFT_OUT.match(e.name)]
    for module in sorted(modules):
        fs.keep(module)
    interpreter = Path(os.path.realpath(sys.executable))
    # The interpreter first: it must find all of its libraries.
    libraries = libraries_of([interpreter, *elf_files(venv), *map(Path, sorted(modules))])
    for lib in libraries:
        fs.keep(lib)
    libc = next(lib for lib in libraries if os.path.basename(lib) == "libc.so.6")
    fs.keep(os.path.join(os.path.dirname(os.path.realpath(libc)), "libgcc_s.so.1"))
    for path in EXTRA:
        if os.path.lexists(path):
            fs.keep(path, recursive=True)
    (dest / "tmp").mkdir(exist_ok=True)
    os.chmod(dest / "tmp", 0o1777)
    # The loader's cache, for what is kept (a base may keep libraries outside the loader's default paths,
    # as the official Python image keeps libpython in /usr/local/lib). -X: the symlinks are the base's.
    ldconfig = shutil.which("ldconfig", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if ldconfig and (dest / "etc" / "ld.so.conf").exists():
        subprocess.run([ldconfig, "-X", "-r", str(dest)], check=True)
    for top in sorted({venv, *stdlibs}):
        # A file that does not compile (none should) is only imported more slowly: pip does not fail
        # either.
        compileall.compile_dir(
            str(dest / top.lstrip("/")),
            quiet=1,
            force=True,
            stripdir=str(dest),
            prependdir="/",
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    set_times(dest, epoch)


def main() -> None:
    if sys.flags.hash_randomization:
        # A fixed seed: the same sources compile to the same bytecode.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    try:
        build(dest, int(os.environ.get("SOURCE_DATE_EPOCH") or 0))
    except RootfsError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
