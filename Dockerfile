# syntax=docker/dockerfile:1
# liqo-peering-operator image: a wheel built in the first stage, installed with its runtime
# dependencies only (no compilers, no pip, no dev extras) into a slim Python, run as non-root 65532.
#
# The base is pinned by exact tag. Pin it by digest too (python:3.11.14-slim-bookworm@sha256:...)
# in the release pipeline, where the registry can be asked for it.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml ./
COPY operator/ operator/
# The project's wheel plus a wheel for every runtime dependency (the [dev] extra is not included).
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="liqo-peering-operator" \
      org.opencontainers.image.description="Declarative, GitOps-ready Liqo peerings (LiqoPeering operator)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Install from the wheels only (no index), into a venv without pip; then drop pip, setuptools and
# wheel from the base image so the runtime carries no installer. The base image's python and pip do
# this: /opt/venv/bin goes first on PATH only after this step (the new venv has no pip).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir --no-index --find-links=/wheels /wheels/liqo_peering_operator-*.whl \
    && python -m pip uninstall --yes pip setuptools wheel \
    && rm -rf /root/.cache
ENV PATH=/opt/venv/bin:$PATH
USER 65532:65532
WORKDIR /tmp
# --metrics-port and --health-port defaults.
EXPOSE 8080 8081
ENTRYPOINT ["liqo-peering-operator"]
CMD ["run"]
