# kueue-timeshare: a drop-in Kueue controller manager with runtime-aware preemption.
#
#   make run    start a local control plane with the manager and a demo (DEMO=none to skip it)
#   make test   everything CI runs: format and vet checks, unit and envtest integration tests

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
GO ?= go
# DEMO: a directory of manifests, "none", or the name of one under examples/ (demo, timesharing).
DEMO ?= demo
DEMO_DIR = $(if $(filter none,$(DEMO)),none,$(if $(wildcard examples/$(DEMO)),examples/$(DEMO),$(DEMO)))
TEST_TIMEOUT ?= 40m
# Extra flags for go test, e.g. GOTEST_FLAGS='-run TestManager -v'.
GOTEST_FLAGS ?=

export GOFLAGS := -mod=readonly

##@ Everyday

.PHONY: run
run: envtest manifests build ## Start etcd, kube-apiserver and the manager on loopback with a live view.
	$(BIN)/local-control-plane --demo "$(DEMO_DIR)" $(RUN_ARGS)

.PHONY: test
test: verify envtest manifests ## Format and vet checks, unit tests and envtest integration tests.
	$(GO) test -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) ./...

.PHONY: build
build: ## Build the manager and the local control plane into bin/.
	$(GO) build -o $(BIN)/kueue-timeshare ./cmd/kueue-timeshare
	$(GO) build -o $(BIN)/local-control-plane ./cmd/local-control-plane

.PHONY: verify
verify: ## Fail on unformatted files or go vet findings.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))"; \
	  if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

##@ Benchmarks

BENCH_TIME ?= 20x
BENCH_COUNT ?= 1

.PHONY: bench-scheduler
bench-scheduler: ## Time and allocations of ours vs upstream's preemptor (GetTargets), with ratios.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) ./pkg/scheduler/... | $(GO) run ./hack/benchratio

##@ Build outputs (git-ignored)

.PHONY: manifests
manifests: ## Write Kueue's CRDs, webhook configurations and RBAC under config/_output.
	hack/manifests.sh

.PHONY: envtest
envtest: $(BIN)/etcd $(BIN)/kube-apiserver ## Build etcd and kube-apiserver for envtest from the Go module proxy.

.PHONY: tools
tools: $(BIN)/controller-gen $(BIN)/helm ## Build controller-gen and helm.

.PHONY: kubectl
kubectl: $(BIN)/kubectl ## Build kubectl (v1.36.0) to talk to `make run`'s control plane.

# Each tool is rebuilt by hack/build-tool.sh only when its pinned module or flags change.
# Kubernetes binaries built outside their release tooling report v0.0.0 unless told their version.
KUBE_VERSION := v1.36.0
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
  -X k8s.io/component-base/version.gitTreeState=clean
.PHONY: FORCE
$(BIN)/etcd: FORCE
	hack/build-tool.sh envtest/etcd go.etcd.io/etcd/server/v3 etcd
$(BIN)/kube-apiserver: FORCE
	hack/build-tool.sh envtest/kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$(KUBE_LDFLAGS)"
$(BIN)/kubectl: FORCE
	hack/build-tool.sh envtest/kubernetes k8s.io/kubernetes/cmd/kubectl kubectl "$(KUBE_LDFLAGS)"
$(BIN)/controller-gen: FORCE
	hack/build-tool.sh tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen controller-gen
$(BIN)/helm: FORCE
	hack/build-tool.sh tools/helm helm.sh/helm/v3/cmd/helm helm

.PHONY: clean
clean: ## Remove build outputs (keeps the cached tools in bin/).
	rm -rf config/_output .local

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)
