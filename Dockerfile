# syntax=docker/dockerfile:1
# liqo-peering-operator image: a wheel built in the first stage, installed with its runtime
# dependencies only, at the versions uv.lock pins (no dev extras), into a venv; the image is that venv and
# only what its Python needs out of the slim Python image (no package manager, shell, pip or compiler),
# run as non-root 65532. Built twice from the same inputs, it has the same layer and digest
# (docs/operations/releases.md).
#
# The base is pinned by exact tag. Pin it by digest too (python:3.11.14-slim-bookworm@sha256:...)
# in the release pipeline, where the registry can be asked for it.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml uv.lock ./
COPY operator/ operator/
# A wheel for every runtime dependency exactly as uv.lock pins it (the [dev] extra is not included), each
# checked against the lock's hashes, then the project's own wheel. uv (hack/venv.sh's version) only reads
# the lock: a new release of a dependency never reaches the image unless uv.lock is updated.
RUN pip install --no-cache-dir "uv==0.13.9" \
    && mkdir -p /wheels \
    && uv export --frozen --no-emit-project --format requirements-txt --output-file /tmp/locked.txt \
    && uv export --frozen --no-emit-project --no-hashes --format requirements-txt --output-file /wheels/pins.txt \
    && pip wheel --no-cache-dir --require-hashes --wheel-dir /wheels -r /tmp/locked.txt \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# The runtime's root filesystem: the venv, installed from the wheels only (no index), the locked pins
# first, without pip, then checked against the project's requirements; and out of the base image only what
# its Python runs with (hack/images/rootfs.py: the interpreter, its standard library and the shared
# libraries they load). No package manager, shell, pip or compiler goes further. The bytecode is compiled
# anew, hash-based, and every file's time is SOURCE_DATE_EPOCH: the same inputs give the same layer.
FROM ${PYTHON_IMAGE} AS rootfs
ARG SOURCE_DATE_EPOCH=0
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
COPY hack/images/rootfs.py /tmp/rootfs.py
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-compile --no-index --find-links=/wheels -r /wheels/pins.txt \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-compile --no-index --no-deps /wheels/liqo_peering_operator-*.whl \
    && python -m pip --python /opt/venv/bin/python check \
    && /opt/venv/bin/python /tmp/rootfs.py /rootfs

FROM scratch
ARG VERSION=0.1.0
COPY --from=rootfs /rootfs/ /
LABEL org.opencontainers.image.title="liqo-peering-operator" \
      org.opencontainers.image.description="Declarative, GitOps-ready Liqo peerings (LiqoPeering operator)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /tmp
# --metrics-port and --health-port defaults.
EXPOSE 8080 8081
ENTRYPOINT ["liqo-peering-operator"]
CMD ["run"]
