# instance-manager — build, test and local-environment entry points.
#
# Everything the tests need is built or installed here from the package
# registries (Go module proxy, PyPI) into bin/ and .venv/, cached and rebuilt
# only when a pinned version changes.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

BIN := $(CURDIR)/bin
VENV := $(CURDIR)/.venv
export GOBIN := $(BIN)

# Pinned tool versions. Changing one rebuilds just that tool.
KUBE_VERSION := v1.36.3# also the k8s.io/kubernetes version in tools/kube/go.mod
KWOK_VERSION := v0.8.0
HELM_VERSION := v3.22.0
CONTROLLER_GEN_VERSION := v0.23.0
CLUSTER_AUTOSCALER_VERSION := 1.36.1

# The cluster-autoscaler source: the one build input that may come from
# outside the checkout, because the Go module proxy does not serve
# k8s.io/autoscaler/cluster-autoscaler. It is the cluster-autoscaler/
# directory of kubernetes/autoscaler at tag cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION),
# pruned to the AWS provider (docs/autoscaling.md, "Autoscaling", says how to make it from
# upstream). Override with make tools CA_SOURCE=/path/to/tarball.
CA_SOURCE ?= $(CURDIR)/../shared/third_party/cluster-autoscaler/cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION)-aws.tar.gz

# The release version: the chart's version and appVersion, the image's tag
# and the binary's --version all come from the VERSION file.
VERSION := $(shell cat $(CURDIR)/VERSION)
# The OCI image layout `make image` writes, which the install test and the
# demo unpack and run.
IMAGE_LAYOUT ?= $(BIN)/image
DIST := $(CURDIR)/dist
IMAGEBUILD := go run ./build/image/cmd/imagebuild

KUBE_BINS := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION)

# timed NAME, COMMAND: print what is built and how long it took.
define timed
	@start=$$(date +%s); echo ">> building $(1)"; \
	$(2); \
	echo ">> built $(1) in $$(( $$(date +%s) - start ))s"
endef

##@ Development

.PHONY: build
build: ## Build the instance-manager binary into bin/.
	go build -o $(BIN)/instance-manager .

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet and a gofmt check.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

.PHONY: generate
generate: $(BIN)/controller-gen ## Generate deepcopy code for api/.
	$(BIN)/controller-gen object paths=./api/...

.PHONY: manifests
manifests: $(BIN)/controller-gen ## Generate the CRD into config/crd and the chart.
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
	rm -f charts/instance-manager/crds/*.yaml
	cp config/crd/*.yaml charts/instance-manager/crds/

.PHONY: demo
demo: tools image ## Run the demo: the chart installed locally, tenants' groups to Ready, an image rollout, a broken image halted after its canary and rolled back, deletion (DEMO_KEEP=1 keeps it running).
	go build -o $(BIN)/demo ./test/demo
	$(TEST_ENV) $(BIN)/demo -dir $(LOCAL)/demo

.PHONY: chart-lint
chart-lint: $(BIN)/helm ## helm lint the chart, with default values and with cert-manager.
	$(BIN)/helm lint --strict charts/instance-manager
	$(BIN)/helm lint --strict charts/instance-manager --set certManager.enabled=true

##@ Release

.PHONY: image
image: ## Build the multi-arch OCI image (linux/amd64, linux/arm64) into bin/image without a container engine; prints its digest.
	$(call timed,image $(VERSION),$(IMAGEBUILD) build -o $(IMAGE_LAYOUT))

.PHONY: push
push: image ## Push the image: make push IMAGE=<registry>/<repository>:<tag> (credentials from ~/.docker/config.json).
	@if [ -z "$(IMAGE)" ]; then echo "IMAGE is required: make push IMAGE=<registry>/<repository>:<tag>"; exit 1; fi
	$(IMAGEBUILD) push -layout $(IMAGE_LAYOUT) $(IMAGE)

.PHONY: set-version
set-version: ## Set the release version everywhere it is written: make set-version V=0.3.0 (VERSION, the chart's version and appVersion).
	@if ! [[ "$(V)" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]]; then echo "V must be a semantic version such as 0.3.0, got '$(V)'"; exit 1; fi
	echo "$(V)" > VERSION
	sed -i -e 's/^version: .*/version: $(V)/' -e 's/^appVersion: .*/appVersion: "$(V)"/' charts/instance-manager/Chart.yaml

