# draxr: the two entry points are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean manifests helm controlplane e2e-local

# The first run installs draxr and its test tools into .venv: say so, and what each step is.
$(STAMP): pyproject.toml
	@echo "draxr: setting up $(VENV) (first run only, about a minute): creating the virtualenv..."
	@$(PYTHON) -m venv $(VENV)
	@echo "draxr: upgrading pip..."
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "draxr: installing draxr with its dev extra (kubernetes client, uvicorn, CEL engines, pytest, ruff, mypy)..."
	@$(BIN)/python -m pip install --quiet --progress-bar off -e '.[dev]'
	@touch $(STAMP)
	@echo "draxr: $(VENV) ready."

# The demo runs on the API emulator (e2e/emulator), which only a checkout has: not an installed command.
demo: $(STAMP)
	$(BIN)/python -m e2e.demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check webhook tests e2e bench
	$(BIN)/ruff format --check webhook tests e2e bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Everything but the real control plane (e2e-local): the e2e scenarios run on the emulator here.
# The e2e scenarios' targets here are the emulator's two (a user's cluster is `DRAXR_E2E_TARGETS=cluster`).
unit: $(STAMP)
	DRAXR_E2E_TARGETS=emulator,emulator-gate-off $(BIN)/pytest -q -n 4 -m 'not timed' --ignore=e2e/controlplane --ignore=e2e/images
	DRAXR_E2E_TARGETS=emulator,emulator-gate-off $(BIN)/pytest -q -m timed --ignore=e2e/controlplane --ignore=e2e/images

bench: $(STAMP)
	$(BIN)/python bench/allocate.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis build *.egg-info

manifests: $(STAMP)
	$(BIN)/python -c "from webhook.install.files import write_defaults; write_defaults('manifests')"
	$(BIN)/python -c "from webhook.install.monitoring import write_defaults; write_defaults('manifests/monitoring')"
	$(BIN)/python -c "from webhook.install.monitoring import CHART_RULES, rules_yaml; CHART_RULES.write_text(rules_yaml())"

# helm for the chart tests, built with `go install` into .ci/bin (a no-op once built; put .ci/bin on
# PATH). Without Go the chart tests skip with that reason, except under CI=true.
helm:
	.ci/helm.sh

# The e2e cluster's binaries (etcd; kube-apiserver, kube-controller-manager, kube-scheduler and kubelet of
# Kubernetes 1.34 to 1.37; draxr's fake runtime, DRA driver and device plugin; the CEL oracle of
# bench/cel_differential.py; the real node runtime: containerd, CNI plugins, kube-proxy of
# RUNTIME_RELEASES, pause), built from Go modules (pause with gcc) at
# the versions in e2e/controlplane/versions.env into ~/.cache/draxr/controlplane/bin (XDG_CACHE_HOME;
# shared by every clone: a no-op once built).
controlplane:
	e2e/controlplane/build.sh

# The binaries first (built when missing), then the test images (e2e/images: built with buildah from
# Debian packages and the pause binary, cached by their inputs; .ci/image-tools.sh installs the tools;
# `make test` leaves them out), then the e2e suite on real clusters: the launcher's smoke tests, then the e2e scenarios on each matrix row
# (1.34 gate off, 1.35 gate off and on, 1.36 default, 1.37), each a control plane with two real kubelets
# and draxr installed as subprocesses (e2e/local.py). Builds the binaries first when needed. Without them
# (no Go, no module proxy) this skips with the build's reason, except under CI=true, where that is a
# failure. Needs kubectl on PATH (.ci/kubectl.sh). Built already: then no Go is needed (build.sh asks for
# it before it looks at the binaries).
CONTROLPLANE_BUILT := $(BIN)/python -c "import sys; from e2e.local import ROWS, unavailable as u; \
	from e2e.controlplane.launcher import find_cel_oracle as o; \
	from e2e.controlplane.runtime_bins import runtime_unavailable as rt; \
	sys.exit(any(u(r) for r in ROWS.values()) or isinstance(o(), str) or rt() is not None)"

# Clusters at once: each row (and each module with a cluster of its own, the containerd rows as one)
# is a group one pytest-xdist worker runs whole (e2e/conftest.py: cluster_group), so each cluster
# starts once. The clusters mostly wait on one another's timers, so two share 2 cores well.
E2E_WORKERS ?= 2

e2e-local: $(STAMP)
	@if $(CONTROLPLANE_BUILT) || e2e/controlplane/build.sh; then \
		$(BIN)/pytest -q e2e/images && \
		DRAXR_E2E_TARGETS=controlplane $(BIN)/pytest -q -n $(E2E_WORKERS) --dist loadgroup --durations=15 \
			e2e --ignore=e2e/images; \
	elif [ "$${CI:-}" = true ]; then \
		echo "e2e-local: FAILED: the control plane could not be built (see above); CI=true makes that a failure" >&2; \
		exit 1; \
	else \
		echo "e2e-local: SKIPPED: the control plane could not be built (see above)"; \
	fi
