# actgate — a finality sink for AI-agent tool calls, delivered as a Kubernetes operator.
# `make help` lists the targets. `make test` is the one command CI runs (.ci/run).

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
# Keep the Go build cache where it is even when a test exports XDG_CACHE_HOME for kubectl/helm
# (moving it turns a warm link of the control-plane binaries into an 8-minute rebuild).
export GOCACHE ?= $(shell $(GO) env GOCACHE)
GOTESTFLAGS ?=
# envtest packages start real API servers; two cores, so one test binary at a time.
GOTEST_P ?= 1
FUZZTIME ?= 20s
PYTHON ?= python3
BENCHTIME ?= 1s
BENCHCOUNT ?= 6

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
# golangci-lint workers; CI has 2 cores.
LINT_CONCURRENCY ?= 2
LOCALBIN := $(CURDIR)/bin
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -w $$(git ls-files '*.go' | grep -v '^hack/k8sbin/')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: vet $(GOLANGCI_LINT) ## Check formatting, vet, and run the pinned golangci-lint with .golangci.yml.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run --concurrency $(LINT_CONCURRENCY) ./...

.PHONY: lint-fix
lint-fix: $(GOLANGCI_LINT) ## Apply golangci-lint's formatters (gofmt, goimports) and the fixes its linters offer.
	$(GOLANGCI_LINT) run --fix --concurrency $(LINT_CONCURRENCY) ./...

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Install the pinned golangci-lint (GOLANGCI_LINT_VERSION) into bin/.
$(GOLANGCI_LINT):
	@mkdir -p $(LOCALBIN)
	@rm -f $(LOCALBIN)/golangci-lint
	GOBIN=$(LOCALBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $(GOLANGCI_LINT)

.PHONY: envtest
envtest: ## Build etcd, kube-apiserver, kubectl and helm from Go modules into bin/k8s/ (cold ~8 min).
	./hack/envtest-bins.sh

.PHONY: node-bins
node-bins: ## Build kubelet, kube-scheduler, kube-controller-manager, kube-proxy and crictl into bin/k8s/ (cold ~9 min).
	./hack/node-bins.sh

##@ Code generation

# Packages whose kubebuilder markers (crd, rbac, webhook) feed config/. Only folders that exist are
# passed: controller-gen fails on a pattern that matches nothing.
MANIFEST_PATHS := $(foreach d,api controllers webhook,$(if $(wildcard $(d)),paths="./$(d)/..."))

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases), RBAC (config/rbac) and webhook (config/webhook) manifests from the markers.
	$(CONTROLLER_GEN) rbac:roleName=actgate-manager-role crd webhook $(MANIFEST_PATHS) \
		output:crd:artifacts:config=config/crd/bases \
		output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	@$(MAKE) --no-print-directory chart-crds

