# One place for every path the build uses.
PYTHON      ?= python3
VENV        := .venv
BIN         := .bin
VT          := $(VENV)/bin/virtualtarget
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
CP_MODULE   := tools/control-plane
CP_BINARIES := $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kubectl
# The node tier's parts (tests/node, `make cluster`), built in the same `go build`.
NODE_BINARIES := $(BIN)/kubelet $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kube-proxy
K8S_VERSION := $(shell sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' $(CP_MODULE)/go.mod)
# Every Go build's compiler and linker flags: no debug information (harness/gobuild.py).
GO_GCFLAGS  := $(shell $(PYTHON) -m harness.gobuild gcflags)
GO_LDFLAGS  := $(shell $(PYTHON) -m harness.gobuild ldflags)
# Stamp the release into the binaries, as the release build does (`kubectl version` needs it).
CP_LDFLAGS  := $(GO_LDFLAGS) -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
               -X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION)

export VIRTUALTARGET_BIN_DIR := $(abspath $(BIN))

# The version `make release` builds (default: pyproject.toml's; a cut one from releases.toml).
V ?=

.PHONY: all venv release previous-release crds docs control-plane jumpstarter jumpstarter-images jumpstarter-controller-images main-client kubevirt kubevirt-crds kubevirt-node test main-images main-stack changed unit e2e node image lock check run cluster bench clean

all: crds

venv: $(STAMP)

# uv installs the venv: 33 CPU-s and 18 s where pip took 57 CPU-s and 60 s (from empty
# caches, docs/measurements.md). Its pin is the dev extra's, pyproject.toml's one. It
# compiles the bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set (these machines
# set it) every process would otherwise compile its imports afresh (in CI at 0f647aa the
# end-to-end tier took 455 CPU-s instead of 309).
UV_PIN := $(shell sed -n 's/^ *"\(uv==[^"]*\)",$$/\1/p' pyproject.toml)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q '$(UV_PIN)'
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -e '.[dev]'
	touch $@

## Regenerate api/ models, crds/ and the API reference in docs/reference/ from schemas/
## (byte for byte reproducible), and deploy/base/rbac/ from the components' access tables.
crds: $(STAMP)
	$(VT) crds
	$(PY) -m harness.rbac

## The documentation site (mkdocs.yml) into .site/, strictly: a broken link or anchor, or
## a page missing from the navigation, fails. Nothing is fetched.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

## kube-apiserver, etcd and kubectl, built from Go modules into $(BIN) (first build: minutes).
control-plane: $(CP_BINARIES) $(NODE_BINARIES)

CP_PACKAGES := ./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
               k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
               k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
CP_LOG      := $(BIN)/build.log

# go build -v names each package as it compiles: every 200th is shown as progress, the
# whole output goes to $(CP_LOG), and a failure shows its last lines and the command.
$(CP_BINARIES) $(NODE_BINARIES) &: $(CP_MODULE)/go.mod $(CP_MODULE)/go.sum
	@command -v go >/dev/null || { echo "control-plane: no Go toolchain on PATH; install Go 1.26 (see docs/development.md)"; exit 1; }
	@echo "control-plane: building kube-apiserver, etcd, kubectl, kubelet, kube-controller-manager, kube-scheduler and kube-proxy from Go modules into $(BIN)/ (first build: tens of minutes; docs/measurements.md)"
	@mkdir -p $(BIN)
	@cd $(CP_MODULE) && go build -v -gcflags="$(GO_GCFLAGS)" -ldflags "$(CP_LDFLAGS)" -o $(abspath $(BIN))/ $(CP_PACKAGES) > $(abspath $(CP_LOG)) 2>&1 & \
	pid=$$!; i=0; while kill -0 $$pid 2>/dev/null; do sleep 2; i=$$((i + 1)); \
		if [ $$((i % 15)) -eq 0 ]; then echo "control-plane: $$(wc -l < $(CP_LOG)) packages compiled so far"; fi; done; \
	if ! wait $$pid; then \
		tail -n 20 $(CP_LOG); \
		echo "control-plane: build failed (full log: $(CP_LOG)); run: cd $(CP_MODULE) && go build -o $(abspath $(BIN))/ $(CP_PACKAGES)"; \
		rm -f $(CP_BINARIES) $(NODE_BINARIES); exit 1; \
	fi
	@touch $(CP_BINARIES) $(NODE_BINARIES)
	@echo "control-plane: ready in $(BIN)/"

## Jumpstarter's 0.9.0 controller and router, and main's exporter-set controller and
## operator, each built from its source tarball (../shared/vendor, or JUMPSTARTER_SOURCE and
## JUMPSTARTER_MAIN_SOURCE) into $(BIN)/jumpstarter-<key>/ (its digest and the flags), with the CRDs they need
## (first build: minutes; then cached; harness/jumpstarter_build.py).
jumpstarter: $(STAMP)
	$(PY) -m harness.jumpstarter_build

## Jumpstarter's images: `jumpstarter-controller-images`, then main's exporter and QEMU
## runtime images, from main's Python and Rust source (uv, cargo) on the local debootstrap
## base, as docker-archives in .cache/images named as main's e2e manifest runs them, once
## per set of inputs (harness/main_images.py); `make main-images` builds and runs them.
## And main's client from the same wheels (`main-client`), which leases their instances.
jumpstarter-images: jumpstarter-controller-images main-client
	$(PY) -m harness.main_images

## Jumpstarter main's client, `jmp` and its Python API, from main's wheels (built first if
## they are not) in a venv under .cache/jumpstarter-main (harness/main_client.py).
main-client: $(STAMP)
	$(PY) -m harness.main_client

