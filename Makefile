# Sluice build and test entry points. `make test` is what CI runs (.ci/run).

GO          ?= go
BIN         := bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)
TOOLS       := $(CURDIR)/$(BIN)/tools
STATICCHECK := $(TOOLS)/staticcheck
# staticcheck, pinned; installed through the Go module proxy into bin/tools.
STATICCHECK_VERSION := v0.8.2
# Fuzz budgets are execution counts, not durations: a duration-based
# -fuzztime can fail spuriously with "context deadline exceeded" on Go 1.26
# (golang/go#75804, fixed in Go 1.27).
FUZZTIME    ?= 500000x
BENCHTIME   ?= 1s

.PHONY: all build etcdload benchplot demo test lint bench bench-full anchors bench-go fuzz clean

all: build

## build: the sluice binary, in bin/sluice, and beside it bin/sluice-shim,
## which the container runtime creates containers through
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sluice ./cmd/sluice
	$(GO) build -o $(BIN)/sluice-shim ./cmd/sluice-shim

## etcdload: the load driver `sluice bench raftkv` runs for its etcd
## anchor, in bin/etcdload beside bin/sluice
etcdload:
	$(GO) build -o $(BIN)/etcdload ./cmd/etcdload

## benchplot: the chart drawer `sluice bench suite` runs, in bin/benchplot
## beside bin/sluice
benchplot:
	$(GO) build -o $(BIN)/benchplot ./cmd/benchplot

## demo: a whole local cluster running the example jobs (see scripts/demo)
demo: build
	-scripts/install-cni.sh
	SLUICE=$(BIN)/sluice scripts/demo

## test: the whole suite, with the race detector; the CNI plugins of the
## network tests and the chromium the web UI's tests drive are installed
## first where root and apt allow (tests that need them and do not find
## them skip and say so, but fail under CI=true)
test:
	-scripts/install-cni.sh
	-scripts/install-chromium.sh
	$(GO) test -race -timeout 15m ./...

## lint: gofmt, go vet and staticcheck
lint: $(STATICCHECK)
	@bad=$$(gofmt -l .); \
	if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## bench: the benchmark suite at quick sizes (a few minutes): JSON and PNG
## plots in docs/bench, docs/bench/suite.md
bench: build etcdload benchplot anchors
	$(BIN)/sluice bench suite --quick --out docs/bench --update-doc docs/bench/suite.md

## bench-full: the suite at the issues' sizes (ten minutes or more, most of it e2e)
bench-full: build etcdload benchplot anchors
	$(BIN)/sluice bench suite --out docs/bench --update-doc docs/bench/suite.md

## anchors: the suite's anchors from Debian (etcd for raftkv, runc for
## podstart) when missing; where they cannot be installed (no root, no
## apt), the suite runs without them and says so
anchors:
	-scripts/install-etcd.sh
	-scripts/install-runc.sh

## bench-go: every Go benchmark once, with allocations
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## fuzz: a short run ($(FUZZTIME) executions) of every fuzz target
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz

clean:
	rm -rf $(BIN)
