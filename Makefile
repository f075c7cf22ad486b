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

##@ Tools

.PHONY: tools
tools: $(KUBE_BINS) $(BIN)/etcd $(BIN)/kwok $(BIN)/helm $(BIN)/controller-gen $(VENV)/bin/moto_server ## Build every tool the tests need (cached).

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

$(VENV)/bin/moto_server: test/env/requirements.txt
	$(call timed,moto (.venv),python3 -m venv $(VENV) && $(VENV)/bin/pip install --quiet --disable-pip-version-check -r test/env/requirements.txt)
	@touch $@
