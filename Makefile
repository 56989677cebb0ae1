# mcpush — a thin Makefile. `make test` is what CI runs (.ci/run).
#
#   make run          serve http://127.0.0.1:8080/mcp on the SQLite store
#   make test         install test dependencies, lint, run every test
#   make build        Lambda binaries: build/<function>/bootstrap (linux/arm64)
#   make lint         vet, gofmt check, staticcheck (the module and examples/*)
#   make bench        benchmarks (not timed tests)
#   make costchart    measure the cost model anew: docs/costs.json and docs/costs.svg
#   make conformance  only the MCP conformance tests, verbosely
#   make deps         Node.js test dependencies (npm ci, once) and Go modules

GO      ?= go
NPM     ?= npm
GOFMT   := $(shell $(GO) env GOROOT)/bin/gofmt

# -race on by default; `make conformance RACE=` runs without it.
RACE      ?= -race
TESTFLAGS ?=
BENCHTIME ?= 2s
STATICCHECK_VERSION := v0.8.2

FUNCTIONS := mcp sns-ingest

# Example programs: modules of their own (go.mod), so `./...` of the root
# module skips them; vet and staticcheck visit each one. -mod=mod lets
# their go.sum follow this checkout's dependencies (go.mod replaces it).
EXAMPLES := $(patsubst %/go.mod,%,$(wildcard examples/*/go.mod))

NODE_DIR   := test/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

# Tests find Node 22, the conformance suites and the TypeScript SDK here.
export MCPUSH_NODE_DIR := $(CURDIR)/$(NODE_DIR)
# Race-built binaries that tests start (servers, sns-ingest runs) would
# otherwise sleep a second at every exit.
export GORACE := atexit_sleep_ms=0

.PHONY: run run-oauth build deps test vet fmt-check lint bench costchart conformance clean

run:
	@mkdir -p .mcpush
	$(GO) run ./functions/mcp

# The local server with OAuth: the tests' authorization server (needs `make
# deps`), a ready client, and the `mcpush login` commands printed (docs/auth.md).
run-oauth:
	@mkdir -p .mcpush
	$(GO) build -o .mcpush/mcp-server ./functions/mcp
	$(GO) run ./internal/oauthdev -- .mcpush/mcp-server

# One Lambda function as a linux/arm64 `bootstrap`: $(LAMBDA_GO) -o OUT ./functions/NAME
LAMBDA_GO := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc,nosqlite -trimpath -ldflags='-s -w'

build:
	@set -e; for f in $(FUNCTIONS); do \
		if [ -d functions/$$f ]; then \
			echo "$(LAMBDA_GO) -o build/$$f/bootstrap ./functions/$$f"; \
			$(LAMBDA_GO) -o build/$$f/bootstrap ./functions/$$f; \
		else \
			echo "skipping functions/$$f: not there yet"; \
		fi; \
	done

deps: $(NODE_STAMP)
	$(GO) mod download

# npm ci only when the lock changed or node_modules is gone.
$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	$(NPM) ci --prefix $(NODE_DIR) --no-audit --no-fund
	@touch $@

test: deps lint
	$(GO) test $(RACE) -count=1 -timeout 40m $(TESTFLAGS) ./...

vet:
	$(GO) vet ./...
	@set -e; for d in $(EXAMPLES); do echo "(cd $$d && $(GO) vet ./...)"; (cd $$d && GOWORK=off GOFLAGS=-mod=mod $(GO) vet ./...); done

# Fails listing the files gofmt would change.
fmt-check:
	@files=$$(find . -name '*.go' -not -path './test/node/*' -not -path './build/*' -not -path './.git/*' -print); \
	bad=$$($(GOFMT) -l $$files); \
	if [ -n "$$bad" ]; then echo "gofmt -w needed on:"; echo "$$bad"; exit 1; fi

lint: vet fmt-check
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@set -e; for d in $(EXAMPLES); do echo "(cd $$d && staticcheck ./...)"; (cd $$d && GOWORK=off GOFLAGS=-mod=mod $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...); done

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime=$(BENCHTIME) -count=1 $(TESTFLAGS) ./...

# BenchmarkCostModel (both stores; DynamoDB through moto_server) writes the
# priced figures, then TestCostChart -update draws them (internal/costchart).
costchart: deps
	$(GO) test -run '^$$' -bench '^BenchmarkCostModel$$' -benchtime=1x -count=1 ./internal/costs -args -costfigures=$(CURDIR)/docs/costs.json
	$(GO) test -count=1 -run '^TestCostChart$$' ./internal/costchart -update

conformance: deps
	$(GO) test $(RACE) -count=1 -timeout 40m -v -run '^TestConformance' $(TESTFLAGS) ./internal/e2e/

clean:
	rm -rf build

# SAM (template.yaml, BuildMethod: makefile): `sam build` runs
# `make build-<LogicalId>` with ARTIFACTS_DIR set.
.PHONY: build-McpFunction build-McpManagedFunction build-IngestFunction build-DeliveryFunction
build-McpFunction:
	$(LAMBDA_GO) -o $(ARTIFACTS_DIR)/bootstrap ./functions/mcp

build-McpManagedFunction:
	$(LAMBDA_GO) -o $(ARTIFACTS_DIR)/bootstrap ./functions/mcp

build-IngestFunction:
	$(LAMBDA_GO) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sns-ingest

# The same binary as IngestFunction: it tells SNS, SQS and scheduled
# events apart.
build-DeliveryFunction:
	$(LAMBDA_GO) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sns-ingest
