# Entry points for people and CI. Each target is a thin wrapper around a script in hack/.
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: venv lock tools runtime images release clusters-up clusters-down liqo-up demo demo-down test unit e2e lint generate bench soak docs docs-serve
# Real nodes per cluster for `make clusters-up` (0: control planes only, as the fast suites use them).
NODES ?= 0
# The control planes' Kubernetes for `make clusters-up` (empty: KUBERNETES_VERSION; or hack/versions.env's
# KUBERNETES_FLOOR_VERSION, control planes only).
KUBERNETES ?=

venv:            ## Python virtualenv with the operator and dev tools, at the versions uv.lock pins
	hack/venv.sh

lock:            ## Re-lock the dependencies (uv.lock) after editing pyproject.toml, then update the venv
	hack/venv.sh lock

tools:           ## Build the Kubernetes components, etcd, helm, CoreDNS, Prometheus into the cache (idempotent)
	hack/build-tools.sh

runtime:         ## containerd, runc, CNI plugins, nftables, buildah, mmdebstrap from Debian (apt; skipped when present)
	hack/install-node-runtime.sh

images: venv     ## The operator image from the Dockerfile (on a base built from Debian), loaded into running nodes
	hack/build-images.sh

release: venv tools ## Image, chart and SBOM into an OCI registry: REGISTRY=host/path [VERSION=x.y.z, default pyproject.toml's] [REGISTRY_CA=ca.crt]
	VERSION=$(VERSION) REGISTRY=$(REGISTRY) REGISTRY_CA=$(REGISTRY_CA) hack/release.sh

clusters-up: venv tools  ## Two local clusters: .local/clusters/{consumer,provider}.kubeconfig (NODES=1: a real node each; KUBERNETES=1.29.15: the floor)
	if [[ $(NODES) != 0 ]]; then hack/install-node-runtime.sh; fi
	PYTHONPATH=. $(PY) -m testenv.localk8s up --dir .local/clusters --nodes $(NODES) \
		$(if $(KUBERNETES),--kubernetes-version $(KUBERNETES)) consumer provider

clusters-down:   ## Stop the local clusters, leaving nothing behind
	PYTHONPATH=. $(PY) -m testenv.localk8s down --dir .local/clusters

generate: venv   ## Regenerate the CRD and its copies from the pydantic model, and the docs' flag and value tables
	$(PY) hack/crdgen.py
	$(PY) hack/gen-docs.py

docs: venv       ## The documentation site, built strictly into .local/site (a broken link or a page left out fails)
	hack/docs.sh build

docs-serve: venv ## The documentation site on http://127.0.0.1:8000, rebuilt as you edit
	hack/docs.sh serve

lint: venv       ## ruff, mypy and the layer contract (.importlinter)
	hack/lint.sh

unit: venv       ## The unit tests: the Python environment, and helm and promtool from `make tools`
	.venv/bin/pytest tests/unit testenv/tests -m "not e2e and not image and not gitops" -q

test:            ## The whole suite: tools, lint, unit and e2e tests
	hack/test.sh

bench: venv tools  ## Benchmarks, not tests (not in `make test`): docs/performance.{json,png}; ARGS="--runs 1 --scale 1,10"
	hack/build-liqo.sh
	PYTHONPATH=. $(PY) -m bench $(ARGS)

soak: venv tools  ## 200 create/delete cycles against the stand-in, the operator's RSS/threads/connections sampled: docs/soak.json, docs/reliability.md; ARGS="--cycles 50"
	PYTHONPATH=. $(PY) -m bench.soak $(ARGS)

demo:            ## Two local clusters, Liqo, the operator and an example peering that becomes ready
	hack/demo.sh

demo-down:
	hack/demo.sh down
