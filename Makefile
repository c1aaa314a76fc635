# capgate — build, test and check targets. See README.md.
GO            ?= go
BIN           ?= bin/capgate
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
REGO_COVERAGE ?= 95
CONFIG        ?=
VERSION       ?=

.PHONY: all help build test test-go test-rego check card-check fmt run bench e2e e2e-envoy fuzz clean interop-js

## all: build, test and check.
all: build test check

## help: list the targets with what each does (the "## name:" comments of this file).
help:
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); i = index($$0, ":"); printf "  %-11s%s\n", substr($$0, 1, i - 1), substr($$0, i + 1); next } /^## / { sub(/^## /, ""); printf "  %-11s %s\n", "", $$0 }' $(MAKEFILE_LIST)

## build: the binary at bin/capgate (`capgate --version` shows the git commit; VERSION=v1.2.3 sets the version).
build:
	$(GO) build $(if $(VERSION),-ldflags "-X github.com/capgate/capgate/cmd/capgate/internal/cli.Version=$(VERSION)",) -o $(BIN) ./cmd/capgate

## test: what CI runs — vet, all Go tests with the race detector (but NORACE, below; the Rego tests hold the coverage
## threshold among them: rego.TestRegoUnitTests runs regocheck.RunTests, the runner of
## `capgate policy test`, so the truth-table sweeps run once), and every parser's fuzz target for a
## short bounded time. test-rego runs the same tests through the CLI on their own.
test: test-go fuzz-short

# NORACE packages are sequential computations: the Rego tests evaluate the policy with OPA, the
# classifier's accuracy tests classify thousands of messages. Under the race detector they take
# about five times the CPU (rego 52 s against 10 s; classifier 60 s against 9 s, on this 2-core
# machine, shared) with no goroutines of capgate to check, so they run without it. The classifier's one
# concurrency test runs with it; every other package runs with it.
NORACE = github.com/capgate/capgate/rego github.com/capgate/capgate/sidecar/router/classifier
## test-go: go vet, then every Go test with the race detector (needs a C compiler for -race), NORACE without it.
test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -vxF $(foreach p,$(NORACE),-e $(p)))
	$(GO) test -count=1 $(NORACE)
	$(GO) test -race -count=1 -run '^TestClassifyConcurrent$$' ./sidecar/router/classifier/

## interop-js: install the pinned A2A JavaScript SDK for test/interop (npm ci from the committed lockfile).
## Without it test/interop skips the JS suite loudly; in CI (.ci/run does this) it fails instead.
interop-js:
	cd test/interop/js && npm ci --no-audit --no-fund

## test-rego: the Rego unit tests with the coverage threshold (REGO_COVERAGE).
test-rego:
	$(GO) run ./cmd/capgate policy test --coverage --threshold $(REGO_COVERAGE)

## check: no merge-conflict markers in tracked files, formatting and linters (gofmt, golangci-lint v2 pinned, opa fmt / opa check --strict through the embedded OPA).
check:
	@markers=$$(git grep -nE '^(<<<<<<<|>>>>>>>)( |$$)|^=======$$' -- . || true); if [ -n "$$markers" ]; then echo "merge-conflict markers:"; echo "$$markers"; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) run $(GOLANGCI_LINT) run ./...
	$(GO) run ./cmd/capgate policy fmt --fail
	$(GO) run ./cmd/capgate policy check --strict

## card-check: the finance example's public card against its committed lock (docs/cards.md, "In CI").
## After a deliberate change: go run ./cmd/capgate card lock --config manifests/finance/capgate.yaml --out manifests/finance/public-card.lock.json
card-check:
	$(GO) run ./cmd/capgate card check --config manifests/finance/capgate.yaml --lock manifests/finance/public-card.lock.json

## fmt: rewrite Go and Rego formatting.
fmt:
	gofmt -w $$(git ls-files '*.go')
	$(GO) run ./cmd/capgate policy fmt --write

## run: capgate on the embedded default (the finance example), or CONFIG=path/to/capgate.yaml.
run:
	$(GO) run ./cmd/capgate serve $(if $(CONFIG),--config $(CONFIG),)

## bench: Go benchmarks of the decision path and the access review (10,000 capabilities × 100 classes), then the ext_authz load test (servers on CPU 0, generator on CPU 1),
## the memory test (10,000 capabilities, 100,000 distinct tokens, limits.memory 32MiB) and the gateway test
## (capgate's gateway against a bare reverse proxy, the CLINC150 registry of ../shared/data/routing). See docs/benchmarks.md.
## The soak (two replicas on one redis-server, mixed load, reloads, a Redis restart; ~1.5 min) runs on its own: go run ./test/loadgen -mode soak
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./sidecar/extauthz ./policy/engine ./sidecar/identity ./sidecar/protocol
	$(GO) test -run '^$$' -bench . -benchtime 3x -benchmem ./policy/access
	$(GO) run ./test/loadgen -mode bench
	$(GO) run ./test/loadgen -mode rss -memory 32MiB
	$(GO) run ./test/loadgen -mode gateway

## e2e: the end-to-end suite through the Envoy-faithful proxy (test/envoyproxy), plus the other suites under test/.
e2e:
	$(GO) test -count=1 ./test/...

## e2e-envoy: the end-to-end suite through a real Envoy, when an envoy binary is on PATH.
e2e-envoy:
	@command -v envoy >/dev/null || { echo "envoy is not on PATH; see docs/envoy.md"; exit 1; }
	CAPGATE_E2E_ENVOY=$$(command -v envoy) $(GO) test -count=1 ./test/e2e/

## fuzz-short: every parser's fuzz target for FUZZTIME each (part of `make test`); `make fuzz` runs them longer.
## The budget is a count of executions, not a duration: Go 1.26's fuzz coordinator can report a spurious
## "context deadline exceeded" failure when a duration budget ends while a worker is mid-call
## (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
FUZZTIME ?= 20000x
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1x
.PHONY: fuzz-short
fuzz-short:
	$(FUZZ) ./sidecar/protocol -fuzz '^FuzzParseJSONRPC$$'
	$(FUZZ) ./sidecar/protocol -fuzz '^FuzzParseHTTP$$'
	$(FUZZ) ./sidecar/protocol -fuzz '^FuzzScanner$$'
	$(FUZZ) ./sidecar/protocol -fuzz '^FuzzBareMediaType$$'
	$(FUZZ) ./policy/manifest -fuzz '^FuzzParseManifest$$'
	$(FUZZ) ./policy/config -fuzz '^FuzzConfig$$'
	$(FUZZ) ./sidecar/identity -fuzz '^FuzzVerify$$'
	$(FUZZ) ./sidecar/identity -fuzz '^FuzzJWTHeader$$'

## fuzz: every fuzz target for longer (500,000 executions each).
fuzz:
	$(MAKE) fuzz-short FUZZTIME=500000x

## clean: remove bin/.
clean:
	rm -rf bin
