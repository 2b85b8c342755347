# Developer entry points. Every target works from a fresh clone; tools are pinned in go.mod.
SHELL := /usr/bin/env bash -o pipefail
CONTROLLER_GEN := go tool controller-gen
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ROLES := controller operator imagebuilder provider-libvirt

.PHONY: all
all: generate manifests build

.PHONY: generate
generate: ## Deepcopy methods of the API types.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## CRDs and one ClusterRole per role, from the API types and rbac markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@set -e; for role in $(ROLES); do \
	  dir=$${role/provider-libvirt/provider\/libvirt}; \
	  $(CONTROLLER_GEN) rbac:roleName=banlieue-$$role paths=./internal/$$dir/... output:rbac:dir=config/rbac/$$role; \
	  cp config/rbac/$$role/role.yaml charts/banlieue/files/rbac/$$role.yaml; \
	done
	cp config/crd/bases/*.yaml charts/banlieue/crds/
	cp config/admission/provider-accounts.yaml config/admission/import-jobs.yaml config/admission/provider-writes.yaml charts/banlieue/files/admission/

.PHONY: docs
docs: ## The API reference (docs/reference/api.md) from the generated CRDs.
	go run ./hack/apidocs

.PHONY: build
build: ## The banlieue binary, into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/banlieue ./cmd/banlieue

.PHONY: test
test: ## The whole test suite against real parts (what CI runs).
	hack/test.sh

.PHONY: lint
lint: ## gofmt, go vet, golangci-lint (hack/golangci-lint.sh), and the import-graph boundaries.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	hack/golangci-lint.sh run ./...
	@# The benchmarks build only with their tags (docs/performance.md); without these lines
	@# nothing would ever check them.
	go vet -tags bench,loadbench ./bench/...
	hack/golangci-lint.sh run --build-tags bench,loadbench ./bench/...
	@# So does the real node's test (docs/guides/real-node.md).
	go vet -tags node ./test/node/...
	hack/golangci-lint.sh run --build-tags node ./test/node/...

.PHONY: lab
lab: ## The local lab (hack/lab.sh up).
	hack/lab.sh up

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-10s %s\n", $$1, $$2}'
