# kueue-timeshare: a drop-in Kueue controller manager with runtime-aware preemption.
#
#   make run    start a local cluster (simulated Nodes, PODS=false for none) with the manager and a demo (DEMO=none to skip it)
#   make test   everything CI runs: format and vet checks, unit and envtest integration tests, and the
#               end-to-end suite on the local cluster with Pods (test/e2e; alone: make test-e2e)

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
GO ?= go
# DEMO: a directory of manifests, "none", or the name of one under examples/ (demo, timesharing).
DEMO ?= demo
DEMO_DIR = $(if $(filter none,$(DEMO)),none,$(if $(wildcard examples/$(DEMO)),examples/$(DEMO),$(DEMO)))
# PODS=false: `make run` starts etcd and kube-apiserver only (no Pods), and needs fewer binaries.
PODS ?= true
TEST_TIMEOUT ?= 40m
# Extra flags for go test, e.g. GOTEST_FLAGS='-run TestManager -v'.
GOTEST_FLAGS ?=

# One build configuration for vet, tests, `make build` and the release: without cgo and with
# trimmed paths, as hack/release.sh builds the image's binaries, so that the release suite links
# from the build cache the suites filled instead of compiling the manager's graph again. The race
# detector needs cgo: test-race turns it back on.
export GOFLAGS := -mod=readonly -trimpath
export CGO_ENABLED ?= 0

##@ Everyday

.PHONY: run
run: envtest manifests build $(if $(filter false,$(PODS)),,cluster) ## Start a local cluster with simulated Nodes and the manager on loopback, with a live view.
	$(BIN)/local-control-plane --demo "$(DEMO_DIR)" --pods=$(PODS) $(RUN_ARGS)

# Unit and simulator packages run once, under the race detector (test-race), except the CPU-bound
# ones in UNIT_PKGS (the simulator's property checkers, the fuzz corpora of the victim policy and
# the API types): they start no goroutines of their own (their code under test does, and is raced
# in its own packages), and the detector would run them several times slower. The envtest suites
# under test/ run without it: their API server and etcd are separate processes, and the race
# detector would slow the manager's specs several times over.
UNIT_PKGS := ./pkg/simulator
RACE_PKGS = $(filter-out $(UNIT_PKGS),$(shell $(GO) list ./pkg/... ./cmd/... ./apis/... ./hack/... 2>/dev/null | sed 's|^github.com/kueue-timeshare/kueue-timeshare/|./|'))
# The suites under test/, the slowest first: go test starts them in this order, SUITE_PARALLEL at a
# time, and the short ones fill in behind the long ones. Most of them wait on real time (the
# manager's loops, Pods starting): more at once than the two cores use the idle time.
SUITE_PARALLEL ?= 4
SUITE_PKGS = ./test/integration/release ./test/integration/scheduler ./test/e2e ./test/integration/reliability \
  ./test/integration/timebased ./test/integration/chart ./test/integration/protection ./test/integration/notice \
  $(filter-out ./test/integration/release ./test/integration/scheduler ./test/e2e ./test/integration/reliability \
  ./test/integration/timebased ./test/integration/chart ./test/integration/protection ./test/integration/notice,\
  $(shell $(GO) list ./test/... 2>/dev/null | sed 's|^github.com/kueue-timeshare/kueue-timeshare/|./|'))
# The tools the suites run, built in two chains side by side, so that one's downloads and links
# overlap the other's compilation. The Kubernetes binaries share most of their packages: one
# chain builds them one after the other, each reusing the build cache the one before filled
# (built at once, two would compile the same packages twice); the other builds the tools of the
# other modules.
KUBE_TOOLS := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kubectl
OTHER_TOOLS := $(BIN)/etcd $(BIN)/kwok $(BIN)/helm $(BIN)/promtool
# STAGE runs a stage of `make test`, timed into $(STAGE_LOG) when set (.ci/run prints the table).
STAGE := $(ROOT)/hack/stage.sh

.PHONY: test
test: ## Format and vet checks, unit tests (with -race), envtest integration tests and the end-to-end suite.
	@hack/test.sh

