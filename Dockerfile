# syntax=docker/dockerfile:1
# liqo-peering-operator image: a wheel built in the first stage, installed with its runtime
# dependencies only, at the versions uv.lock pins (no compilers, no pip, no dev extras), into a slim
# Python, run as non-root 65532.
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

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="liqo-peering-operator" \
      org.opencontainers.image.description="Declarative, GitOps-ready Liqo peerings (LiqoPeering operator)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Install from the wheels only (no index), the locked pins first, into a venv without pip, and check that
# they satisfy the project's requirements; then drop pip, setuptools and wheel from the base image so the
# runtime carries no installer. The base image's python and pip do this: /opt/venv/bin goes first on PATH
# only after this step (the new venv has no pip).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-index --find-links=/wheels -r /wheels/pins.txt \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-index --no-deps /wheels/liqo_peering_operator-*.whl \
    && python -m pip --python /opt/venv/bin/python check \
    && python -m pip uninstall --yes pip setuptools wheel \
    && rm -rf /root/.cache
ENV PATH=/opt/venv/bin:$PATH
USER 65532:65532
WORKDIR /tmp
# --metrics-port and --health-port defaults.
EXPOSE 8080 8081
ENTRYPOINT ["liqo-peering-operator"]
CMD ["run"]
