# TauGrid developer entry points. `make run` and `make test` are the two commands
# from the README; both install into .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs: `make run` needs the runtime only (`pip install -e .`); the targets that
# test, lint or benchmark install the test toolchain too (`.[dev]`).
STAMP := $(VENV)/.installed-dev
RUN_STAMP := $(VENV)/.installed-run
EXTRAS_run :=
EXTRAS_dev := [dev]
WHAT_run := TauGrid and its runtime dependencies
WHAT_dev := TauGrid with its test toolchain

.PHONY: install install-dev run test test-fast lint unit bench bench-quick clean down test-k8s test-long k8s-build s3-build image

# pytest-xdist workers, each in a network namespace of its own (tests/workers.py); their
# seconds per group land in ~/.cache/taugrid/test-durations.json, which orders the next
# run longest first.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS)
# Each target's temporary files are its own (--basetemp, cleared when it starts again):
# pytest's numbered directories keep the 3 newest runs, and another run beside this one
# would delete this one's directories under it.
# Compiled first: this machine's environment sets PYTHONDONTWRITEBYTECODE, so without
# .pyc files every process the tests start (tau commands, hubs, agents, Ray job drivers)
# compiled the TauGrid modules it imports again (0.1-0.2 s of CPU each).
# Byte-compiled before the tests: this machine's environment sets PYTHONDONTWRITEBYTECODE,
# so without .pyc files every process the tests start (tau commands, hubs, agents, Ray
# job drivers) compiled the TauGrid modules it imports again (0.1-0.2 CPU-s each).
COMPILE = $(BIN)/python -m compileall -q -j 0 src tests
PYTEST = $(BIN)/pytest -q $(XDIST) --basetemp=/tmp/tau-pytest-$@

$(VENV)/.installed-%: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@echo "Installing $(WHAT_$*) into $(VENV): about 2 minutes the first time;"
	@echo "pip lists each package as it goes."
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install --progress-bar on -e '.$(EXTRAS_$*)'
	touch $@

install: $(RUN_STAMP)

install-dev: $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/tau up
	$(BIN)/tau run examples/quickstart --watch
	@echo "The embedded platform is still up: try '$(BIN)/tau run list'. Stop it with 'make down'."

# mypy's cache outside the checkout: a fresh clone (CI's) rechecks only the modules whose
# content changed (mypy compares hashes when mtimes differ), about 5 s instead of 60.
MYPY_CACHE ?= $(HOME)/.cache/taugrid/mypy

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples deploy
	$(BIN)/ruff format --check src tests benchmarks examples deploy
	$(BIN)/mypy --cache-dir $(MYPY_CACHE) src benchmarks tests
	$(BIN)/lint-imports

unit: $(STAMP)
	$(COMPILE)
	$(PYTEST)

# A developer's loop: lint-free, the tests that start no Ray cluster and no server process
# of minutes (markers ray, slow, long, k8s), in parallel.
test-fast: $(STAMP)
	$(COMPILE)
	$(PYTEST) -m "not ray and not slow and not long and not k8s"

test: lint unit bench-quick

# The real Kubernetes control plane for tests (docs/kubernetes.md): build its binaries from
# source modules (or reuse them from ~/.cache/taugrid/k8s/), then run tests/k8s on it.
K8S_COMPONENTS ?= etcd kube-apiserver kwok kube-controller-manager kube-scheduler kubelet kueue kuberay helm
k8s-build:
	k8s/build.sh $(K8S_COMPONENTS)

# The project's container image (deploy/image/build.sh): a Debian root, Python, the
# project's wheel and its dependencies, as an OCI archive in ~/.cache/taugrid/image/
# (about 90 s cold; 15 s when only src/ changed; nothing when nothing did).
image:
	deploy/image/build.sh

test-k8s: $(STAMP) k8s-build image
	k8s/build.sh --share-only kueue kuberay
	$(COMPILE)
	TAU_TEST_K8S=1 $(PYTEST) -m k8s tests/k8s

# Only the end-to-end scenarios of minutes each (serving, pipelines, RL, hub failover,
# the multi-region soak); `make test` runs them among the others.
test-long: $(STAMP)
	$(COMPILE)
	$(PYTEST) -m long

# The S3-compatible server of the object-store tests (SeaweedFS weed, built from its Go
# module into ~/.cache/taugrid/seaweedfs/; tests skip without it, CI builds it first).
s3-build:
	s3/build.sh

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks.run_all --quick

down: $(RUN_STAMP)
	$(BIN)/tau down || true

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
