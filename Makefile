# Developer entry points. Every target works from a fresh clone; tools are pinned in go.mod.
SHELL := /usr/bin/env bash -o pipefail
# The Go release of go.mod's toolchain line (hack/lib/toolchain.sh), for every go command below:
# a machine ignores that line on its own.
export GOTOOLCHAIN := go1.27.3
CONTROLLER_GEN := go tool controller-gen
# What `banlieue version` reports (cmd/banlieue/version.go): the tag when HEAD is tagged (SemVer,
# e.g. v0.1.0), else tag-distance-commit or the short commit, -dirty with local changes; and the
# full commit. `make build` is the one way the binary is built, for the lab, the image
# (hack/image.sh) and the tests (internal/testenv.Banlieue) alike.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BIN ?= bin/banlieue
ROLES := controller operator imagebuilder provider-libvirt provider-vsphere

.PHONY: all
all: generate manifests build

.PHONY: generate
generate: ## Deepcopy methods of the API types.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## CRDs and one ClusterRole per role, from the API types and rbac markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@set -e; for role in $(ROLES); do \
	  dir=$${role/provider-/provider\/}; \
	  $(CONTROLLER_GEN) rbac:roleName=banlieue-$$role paths=./internal/$$dir/... output:rbac:dir=config/rbac/$$role; \
	  cp config/rbac/$$role/role.yaml charts/banlieue/files/rbac/$$role.yaml; \
	done
	cp config/crd/bases/*.yaml charts/banlieue/files/crds/
	cp config/admission/provider-accounts.yaml config/admission/import-jobs.yaml config/admission/provider-writes.yaml config/admission/controller-secrets.yaml config/admission/operator-workloads.yaml charts/banlieue/files/admission/

.PHONY: docs
docs: ## The API reference (docs/reference/api.md) from the generated CRDs, and the chart README's values table.
	go run ./hack/apidocs
	go run ./hack/chartdoc

.PHONY: build
build: ## The banlieue binary (static, version and commit stamped), into bin/ (BIN=path elsewhere).
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN) ./cmd/banlieue

.PHONY: image
image: ## The container image, without a container engine, into bin/banlieue-image.tar (hack/image.sh).
	hack/image.sh

.PHONY: release
release: ## The release artifacts into dist/: install.yaml, the chart, the image, SHA256SUMS (hack/release.sh).
	hack/release.sh

.PHONY: test
test: ## The whole test suite against real parts (what CI runs).
	hack/test.sh

.PHONY: test-unit
test-unit: ## The quick loop: pure and API-server packages, no root, libvirtd, node or guest (hack/test.sh --quick).
	hack/test.sh --quick

.PHONY: lint
lint: ## gofmt, go vet, golangci-lint (hack/golangci-lint.sh), kube-api-linter on api/ (hack/kube-api-linter.sh), the import-graph boundaries, shellcheck (hack/shellcheck.sh), and govulncheck (hack/govulncheck.sh).
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	hack/golangci-lint.sh run ./...
	@# The API types against the Kubernetes API conventions the project keeps (.golangci-kal.yml).
	hack/kube-api-linter.sh
	@# The benchmarks build only with their tags (docs/performance.md); without these lines
	@# nothing would ever check them.
	go vet -tags bench,loadbench ./bench/...
	hack/golangci-lint.sh run --build-tags bench,loadbench ./bench/...
	@# So do the real node's tests (docs/guides/real-node.md), the image controller's included.
	go vet -tags node ./test/node/... ./internal/provider/libvirt/image/
	hack/golangci-lint.sh run --build-tags node ./test/node/... ./internal/provider/libvirt/image/
	@# And Cluster API's end-to-end suite (docs/guides/cluster-api.md).
	go vet -tags capi ./test/capi/...
	hack/golangci-lint.sh run --build-tags capi ./test/capi/...
	@# Every shell script git tracks.
	hack/shellcheck.sh
	@# Known vulnerabilities our code reaches, in the toolchain and the modules (docs/security.md).
	hack/govulncheck.sh

.PHONY: lab
lab: ## The local lab (hack/lab.sh up).
	hack/lab.sh up

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-10s %s\n", $$1, $$2}'
