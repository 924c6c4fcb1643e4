# draxr: the two entry points are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean manifests controlplane

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/draxr demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check webhook tests e2e bench
	$(BIN)/ruff format --check webhook tests e2e bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/allocate.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis build *.egg-info

manifests: $(STAMP)
	$(BIN)/python -c "from webhook.install.manifests import write_defaults; write_defaults('manifests')"

# A real control plane for e2e tests (etcd, kube-apiserver 1.35/1.36, ...), built from Go modules at the
# versions in e2e/controlplane/versions.env into e2e/controlplane/.cache/bin/ (a no-op once built).
controlplane:
	e2e/controlplane/build.sh