.PHONY: test-suites
test-suites: ## The envtest integration suites and the end-to-end suite (needs test-tools and manifests).
	$(GO) test -p $(SUITE_PARALLEL) -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) $(SUITE_PKGS)

.PHONY: test-units
test-units: ## The unit tests: test-race, then test-unit.
	$(STAGE) unit-race $(MAKE) --no-print-directory test-race
	$(STAGE) unit $(MAKE) --no-print-directory test-unit

.PHONY: test-tools
test-tools: ## Build the tools the suites run (envtest, the local cluster, helm, kubectl, promtool).
	@$(MAKE) --no-print-directory $(KUBE_TOOLS) & kube=$$!; \
	  $(MAKE) --no-print-directory $(OTHER_TOOLS); other=$$?; \
	  wait $$kube; kube=$$?; exit $$((kube | other))

.PHONY: test-race
test-race: ## Unit tests under the race detector (all but UNIT_PKGS).
	CGO_ENABLED=1 $(GO) test -race -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) $(RACE_PKGS)
	cd hack/ociimage && CGO_ENABLED=1 $(GO) test -race -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) ./...

.PHONY: test-unit
test-unit: ## The CPU-bound unit tests (UNIT_PKGS: the simulator's property checkers) without the race detector.
	$(GO) test -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) $(UNIT_PKGS)

# The end-to-end suite: the manager, run as the chart's ServiceAccount, on the local cluster with
# Pods (kube-controller-manager, kube-scheduler, simulated Nodes), in real time.
# The soak: hours on the local cluster with Pods, the manager killed every SOAK_KILL_EVERY (not CI).
SOAK_DURATION ?= 2h
SOAK_KILL_EVERY ?= 10m
# Ginkgo ends a suite after an hour unless told otherwise; the soak checks this covers SOAK_DURATION.
SOAK_GINKGO_TIMEOUT ?= 24h

.PHONY: soak
soak: envtest cluster manifests helm-generate $(BIN)/helm ## Soak on the local cluster with Pods for SOAK_DURATION (default 2h), the manager killed every SOAK_KILL_EVERY.
	SOAK_DURATION=$(SOAK_DURATION) SOAK_KILL_EVERY=$(SOAK_KILL_EVERY) $(GO) test -v -count=1 -timeout 0 ./test/e2e -args -ginkgo.v -ginkgo.label-filter=soak -ginkgo.timeout=$(SOAK_GINKGO_TIMEOUT)

.PHONY: test-e2e
test-e2e: envtest cluster manifests helm-generate $(BIN)/helm ## End-to-end suite on the local cluster with Pods (about 16 minutes).
	$(GO) test -count=1 -timeout 30m $(GOTEST_FLAGS) ./test/e2e -args -ginkgo.v

# The long form of the reliability checks: every fuzz target for FUZZ_TIME, the preemptor's
# differential test against upstream on DIFF_CASES generated snapshots, the rotation property checker
# on ROTATION_CASES generated simulator scenarios, and the reliability suite
# (manager killed and restarted, leader election handovers, API faults) with more Jobs and kills.
# `make test` runs the fuzz seed corpora, 1,000 differential cases, 300 rotation scenarios and the
# suite's short form.
# RELIABILITY_LOG_DIR=dir keeps the managers' logs (see docs/reliability.md).
FUZZ_TIME ?= 2m
DIFF_CASES ?= 20000
# Generated scenarios the rotation property checker runs (make test: 300).
ROTATION_CASES ?= 10000
# make test runs the same scenarios every time (seeds from 1); the long form explores from a new
# seed each run (0: from the clock), or replays one: ROTATION_SEED=200856.
ROTATION_SEED ?= 0
FUZZ_TARGETS := \
  ./apis/annotations:FuzzParseToleration ./apis/annotations:FuzzParseExpectedRuntime \
  ./apis/kueue/v1beta2:FuzzExtensions ./apis/config/v1alpha1:FuzzDecode \
  ./pkg/policy:FuzzVictimPolicy ./pkg/policy:FuzzOrdering \
  ./pkg/conversion:FuzzConvertObject ./pkg/queuesettings:FuzzWakeTimes