## Jumpstarter's controller and operator images, release 0.9.0's and main's: the
## controller-and-router image and the operator image of each, each its Containerfile's final
## stage on the local debootstrap base with the programs built from its source (cached as
## `make jumpstarter` caches), as docker-archives in .cache/images tagged with the names the
## manifests run them by, once per set of inputs (harness/jumpstarter_images.py).
jumpstarter-controller-images: $(STAMP)
	$(PY) -m harness.jumpstarter_images

## KubeVirt v1.7.0 from its Go module: its binaries, its five component images on a
## debootstrap of Debian 13 (one docker-archive) and the kubevirt-operator.yaml and
## kubevirt-cr.yaml a user applies, under .cache/kubevirt, each step once per set of
## inputs (first build: minutes; harness/kubevirt_build.py). Needs libvirt-dev.
kubevirt: $(STAMP)
	$(PY) -m harness.kubevirt_build

## KubeVirt's VirtualMachine and VirtualMachineInstance CRDs as its virt-operator makes them
## (harness/kubevirt_crds: a program run inside KubeVirt's v1.7.0 module), cached under
## .cache/kubevirt for the loopback tests; a part of `make kubevirt`'s cost (no binary, no
## image, no libvirt).
kubevirt-crds: $(STAMP)
	$(PY) -m harness.kubevirt_crds > /dev/null

# Parallel workers of `make test` (pytest-xdist): the node tier is three units of work (the
# groups of tests/node/sharing.py's BESIDE on a worker each, on the first's cluster),
# every other test module one each (tests/conftest.py); the tests mostly wait, so more
# workers than cores pay (docs/measurements.md).
TEST_WORKERS ?= 4

## Unit, property and end-to-end tests, the node tier's and KubeVirt's pools included; not
## main's exporter and runtime images (`make main-images`: 322 s and 212 CPU-s more in CI's
## `make test` at 94cab53, docs/measurements.md).
test: $(STAMP) control-plane jumpstarter jumpstarter-controller-images kubevirt kubevirt-crds release previous-release
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope -m "not main_images and not main_stack"

## Main's exporter and QEMU runtime images built (`make jumpstarter-images`' second half) and
## run by runc as main's provisioner runs them (tests/image/test_main_images.py).
main-images: $(STAMP)
	$(PY) -m pytest -m main_images tests/image/test_main_images.py

## Jumpstarter main's whole stack on the node, three ways, on main's own e2e pool
## (tests/node/test_main_stack_node.py: about 225 s on a cluster of its own).
main-stack: $(STAMP) control-plane jumpstarter jumpstarter-images release
	$(PY) -m pytest -m main_stack tests/node/test_main_stack_node.py

## KubeVirt pools on real KubeVirt on the node, alone (tests/node/test_kubevirt_node.py:
## about five minutes, two of them KubeVirt's install).
kubevirt-node: $(STAMP) control-plane jumpstarter jumpstarter-images kubevirt
	$(PY) -m pytest -m kubevirt

## The tests a change touches (since BASE, default main; harness/affected.py), in seconds
## to minutes: the developer's loop.
BASE ?= main
changed: $(STAMP)
	$(PY) -m harness.affected --base $(BASE)

unit: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadscope -m 'not e2e and not image and not node'

e2e: $(STAMP) control-plane jumpstarter
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope -m e2e

## The node tier alone: a real single-node cluster on this machine (root; docs/development.md).
node: $(STAMP) control-plane jumpstarter jumpstarter-images kubevirt
	$(PY) -m pytest -m node

## The product image, the QEMU exporter image (images/qemu-exporter) and the KubeVirt exporter
## image (images/kubevirt-exporter, with the driver from ../shared/vendor) on a local
## debootstrap base (no registry needed), as docker-archives for `ctr -n k8s.io images
## import` (see harness/images.py; the base is built once per cache folder); and the node
## tier's marker guests (harness/guest.py), each built once per cache folder.
image: $(STAMP)
	$(PY) -m harness.images
	$(PY) -m harness.guest --all

## A release into dist/$(V)/: the three images as archives that ctr, podman and docker
## load, an SBOM of each, the manifests naming them by digest, the CHANGELOG's section,
## SHA256SUMS (harness/release.py; root, as `make image`).
release: $(STAMP) control-plane
	$(PY) -m harness.release $(if $(V),--version $(V))

## The product of the release before this version (releases.toml) and its manifests, into
## .cache/release/previous/: what the node tier's upgrade test installs first.
previous-release: $(STAMP) control-plane
	$(PY) -m harness.release --previous --product-only --dist .cache/release/previous

## Resolve requirements.lock (every runtime and build dependency, with hashes) with uv.
lock: $(STAMP)
	$(PY) -m harness.lock

## ruff, mypy (strict), the import contracts, generated api/models/, crds/, docs/reference/
## and requirements.lock up to date, and the documentation site's strict build.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports
	$(VT) crds --check
	$(PY) -m harness.rbac --check
	$(PY) -m harness.lock --check
	$(MAKE) --no-print-directory docs

## The main job: a loopback control plane with the webhook and the reconciler.
run: $(STAMP) control-plane
	$(PY) -m harness.dev

## A real cluster (kubelet, containerd, kube-proxy, ...) on this machine (root); NODES=2: two nodes.
cluster: $(STAMP) control-plane
	$(PY) -m harness.cluster --nodes $(or $(NODES),1)

bench: $(STAMP) control-plane
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(BIN) .run .cache
