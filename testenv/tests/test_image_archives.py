"""What is in a docker-archive (testenv.localk8s.images): the file system its layers make, whiteouts applied,
and what differs between two archives (hack/build-images.sh --verify)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from testenv.localk8s.images import archive_differences, archive_digests, docker_archive, image_files


def layer(path: Path, entries: dict[str, bytes | None], mtime: int = 0) -> Path:
    """A layer tarball: name -> content (None: a directory)."""
    with tarfile.open(path, "w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def test_the_layers_make_one_file_system_whiteouts_applied(tmp_path: Path) -> None:
    lower_entries: dict[str, bytes | None] = {"usr/": None, "usr/bin/": None, "usr/bin/dpkg": b"x", "etc/": None}
    lower_entries |= {"etc/apt/": None, "etc/apt/sources.list": b"deb", "opt/": None, "opt/a": b"a"}
    lower = layer(tmp_path / "lower.tar", lower_entries)
    upper = layer(tmp_path / "upper.tar", {"usr/bin/.wh.dpkg": b"", "etc/apt/.wh..wh..opq": b"", "opt/b": b"b"})
    archive = docker_archive(tmp_path / "image.tar", "example/image:1", upper, {"Cmd": ["a"]}, "test", base=[lower])
    files = image_files(archive, read=lambda path: path.startswith("opt/"))
    assert sorted(files) == ["etc", "etc/apt", "opt", "opt/a", "opt/b", "usr", "usr/bin"]
    assert files["opt/b"].data == b"b" and files["usr"].data is None


def test_two_archives_of_the_same_layers_and_config_are_the_same_image(tmp_path: Path) -> None:
    one = layer(tmp_path / "one.tar", {"opt/": None, "opt/a": b"a"})
    first = docker_archive(tmp_path / "first.tar", "example/image:1", one, {"Cmd": ["a"]}, "test")
    again = docker_archive(tmp_path / "again.tar", "example/image:1", one, {"Cmd": ["a"]}, "test")
    assert archive_differences(first, again) == []
    assert archive_digests(first) == archive_digests(again)
    later = layer(tmp_path / "later.tar", {"opt/": None, "opt/a": b"a"}, mtime=1)
    other = docker_archive(tmp_path / "other.tar", "example/image:1", later, {"Cmd": ["b"]}, "test")
    differences = archive_differences(first, other)
    assert differences[0] == 'config config: {"Cmd": ["a"]} != {"Cmd": ["b"]}'
    assert [d.split(":")[0] for d in differences[1:]] == ["layer 0 /opt", "layer 0 /opt/a"]