.PHONY: chart-crds
chart-crds: ## Copy the generated CRDs (config/crd/bases) and manager role (config/rbac/role.yaml) into charts/actgate; a test fails when they differ.
	rm -f charts/actgate/crds/*.yaml
	cp config/crd/bases/*.yaml charts/actgate/crds/
	cp config/rbac/role.yaml charts/actgate/files/manager-role.yaml

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods (api/v1alpha1/zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install the pinned controller-gen (CONTROLLER_TOOLS_VERSION) into bin/.
$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	@rm -f $(LOCALBIN)/controller-gen
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $(CONTROLLER_GEN)

##@ Build

.PHONY: build
build: ## Build the actgate binaries into bin/.
	$(GO) build -o $(LOCALBIN)/ ./cmd/...

# IMAGE_TAG names the tarball's image (default: the chart's image.repository:appVersion);
# IMAGE_PUSH, when set, is a registry reference the image is also pushed to (credentials from
# the Docker config, as `docker login` or `crane auth login` write it).
IMAGE_TAG ?=
IMAGE_PUSH ?=
.PHONY: image
image: ## Build the actgate image without Docker: bin/image/actgate.tar (static, non-root, reproducible); IMAGE_PUSH=REF also pushes it.
	$(GO) run ./hack/image $(if $(IMAGE_TAG),-tag $(IMAGE_TAG)) $(if $(IMAGE_PUSH),-push $(IMAGE_PUSH))

##@ Test

# GOTEST_TIMEOUT bounds each test binary; the real-node suite builds images and brings a node up.
GOTEST_TIMEOUT ?= 30m
# ACTGATE_IMAGE_TAR is the actgate image test/node installs: `make image`'s tarball, built
# first by `make test` and `make test-node`; empty, the suite builds one from this tree itself.
ACTGATE_IMAGE_TAR ?= $(LOCALBIN)/image/actgate.tar

.PHONY: test
test: image test-sdk-go test-sdk-py test-sdk-ts ## Run every test: unit, conformance, MCP interop, fuzz seeds, envtest integration, the real-node suite on the image, the SDKs (needs root; builds what it needs).
	./hack/interop.sh >/dev/null # the interop suite's pinned npm packages (test/interop)
	KUBEBUILDER_ASSETS="$$(./hack/envtest-bins.sh)" ACTGATE_NODE_BINS="$$(./hack/node-bins.sh)" ACTGATE_CHROMIUM="$$(./hack/chromium.sh)" ACTGATE_JAEGER="$$(./hack/jaeger-bin.sh)" \
		ACTGATE_IMAGE_TAR="$(ACTGATE_IMAGE_TAR)" $(GO) test -p $(GOTEST_P) -count=1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) ./...

.PHONY: test-sdk-py
test-sdk-py: ## The Python host-loop module's tests (sdk/python: standard library only, the machine's python3; builds actgate, runs actgate serve).
	cd sdk/python && $(PYTHON) -m unittest discover -v

.PHONY: test-sdk-ts
test-sdk-ts: ## The TypeScript host-loop SDK (sdk/typescript): npm ci from its lockfile, then node:test against a real actgate serve, upstream MCP server and scripted model server.
	cd sdk/typescript && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error && npm test

.PHONY: test-sdk-go
test-sdk-go: ## The Go host-loop client (sdk/go, its own module): the vendor SDKs against a scripted model, a real actgate serve and upstream.
	cd sdk/go && $(GO) mod verify >/dev/null && $(GO) test -count=1 -timeout 10m $(GOTESTFLAGS) ./...

.PHONY: test-sdk-sidecar
test-sdk-sidecar: ## The three SDK suites against the pod's sidecar (test/e2e TestSDKSuitesAgainstSidecar: chart, manager, authority, injected sidecar; part of `make test`).
	KUBEBUILDER_ASSETS="$$(./hack/envtest-bins.sh)" $(GO) test -p 1 -count=1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) -run '^TestSDKSuitesAgainstSidecar$$' ./test/e2e/

.PHONY: test-node
test-node: image ## Only the real-node tests (test/testutil/node, test/node): a one-node cluster with a real kubelet, containerd and runc (needs root).
	KUBEBUILDER_ASSETS="$$(./hack/envtest-bins.sh)" ACTGATE_NODE_BINS="$$(./hack/node-bins.sh)" \
		ACTGATE_IMAGE_TAR="$(ACTGATE_IMAGE_TAR)" $(GO) test -p 1 -count=1 -timeout $(GOTEST_TIMEOUT) $(GOTESTFLAGS) ./test/testutil/node/... ./test/node/...

.PHONY: test-short
test-short: ## Unit tests only (no API server).
	$(GO) test -short ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 20s).
	./hack/fuzz.sh $(FUZZTIME)

.PHONY: bench
bench: ## Run the Go benchmarks (benchstat-friendly output in bin/bench.txt).
	@mkdir -p $(LOCALBIN)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee $(LOCALBIN)/bench.txt

DURABLEROUNDS ?= 5
.PHONY: bench-durable
bench-durable: ## The durable permit path (boltstore IssueConsumeAndPend, sink HandlePermitDurable) against a SQLite baseline (hack/durable-baseline.py): DURABLEROUNDS (5) interleaved rounds at 1 and 64 callers; bin/durable/rounds.json.
	@mkdir -p $(LOCALBIN)/durable
	$(GO) test -c -o $(LOCALBIN)/durable/store.test ./internal/authority/boltstore
	$(GO) test -c -o $(LOCALBIN)/durable/sink.test ./internal/sink
	$(PYTHON) hack/durable-rounds.py --rounds $(DURABLEROUNDS) --store this=$(LOCALBIN)/durable/store.test \
		--sink this=$(LOCALBIN)/durable/sink.test --json $(LOCALBIN)/durable/rounds.json

LOADTIME ?= 10s
LOADTARGET ?= both
.PHONY: load
load: ## Load and soak on loopback only (127.0.0.1): gate and sidecar at concurrency 1, 16, 64 for LOADTIME (10s) each, invariants checked; bin/load/report.{txt,json}.
	@mkdir -p $(LOCALBIN)/load
	KUBEBUILDER_ASSETS="$$(./hack/envtest-bins.sh)" $(GO) run ./test/load -target $(LOADTARGET) -concurrency 1,16,64 \
		-duration $(LOADTIME) -listen 127.0.0.1 -out $(LOCALBIN)/load/report.json | tee $(LOCALBIN)/load/report.txt

.PHONY: verify
verify: lint ## Run lint, then fail when generated files or go.mod are stale.
	./hack/verify.sh