.PHONY: release
release: image $(BIN)/helm ## Write the release into dist/: the image (OCI layout and tar), the packaged chart, the CRDs, SHA256SUMS.
	rm -rf $(DIST) && mkdir -p $(DIST)
	cp -R $(IMAGE_LAYOUT) $(DIST)/instance-manager-image-$(VERSION)
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C $(DIST)/instance-manager-image-$(VERSION) -cf $(DIST)/instance-manager-image-$(VERSION).oci.tar .
	$(BIN)/helm package charts/instance-manager --version $(VERSION) --app-version $(VERSION) --destination $(DIST)
	cat config/crd/*.yaml > $(DIST)/instance-manager-crds-$(VERSION).yaml
	cd $(DIST) && sha256sum *.tgz *.tar *.yaml > SHA256SUMS
	@echo ">> release $(VERSION) in dist/: image $$($(IMAGEBUILD) digest $(IMAGE_LAYOUT))"; ls -l $(DIST)

##@ Tests

# Tests that need the local environment (control plane, kwok, moto) find the
# tools through these variables; without them they skip, so `go test ./...`
# alone runs the unit tier.
TEST_ENV := IM_ENV_BIN_DIR=$(BIN) IM_ENV_VENV=$(VENV) IM_IMAGE_LAYOUT=$(IMAGE_LAYOUT)
GO_TEST_FLAGS ?= -count=1 -timeout 45m
# Four test packages at a time on CI's 2 cores: the end-to-end packages
# mostly wait on controllers (with three side by side the CPU was 30-40%
# busy), so the autoscaler tests and the self-contained copy run beside
# them (docs/testing.md, "How long make test takes").
GO_TEST_PARALLEL ?= 4
# The longest packages are named first: go test runs packages in the order
# given (depth-first priority, -p at a time), and ./... alone would start
# them after most of the others. The end-to-end tier is three packages
# (rotation, rollout, lifecycle) so that they run side by side.
SLOW_TEST_PACKAGES := ./test/e2e/rotation/ ./test/e2e/rollout/ ./test/e2e/lifecycle/ ./test/autoscaling/ ./test/selfcontained/

.PHONY: test
test: tools image vet ## Run every test tier: unit, integration and end-to-end; prints the end-to-end drain audit.
	@mkdir -p $(LOCAL) && rm -f $(LOCAL)/e2e-audit
	$(call timed,all tests,$(TEST_ENV) IM_E2E_AUDIT=$(LOCAL)/e2e-audit go test $(GO_TEST_FLAGS) -p $(GO_TEST_PARALLEL) $(SLOW_TEST_PACKAGES) ./...)
	@sed 's/^/>> end-to-end drain audit: /' $(LOCAL)/e2e-audit 2>/dev/null || echo ">> end-to-end drain audit: not run"
	$(call timed,fuzz targets,$(MAKE) --no-print-directory fuzz)
	$(call timed,chaos tests,$(MAKE) --no-print-directory chaos)

# The chaos suite (test/chaos) runs alone, after the other tiers, so its
# load does not share the machine with them. It prints its figures as
# FIGURE lines; the full log is in .local/chaos.log.
CHAOS_RUN ?= .

.PHONY: chaos
chaos: tools ## Chaos tests: AWS faults, bad input, webhook outage, manager kills, leader changes, load, spot interruptions of waiting groups (CHAOS_RUN=<regexp>, IM_CHAOS_SEED, IM_CHAOS_GROUPS, IM_CHAOS_LOAD_GROUPS); prints FIGURE lines.
	@mkdir -p $(LOCAL)
	$(TEST_ENV) IM_CHAOS=1 go test $(GO_TEST_FLAGS) -v -run '$(CHAOS_RUN)' ./test/chaos/ 2>&1 | tee $(LOCAL)/chaos.log | \
		grep --line-buffered -E '^(FIGURE |chaos seed|groups:|=== RUN|--- |\s+--- |ok |FAIL|PASS|panic:)|^\s+[a-z_]+_test\.go:[0-9]+:'

# Fuzz targets and their packages; make fuzz runs each for FUZZTIME.
FUZZ_TARGETS := boundaries:FuzzParse boundaries:FuzzEffective webhooks:FuzzAdmission
FUZZTIME ?= 15s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 15s; make test runs it).
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo ">> fuzzing $$fn ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$pkg/ || exit 1; done

.PHONY: test-stress
test-stress: tools ## Integration and end-to-end tiers STRESS_ROUNDS times (default 5) beside a second copy of them, then the chaos suite STRESS_CHAOS_ROUNDS times beside a second copy of it (STRESS_CHAOS_LOAD=burn: CPU burners instead); prints N passed, M failed per package.
	$(TEST_ENV) test/stress/stress.sh

.PHONY: test-unit
test-unit: ## Unit tier only: no control plane, no emulator.
	go test -count=1 ./...

.PHONY: bench
bench: tools ## Benchmarks (numbers, not pass/fail): Go benchmarks, then test/bench's figures (BENCH lines, test/bench/results.json).
	$(TEST_ENV) go test -run '^$$' -bench . -benchmem ./...
	$(TEST_ENV) go run ./test/bench

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN{FS=":.*##"} /^##@/{printf "\n%s\n",substr($$0,5)} /^[a-zA-Z_-]+:.*##/{printf "  %-14s %s\n",$$1,$$2}' $(MAKEFILE_LIST)

##@ Tools

.PHONY: tools tool-builds
tools: ## Build every tool the tests need (cached; side by side, as the Go builds use the CPU and the Python venvs mostly wait on the package index).
	@$(MAKE) --no-print-directory -j4 --output-sync=target tool-builds
tool-builds: $(KUBE_BINS) $(BIN)/etcd $(BIN)/kwok $(BIN)/helm $(BIN)/controller-gen $(VENV)/bin/moto_server $(BIN)/checkov/bin/checkov cluster-autoscaler

$(KUBE_BINS) &: tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(BIN)
	$(call timed,kube-apiserver kube-controller-manager kube-scheduler $(KUBE_VERSION),cd tools/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
	@touch $(KUBE_BINS)

$(BIN)/etcd: tools/etcd/go.mod tools/etcd/go.sum
	@mkdir -p $(BIN)
	$(call timed,etcd,cd tools/etcd && go build -o $(BIN)/etcd go.etcd.io/etcd/server/v3)
	@touch $@

# Tools installed straight from their own modules carry their version in a
# stamp file, so a version bump in this Makefile triggers a rebuild.
$(BIN)/.kwok-$(KWOK_VERSION):
	@mkdir -p $(BIN) && rm -f $(BIN)/.kwok-*
	$(call timed,kwok $(KWOK_VERSION),go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION))
	@touch $@
$(BIN)/kwok: $(BIN)/.kwok-$(KWOK_VERSION)
	@touch $@

$(BIN)/.helm-$(HELM_VERSION):
	@mkdir -p $(BIN) && rm -f $(BIN)/.helm-*
	$(call timed,helm $(HELM_VERSION),go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION))
	@touch $@
$(BIN)/helm: $(BIN)/.helm-$(HELM_VERSION)
	@touch $@

$(BIN)/.controller-gen-$(CONTROLLER_GEN_VERSION):
	@mkdir -p $(BIN) && rm -f $(BIN)/.controller-gen-*
	$(call timed,controller-gen $(CONTROLLER_GEN_VERSION),go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION))
	@touch $@
$(BIN)/controller-gen: $(BIN)/.controller-gen-$(CONTROLLER_GEN_VERSION)
	@touch $@

# bin/cluster-autoscaler, built from CA_SOURCE. Its stamp names the version
# and the tarball's checksum, so a new version or a changed tarball rebuilds
# it and nothing else does. The source is unpacked into a fixed directory in
# bin/ (symbolic links resolved, so every checkout sharing that bin/ builds
# in one place) and Go's build cache, which keys on source paths, serves the
# next build; only the Go module proxy is
# used for its dependencies (the tarball carries go.sum). Where the tarball
# is absent, make tools says so and goes on: the other tests still run, and
# the autoscaler tests fail naming what is missing (or skip with
# SKIP_CLUSTER_AUTOSCALER=1).
CA_PROXY ?= https://proxy.golang.org
CA_SRC_DIR := $(or $(realpath $(BIN)),$(BIN))/.cluster-autoscaler-src
.PHONY: cluster-autoscaler
ifneq ($(wildcard $(CA_SOURCE)),)
CA_SUM := $(shell sha256sum < '$(CA_SOURCE)' | cut -c1-16)
CA_STAMP := $(BIN)/.cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION)-$(CA_SUM)
cluster-autoscaler: $(BIN)/cluster-autoscaler
$(CA_STAMP):
	@mkdir -p $(BIN) && rm -f $(BIN)/.cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION)-* && rm -rf $(CA_SRC_DIR) && mkdir -p $(CA_SRC_DIR)
	tar -xzf '$(CA_SOURCE)' -C $(CA_SRC_DIR)
	$(call timed,cluster-autoscaler $(CLUSTER_AUTOSCALER_VERSION),cd $(CA_SRC_DIR)/cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION) && GOFLAGS=-mod=readonly GOPROXY=$(CA_PROXY) GOWORK=off go build -tags aws -ldflags "-s -w" -o $(BIN)/cluster-autoscaler .)
	@touch $@
$(BIN)/cluster-autoscaler: $(CA_STAMP)
	@touch $@
else
cluster-autoscaler:
	@echo ">> cluster-autoscaler NOT built: its source $(CA_SOURCE) is missing (set CA_SOURCE=<tarball>);"; \
	echo "   the autoscaler tests will fail saying so, or skip with SKIP_CLUSTER_AUTOSCALER=1"
endif

$(VENV)/bin/moto_server: test/env/requirements.txt
	$(call timed,moto (.venv),python3 -m venv $(VENV) && $(VENV)/bin/pip install --quiet --disable-pip-version-check -r test/env/requirements.txt)

# The chart's security scanner, in a venv of its own (its dependencies would
# move moto's); every version pinned in the requirements file.
$(BIN)/checkov/bin/checkov: charts/instance-manager/testdata/checkov-requirements.txt
	$(call timed,checkov (bin/checkov),rm -rf $(BIN)/checkov && python3 -m venv $(BIN)/checkov && $(BIN)/checkov/bin/pip install --quiet --disable-pip-version-check --no-deps -r $<)
	@touch $@
	@touch $@

##@ Local environment

LOCAL := $(CURDIR)/.local

.PHONY: dev-up
dev-up: tools ## Start the local environment in the background (control plane, kwok, moto, bridge); writes .local/kubeconfig and .local/aws.env.
	@mkdir -p $(LOCAL)
	@if [ -f $(LOCAL)/devenv.pid ] && kill -0 "$$(cat $(LOCAL)/devenv.pid)" 2>/dev/null; then \
		echo "dev environment already running (pid $$(cat $(LOCAL)/devenv.pid)); run make dev-down first"; exit 1; \
	fi
	go build -o $(BIN)/devenv ./test/env/cmd/devenv
	@rm -f $(LOCAL)/kubeconfig $(LOCAL)/aws.env $(LOCAL)/devenv.pid $(LOCAL)/devenv.pids
	@$(TEST_ENV) nohup $(BIN)/devenv -out $(LOCAL) >$(LOCAL)/devenv.log 2>&1 & pid=$$!; \
	echo ">> devenv started (pid $$pid), log in .local/devenv.log; waiting for it to come up"; \
	for i in $$(seq 1 180); do \
		if [ -f $(LOCAL)/kubeconfig ] && kubectl --kubeconfig $(LOCAL)/kubeconfig get nodes >/dev/null 2>&1; then break; fi; \
		if ! kill -0 $$pid 2>/dev/null; then echo "devenv exited; last lines of .local/devenv.log:"; tail -n 30 $(LOCAL)/devenv.log; exit 1; fi; \
		if [ $$i -eq 180 ]; then echo "devenv not up after 180s; last lines of .local/devenv.log:"; tail -n 30 $(LOCAL)/devenv.log; exit 1; fi; \
		sleep 1; \
	done; \
	echo ">> local environment up (stop it with: make dev-down)"; \
	echo "   kubectl --kubeconfig .local/kubeconfig get nodes"; \
	echo "   export KUBECONFIG=$(LOCAL)/kubeconfig"; \
	echo "   source .local/aws.env && aws autoscaling describe-auto-scaling-groups"; \
	echo "   (aws.env points AWS_ENDPOINT_URL at moto: $$(sed -n 's/^export AWS_ENDPOINT_URL=//p' $(LOCAL)/aws.env))"; \
	echo "   Instances of moto Auto Scaling groups become kwok nodes; component logs are in .local/devenv/logs/"

.PHONY: dev-down
dev-down: ## Stop the local environment started by dev-up and check that none of its processes is left.
	@if [ ! -f $(LOCAL)/devenv.pid ]; then echo "no dev environment running (no .local/devenv.pid)"; exit 0; fi; \
	pid=$$(cat $(LOCAL)/devenv.pid); \
	children=$$(sed -n 's/^[^=]*=//p' $(LOCAL)/devenv.pids 2>/dev/null | tr '\n' ' '); \
	if kill -TERM $$pid 2>/dev/null; then \
		for i in $$(seq 1 60); do kill -0 $$pid 2>/dev/null || break; sleep 0.5; done; \
		if kill -0 $$pid 2>/dev/null; then echo "devenv (pid $$pid) still running after 30s; sending SIGKILL"; kill -KILL $$pid; sleep 1; fi; \
	fi; \
	left=""; for c in $$children; do if kill -0 $$c 2>/dev/null; then left="$$left $$c"; fi; done; \
	if [ -n "$$left" ]; then echo "processes started by devenv are still running:"; ps -o pid=,args= -p "$$(echo $$left | tr ' ' ',')"; exit 1; fi; \
	rm -f $(LOCAL)/devenv.pid $(LOCAL)/devenv.pids $(LOCAL)/kubeconfig $(LOCAL)/aws.env; \
	echo ">> local environment stopped: devenv (pid $$pid) and the processes it started ($$children) are gone"