.PHONY: test-reliability
test-reliability: envtest manifests ## Long fuzzing, a long differential run, and the long form of the restart, leader election and API-fault tests.
	@for t in $(FUZZ_TARGETS); do \
	  pkg="$${t%%:*}"; fn="$${t##*:}"; echo "== fuzz $$fn ($$pkg) for $(FUZZ_TIME)"; \
	  $(GO) test "$$pkg" -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_TIME) || exit 1; \
	done
	$(GO) test ./pkg/scheduler/preemption -run Differential -count 1 -timeout 60m -preemption-diff-cases=$(DIFF_CASES)
	$(GO) test ./pkg/simulator -run '^TestRotationProperties$$' -count 1 -timeout 120m -v -rotation-cases=$(ROTATION_CASES) -rotation-seed=$(ROTATION_SEED) | grep -v -e '^=== RUN'
	RELIABILITY_LONG=1 $(GO) test ./test/integration/reliability -count 1 -timeout 60m -v -args -ginkgo.v

# govulncheck reads the Go vulnerability database that VULNDB names (a URL or file:///ABS/PATH of
# an offline copy); by default an offline copy in ../shared/vulndb when there is one, else the
# network's.
VULNDB ?= $(if $(wildcard $(ROOT)/../shared/vulndb/index/db.json),file://$(abspath $(ROOT)/../shared/vulndb))

.PHONY: vulncheck
vulncheck: $(BIN)/govulncheck ## Known vulnerabilities in the code the binaries call (govulncheck; fails on any not fixed nor accepted, see docs/reliability.md).
	$(BIN)/govulncheck $(if $(VULNDB),-db $(VULNDB)) -format json ./... > $(BIN)/govulncheck.json
	$(GO) run ./hack/vulnreport -accepted hack/vulncheck-accepted.txt < $(BIN)/govulncheck.json

# The version --version and kueue_build_info report: the chart's appVersion and the commit built.
VERSION_PKG := github.com/kueue-timeshare/kueue-timeshare/pkg/version
VERSION_LDFLAGS = -X $(VERSION_PKG).Version=$(APP_VERSION) -X $(VERSION_PKG).GitCommit=$(shell git rev-parse HEAD 2>/dev/null || echo unknown)

.PHONY: build
build: ## Build the manager, the kubectl plugin and the local control plane into bin/.
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/kueue-timeshare ./cmd/kueue-timeshare
	$(GO) build -o $(BIN)/kubectl-timeshare ./cmd/kubectl-timeshare
	$(GO) build -o $(BIN)/local-control-plane ./cmd/local-control-plane

# Each function of ours that names its upstream original ("// Upstream's original: ..."), diffed
# against that original in the kueue version go.mod requires; fails when an original is gone
# (docs/architecture.md, "Upgrading upstream"). UPSTREAM_DIFF_ARGS=-summary prints the counts only.
UPSTREAM_DIFF_ARGS ?=

.PHONY: upstream-diff
upstream-diff: ## Diff our mirrored functions against upstream's originals; fail when one is gone or a difference carries no "// timeshare:" mark.
	$(GO) run ./hack/upstreamdiff -strict $(UPSTREAM_DIFF_ARGS)

.PHONY: feature-footprint
feature-footprint: ## Count, per feature, the files outside its home that name its exported identifiers (FOOTPRINT_ARGS=-list names them).
	$(GO) run ./hack/footprint $(FOOTPRINT_ARGS)

.PHONY: verify
verify: ## Fail on unformatted files, go vet findings, or a feature reaching more than two files outside its package.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))"; \
	  if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd hack/ociimage && $(GO) vet ./...
	$(GO) run ./hack/footprint -max 2

##@ Benchmarks

BENCH_TIME ?= 20x
BENCH_COUNT ?= 1

.PHONY: bench-scheduler
bench-scheduler: ## Time and allocations of ours vs upstream's preemptor (GetTargets), with ratios.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) ./pkg/scheduler/... | $(GO) run ./hack/benchratio

# Throughput benchmark: THROUGHPUT_LOAD is baseline, tas or large (upstream's generator
# configurations), deep (a deep-queue load) or slowcycle (deep queues beside a large topology-aware
# snapshot); THROUGHPUT_SCALE is the fraction of each workloads set that is generated (1 = the full
# 15,000 workloads of baseline); THROUGHPUT_ARGS adds flags, e.g. '-cpuprofile',
# '-variants upstream,off,heads=8,heads=32', '-visibility-probe 1200', '-webhooks' (see
# docs/performance.md, benchmark 1).
THROUGHPUT_LOAD ?= baseline
THROUGHPUT_SCALE ?= 1
THROUGHPUT_ARGS ?=

.PHONY: bench-throughput
bench-throughput: envtest manifests ## A scheduler performance load (THROUGHPUT_LOAD) on envtest: upstream's scheduler vs ours, with ratios.
	$(GO) build -o $(BIN)/bench-throughput ./test/performance/scheduler
	$(BIN)/bench-throughput -load $(THROUGHPUT_LOAD) -scale $(THROUGHPUT_SCALE) $(THROUGHPUT_ARGS)

# Time-sharing benchmark: minAdmitDuration (and the booster's interval) and simulated time per run.
TIMESHARING_WINDOW ?= 1h
TIMESHARING_HORIZON ?= 24h

.PHONY: bench-timesharing
bench-timesharing: ## Time-sharing quality on the simulator: N = 2..10 same-priority workloads, ours vs upstream vs the priority booster.
	@$(GO) test -count=1 -v -run '^TestTimeSharingBenchmark$$' ./test/performance/timesharing \
	  -args -timesharing-benchmark -timesharing-window=$(TIMESHARING_WINDOW) -timesharing-horizon=$(TIMESHARING_HORIZON) \
	  | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS$$' -e '^ok '

# The same benchmark on a local control plane in real time, with a window of TIMESHARING_ENVTEST_WINDOW
# (the webhook's minimum is 1m): every N and approach at once, for 9 windows plus 2 minutes.
TIMESHARING_ENVTEST_WINDOW ?= 1m
# TIMESHARING_ENVTEST_ARGS adds flags, e.g. '-timesharing-envtest-pods -timesharing-envtest-grace=10s' to run
# on the local cluster with Pods (needs `make cluster`) and measure handovers and waits of Pods.
TIMESHARING_ENVTEST_ARGS ?=

.PHONY: bench-timesharing-envtest
bench-timesharing-envtest: envtest manifests ## Time-sharing quality on envtest (real time, about 12 minutes): ours vs upstream vs the priority booster.
	@$(GO) test -count=1 -v -timeout 60m -run '^TestTimeSharingOnEnvtest$$' ./test/performance/timesharing \
	  -args -timesharing-envtest -timesharing-envtest-window=$(TIMESHARING_ENVTEST_WINDOW) $(TIMESHARING_ENVTEST_ARGS) \
	  | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS$$' -e '^ok '

# The scenario `make simulate` runs, and its flags (see docs/simulator.md).
SCENARIO ?= examples/scenarios/gpu-data-scientists.yaml
SIMULATE_ARGS ?= --compare

.PHONY: simulate
simulate: ## Run a simulator scenario: make simulate SCENARIO=file.yaml SIMULATE_ARGS='--compare --timeline'.
	$(GO) run ./cmd/kueue-timeshare simulate -f $(SCENARIO) $(SIMULATE_ARGS)

##@ Packaging

CHART_DIR := charts/kueue-timeshare
CHART_VERSION = $(shell awk '$$1 == "version:" {print $$2}' $(CHART_DIR)/Chart.yaml)
APP_VERSION = $(shell awk '$$1 == "appVersion:" {gsub(/"/, "", $$2); print $$2}' $(CHART_DIR)/Chart.yaml)
# The image `make image-build` tags; the chart's default is kueue-timeshare:<appVersion>.
IMG ?= kueue-timeshare:$(APP_VERSION)
CONTAINER_TOOL ?= docker

.PHONY: helm-package
helm-package: helm-lint ## Package the Helm chart, with the generated CRDs, into dist/kueue-timeshare-<version>.tgz.
	$(BIN)/helm package $(CHART_DIR) --destination dist
	@echo "dist/kueue-timeshare-$(CHART_VERSION).tgz"

.PHONY: helm-lint
helm-lint: helm-generate $(BIN)/helm ## Lint the Helm chart (strict).
	$(BIN)/helm lint --strict $(CHART_DIR)

# `make manifests` also copies its outputs into the chart; this name says why a target needs it.
.PHONY: helm-generate
helm-generate: manifests

# Platforms `make release` builds the manager for.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64

# RELEASE_URL: where the krew manifest (plugin.yaml) says the plugin's archives are downloaded from.
RELEASE_URL ?=

.PHONY: release
release: helm-lint $(BIN)/kubectl ## Release artifacts from HEAD into dist/release-<version>: OCI image, chart (with the image digest), manifests.yaml, dashboard, alerts, binaries, krew manifest, SHA256SUMS.
	RELEASE_URL="$(RELEASE_URL)" hack/release.sh "$(APP_VERSION)" "$(CHART_VERSION)" "$(RELEASE_PLATFORMS)"

.PHONY: image
image: ## Build the manager's image for RELEASE_PLATFORMS from HEAD, without a container engine: dist/image-<version>/kueue-timeshare-<version>-image.oci.tar.
	hack/release.sh --image-only "$(APP_VERSION)" "$(RELEASE_PLATFORMS)"

.PHONY: image-build
image-build: ## Build the manager's container image $(IMG) from the Dockerfile (needs a container engine; `make image` does not).
	$(CONTAINER_TOOL) build -t $(IMG) --build-arg VERSION=$(APP_VERSION) --build-arg GIT_COMMIT=$$(git rev-parse HEAD 2>/dev/null || echo unknown) .

##@ Build outputs (git-ignored)

.PHONY: manifests
manifests: ## Write Kueue's CRDs, webhook configurations and RBAC under config/_output (and into the chart).
	hack/manifests.sh
	hack/chart-generate.sh

.PHONY: envtest
envtest: $(BIN)/etcd $(BIN)/kube-apiserver ## Build etcd and kube-apiserver for envtest from the Go module proxy.

.PHONY: cluster
cluster: envtest $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kwok ## Build kube-controller-manager, kube-scheduler and KWOK for the local cluster with Pods.

.PHONY: tools
tools: $(BIN)/controller-gen $(BIN)/helm $(BIN)/promtool ## Build controller-gen, helm and promtool.

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
$(BIN)/kube-controller-manager: FORCE
	hack/build-tool.sh envtest/kubernetes k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$(KUBE_LDFLAGS)"
$(BIN)/kube-scheduler: FORCE
	hack/build-tool.sh envtest/kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$(KUBE_LDFLAGS)"
$(BIN)/kwok: FORCE
	hack/build-tool.sh tools/kwok sigs.k8s.io/kwok/cmd/kwok kwok
$(BIN)/controller-gen: FORCE
	hack/build-tool.sh tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen controller-gen
$(BIN)/govulncheck: FORCE
	hack/build-tool.sh tools/govulncheck golang.org/x/vuln/cmd/govulncheck govulncheck
# promtool checks and unit-tests the alerting rules; remove_all_sd leaves out Prometheus' service
# discovery plugins (cloud SDKs), which the rule commands do not use, to keep its cold build short.
$(BIN)/promtool: FORCE
	hack/build-tool.sh tools/promtool github.com/prometheus/prometheus/cmd/promtool promtool "" remove_all_sd
# Helm's release build stamps its version and the Kubernetes version it assumes when not talking to
# a cluster (`helm template`, `helm lint`); without them it reports v1.20.
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=v3.19.0 \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34 \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=34
$(BIN)/helm: FORCE
	hack/build-tool.sh tools/helm helm.sh/helm/v3/cmd/helm helm "$(HELM_LDFLAGS)"

.PHONY: clean
clean: ## Remove build outputs (keeps the cached tools in bin/).
	rm -rf config/_output .local dist $(CHART_DIR)/generated

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)
