"""Container images for localk8s nodes, with no registry: docker-archive tarballs that each node's containerd
imports (`ctr -n k8s.io images import`, the namespace the kubelet uses).

- `docker_archive()`: one layer, its config and `manifest.json`, the layout `docker save` writes;
- `pause_image()`: the Pods' sandbox (pause.c, compiled with gcc -static), cached by its source's hash;
- `built_images()`: what `make images` (hack/build-images.sh) built for this checkout, from .local/images.json;
- `image_files()`, `archive_digests()`, `archive_differences()`: what is in a docker-archive, for the tests of
  the operator image's content and `hack/build-images.sh --verify` (reproducibility).

Archives are cached under ${LPO_CACHE_DIR:-~/.cache/liqo-peering-operator}/images/, keyed by their inputs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .tools import REPO_ROOT, cache_root

PAUSE_SOURCE = Path(__file__).with_name("pause.c")
# Written by hack/build-images.sh: {"<name>": {"ref": ..., "archive": ..., "bytes": ...}}.
BUILT_IMAGES = REPO_ROOT / ".local" / "images.json"


class ImagesMissingError(FileNotFoundError):
    """`make images` has not run in this checkout (or its archives were removed from the cache)."""


@dataclass(frozen=True)
class Image:
    ref: str
    archive: Path


def images_dir() -> Path:
    return cache_root() / "images"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def docker_archive(
    out: Path, ref: str, layer: Path, config: dict[str, Any], created_by: str, base: Sequence[Path] = ()
) -> Path:
    """Write an image as a docker-archive: `layer` is an uncompressed tar of the root filesystem (or, with
    `base`, of what it adds on top of those layers, lowest first), `config` the image's runtime config
    (Entrypoint, Env, User, ...). Images that share a base layer share its blob in containerd's store."""
    layers = [*base, layer]
    diff_ids = [_sha256_file(path) for path in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [{"created_by": f"{path.name} as a layer"} for path in base] + [{"created_by": created_by}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{d}/layer.tar" for d in diff_ids]}]
    # A name of this process's own: tiers side by side may build the same archive at once on an empty cache.
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w") as tar:
        for path, diff_id in zip(layers, diff_ids, strict=True):
            tar.add(path, arcname=f"{diff_id}/layer.tar")
        for name, data in ((config_name, config_bytes), ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    # Renamed into place: an interrupted build never leaves an archive a later run would take as cached.
    tmp.replace(out)
    return out


def pause_image() -> Image:
    """The sandbox image every node's containerd runs Pods in (its `sandbox_image`), built on first use."""
    source = PAUSE_SOURCE.read_bytes()
    key = hashlib.sha256(source).hexdigest()[:16]
    image = Image(f"localk8s.local/pause:{key}", images_dir() / f"pause-{key}.tar")
    if image.archive.is_file():
        return image
    image.archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "pause"
        subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(binary), str(PAUSE_SOURCE)], check=True)
        layer = Path(tmp) / "layer.tar"
        with tarfile.open(layer, "w") as tar:
            info = tar.gettarinfo(str(binary), arcname="pause")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with binary.open("rb") as f:
                tar.addfile(info, f)
        # 65535, as Kubernetes' own pause image runs.
        config = {"Entrypoint": ["/pause"], "User": "65535:65535"}
        docker_archive(image.archive, image.ref, layer, config, "testenv/localk8s/pause.c, gcc -static")
    return image


def built_images() -> dict[str, Image]:
    """The images `make images` built for this checkout: "python-base" and "operator"."""
    if not BUILT_IMAGES.is_file():
        raise ImagesMissingError(f"{BUILT_IMAGES} is missing; run 'make images' (hack/build-images.sh) first")
    entries = json.loads(BUILT_IMAGES.read_text())
    images = {name: Image(entry["ref"], Path(entry["archive"])) for name, entry in entries.items()}
    for image in images.values():
        if not image.archive.is_file():
            raise ImagesMissingError(f"{image.archive} is missing; run 'make images' (hack/build-images.sh) again")
    return images


def ctr_binary() -> str:
    """containerd's client, from Debian's containerd package (hack/install-node-runtime.sh)."""
    found = shutil.which("ctr") or ("/usr/bin/ctr" if os.access("/usr/bin/ctr", os.X_OK) else None)
    if found is None:
        raise FileNotFoundError("ctr is missing; run hack/install-node-runtime.sh (make test and make demo do)")
    return found


WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class ImageFile:
    info: tarfile.TarInfo
    data: bytes | None  # the content, for the paths asked for (regular files only)


@contextmanager
def _layers(archive: Path) -> Iterator[tuple[dict[str, Any], list[tarfile.TarFile]]]:
    """A docker-archive's image config and its layers (tars inside the archive), lowest first."""
    with tarfile.open(archive) as outer, ExitStack() as stack:
        (entry,) = json.load(_member(outer, "manifest.json"))
        config = json.load(_member(outer, entry["Config"]))
        yield config, [stack.enter_context(tarfile.open(fileobj=_member(outer, name))) for name in entry["Layers"]]


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    member = tar.getmember(name)
    while member.issym() or member.islnk():  # docker-archives link <id>/layer.tar to the blob
        member = tar.getmember(os.path.normpath(os.path.join(os.path.dirname(member.name), member.linkname)))
    f = tar.extractfile(member)
    assert f is not None, name
    return f


def _clean(name: str) -> str:
    return os.path.normpath("/" + name).lstrip("/")


def image_files(archive: Path, read: Callable[[str], bool] = lambda _: False) -> dict[str, ImageFile]:
    """The image's file system (path relative to / -> entry), its layers applied in order with their
    whiteouts; the content of the regular files for which `read(path)` is true."""
    files: dict[str, ImageFile] = {}
    with _layers(archive) as (_, layers):
        for layer in layers:
            for info in layer:
                path = _clean(info.name)
                parent, base = os.path.split(path)
                if base == OPAQUE or base.startswith(WHITEOUT):
                    gone = parent if base == OPAQUE else os.path.join(parent, base[len(WHITEOUT) :])
                    for name in [n for n in files if n.startswith(gone + "/") or (n == gone and base != OPAQUE)]:
                        del files[name]
                    continue
                data = None
                if info.isfile() and read(path):
                    f = layer.extractfile(info)
                    data = f.read() if f else b""
                files[path] = ImageFile(info, data)
    files.pop("", None)
    return files


def archive_digests(archive: Path) -> tuple[str, list[str]]:
    """A docker-archive's image ID (its config's digest) and its layers' digests (the config's diff_ids)."""
    with tarfile.open(archive) as outer:
        (entry,) = json.load(_member(outer, "manifest.json"))
        config_bytes = _member(outer, entry["Config"]).read()
    config = json.loads(config_bytes)
    return "sha256:" + hashlib.sha256(config_bytes).hexdigest(), list(config["rootfs"]["diff_ids"])


def _entries(layer: tarfile.TarFile) -> dict[str, tuple[object, ...]]:
    found: dict[str, tuple[object, ...]] = {}
    for info in layer:
        digest = ""
        if info.isfile():
            f = layer.extractfile(info)
            digest = hashlib.sha256(f.read() if f else b"").hexdigest()
        found[_clean(info.name)] = (info.type, oct(info.mode), info.uid, info.gid, info.size, info.mtime,
                                    info.linkname, digest, sorted(info.pax_headers.items()))  # fmt: skip
    return found


def archive_differences(first: Path, second: Path, limit: int = 20) -> list[str]:
    """What differs between two images (docker-archives): the config's fields, then each layer's entries
    (type, mode, owner, size, time, link, content, extended headers); empty when they are the same image."""
    out: list[str] = []
    with _layers(first) as (config_a, layers_a), _layers(second) as (config_b, layers_b):
        for key in sorted(set(config_a) | set(config_b)):
            if key != "rootfs" and config_a.get(key) != config_b.get(key):
                out.append(f"config {key}: {json.dumps(config_a.get(key))} != {json.dumps(config_b.get(key))}")
        if len(layers_a) != len(layers_b):
            out.append(f"{len(layers_a)} layers != {len(layers_b)} layers")
        for i, (a, b) in enumerate(zip(layers_a, layers_b, strict=False)):
            entries_a, entries_b = _entries(a), _entries(b)
            if list(entries_a) != list(entries_b) and set(entries_a) == set(entries_b):
                out.append(f"layer {i}: the same entries in another order")
            for name in sorted(set(entries_a) | set(entries_b)):
                if entries_a.get(name) != entries_b.get(name):
                    out.append(f"layer {i} /{name}: {entries_a.get(name)} != {entries_b.get(name)}")
    if not out and archive_digests(first) != archive_digests(second):
        out.append("the layers' tar streams differ (headers or padding), their entries do not")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])
