# capgate — build, test and check targets. See README.md.
GO            ?= go
BIN           ?= bin/capgate
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
REGO_COVERAGE ?= 95
CONFIG        ?=
VERSION       ?=

.PHONY: chart
.PHONY: all help build test test-go test-rego check card-check access-check fmt run bench bench-compare e2e e2e-envoy fuzz clean interop-js image image-name dist

# Stamping (build, image, dist): VERSION (else "dev") and the git commit, with "-modified" when
# tracked files differ from it, through -ldflags, so that `capgate --version` shows both even
# where the build records no VCS information (-buildvcs=false, a tree without .git).
ifeq ($(origin COMMIT),undefined)
COMMIT := $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null || c=$$c-modified; echo $$c; })
endif
RELEASE_VERSION = $(or $(VERSION),dev)
CLI_PKG = github.com/capgate/capgate/cmd/capgate/internal/cli
STAMP   = $(if $(COMMIT),-X $(CLI_PKG).Commit=$(COMMIT)) $(if $(VERSION),-X $(CLI_PKG).Version=$(VERSION))
# A release binary: static (no cgo), no build paths, no symbol table (stack traces keep their lines).
STATIC_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(STAMP)'
# The image's timestamps (created, file times) are the commit's, so one commit builds one image.
ifeq ($(origin SOURCE_DATE_EPOCH),undefined)
SOURCE_DATE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
endif

## all: build, test and check.
all: build test check

## help: list the targets with what each does (the "## name:" comments of this file).
help:
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); i = index($$0, ":"); printf "  %-11s%s\n", substr($$0, 1, i - 1), substr($$0, i + 1); next } /^## / { sub(/^## /, ""); printf "  %-11s %s\n", "", $$0 }' $(MAKEFILE_LIST)

## build: the binary at bin/capgate (`capgate --version` shows the git commit, stamped even with VCS stamping off; VERSION=v1.2.3 sets the version).
build:
	$(GO) build -ldflags '$(STAMP)' -o $(BIN) ./cmd/capgate

## test: what CI runs — vet, all Go tests with the race detector (but NORACE, below; the Rego tests hold the coverage
## threshold among them: rego.TestRegoUnitTests runs regocheck.RunTests, the runner of
## `capgate policy test`, so the truth-table sweeps run once), and every parser's fuzz target for a
## short bounded time. test-rego runs the same tests through the CLI on their own.
## Every stage runs even when one before it failed (a race-stage failure used to hide whether the
## Rego coverage threshold and the fuzz targets held); the summary then names every failed test.
test:
	@status=0; \
	$(MAKE) --no-print-directory test-go-stages || status=1; \
	$(MAKE) --no-print-directory fuzz-short || { status=1; echo "== fuzzing failed (see above)"; }; \
	GO=$(GO) $(TESTSUM) -summary $(TESTSUM_RECORD) || status=1; \
	exit $$status

# NORACE packages are sequential computations: the Rego tests evaluate the policy with OPA, the
# classifier's accuracy tests (and its small-set targets, in test/routetune beside the tuning
# harness) classify thousands of messages. Under the race detector they take
# about five times the CPU (rego 52 s against 10 s; classifier 60 s against 9 s, on this 2-core
# machine, shared) with no goroutines of capgate to check, so they run without it. The classifier's one
# concurrency test runs with it; every other package runs with it.
NORACE = github.com/capgate/capgate/rego github.com/capgate/capgate/sidecar/router/classifier \
	github.com/capgate/capgate/test/routetune
# The Go tests run through test/testsum, which prints what plain `go test` prints (the "ok"/"FAIL"
# lines .ci/run counts) and records every outcome; `make test` ends with its summary, which names
# each skipped test and its reason (a skipped suite's package still reads "ok"). A failing test-go
# prints the summary itself, since make stops there.
TESTSUM        = $(GO) run ./test/testsum
TESTSUM_RECORD ?= $(or $(TMPDIR),/tmp)/capgate-test-summary-$(shell id -u).jsonl
## test-go: go vet, then every Go test with the race detector (needs a C compiler for -race), NORACE without it.
test-go:
	@status=0; $(MAKE) --no-print-directory test-go-stages || status=1; \
	GO=$(GO) $(TESTSUM) -summary $(TESTSUM_RECORD) || status=1; exit $$status

# test-go-stages: test-go without the summary (test prints it after fuzzing). Each stage runs whatever
# the one before it did; the exit status is 1 when any failed.
.PHONY: test-go-stages
test-go-stages:
	@rm -f $(TESTSUM_RECORD); status=0; \
	$(GO) vet ./... || status=1; \
	GO=$(GO) $(TESTSUM) -record $(TESTSUM_RECORD) -- -race -count=1 $$($(GO) list ./... | grep -vxF $(foreach p,$(NORACE),-e $(p))) || status=1; \
	GO=$(GO) $(TESTSUM) -record $(TESTSUM_RECORD) -- -count=1 $(NORACE) || status=1; \
	GO=$(GO) $(TESTSUM) -record $(TESTSUM_RECORD) -- -race -count=1 -run '^TestClassifyConcurrent$$' ./sidecar/router/classifier/ || status=1; \
	exit $$status

## interop-js: install the pinned A2A JavaScript SDK for test/interop (npm ci from the committed lockfile).
## Without it test/interop skips the JS suite loudly; in CI (.ci/run does this) it fails instead.
interop-js:
	cd test/interop/js && npm ci --no-audit --no-fund

## tck: the official A2A TCK (../shared/a2a-tck, 1.0 on JSON-RPC, HTTP+JSON and gRPC, and 0.3 on JSON-RPC and HTTP+JSON) against the reference
## agent alone and with capgate in front, held to test/tck/expected-failures.txt (docs/interop.md, "The official TCK").
## Needs Debian's python3-pytest, -pytest-asyncio, -httpx, -grpcio, -grpc-tools, -protobuf, -jsonschema, -jinja2,
## -requests, -yaml (.ci/run installs them); TCK_DIR= another TCK folder, PYTHON= another interpreter.
.PHONY: tck
tck:
	$(if $(TCK_DIR),CAPGATE_TCK_DIR=$(abspath $(TCK_DIR))) $(GO) test -count=1 -timeout 25m -run '^TestTCK$$' ./test/tck -v -tck

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

## access-check: the finance example's access expectations (docs/policy.md, "Access expectations").
access-check:
	$(GO) run ./cmd/capgate access check --expect manifests/finance/access-expectations.yaml --config manifests/finance/capgate.yaml

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
	$(GO) test -run '^$$' -bench . -benchmem ./sidecar/extauthz ./policy/engine ./sidecar/identity ./sidecar/protocol/...
	$(GO) test -run '^$$' -bench . -benchtime 3x -benchmem ./policy/access
	$(GO) run ./test/loadgen -mode bench
	$(GO) run ./test/loadgen -mode rss -memory 32MiB
	$(GO) run ./test/loadgen -mode gateway

# bench-compare's builds: BASE (required) and HEAD (empty: the work tree as it is), each a loadgen
# whose gateway child serves that commit's code, built with `go build -o` into BENCH_DIR.
BASE      ?=
HEAD      ?=
ROUNDS    ?= 3
BENCH_DIR ?= $(or $(TMPDIR),/tmp)/capgate-bench-compare-$(shell id -u)
## bench-compare: the gateway of BASE=<commit> and of HEAD (default: the work tree) side by side on one workload:
## A B A B for ROUNDS rounds, servers on CPU 0, the bare proxy's floor before each phase, both bindings on the
## memory store then JSON-RPC on a loopback redis-server (test/loadgen -mode gateway-compare; ARGS adds flags,
## e.g. ARGS='-context-tasks 1000' or '-no-redis'). BASE needs test/loadgen's gateway role (75ab4ce or later).
bench-compare:
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<commit> [HEAD=<commit>] [ROUNDS=3] [ARGS='-context-tasks 100']"; exit 2; }
	rm -rf $(BENCH_DIR) && mkdir -p $(BENCH_DIR)/base $(BENCH_DIR)/head
	git archive $(BASE) | tar -x -C $(BENCH_DIR)/base
	cd $(BENCH_DIR)/base && $(GO) build -buildvcs=false -o $(BENCH_DIR)/loadgen-base ./test/loadgen
	$(if $(HEAD),git archive $(HEAD) | tar -x -C $(BENCH_DIR)/head && cd $(BENCH_DIR)/head && )$(GO) build -buildvcs=false -o $(BENCH_DIR)/loadgen-head ./test/loadgen
	$(BENCH_DIR)/loadgen-head -mode gateway-compare -routing-manifests $(CURDIR)/../shared/data/routing/manifests.json \
		-builds base=$(BENCH_DIR)/loadgen-base,head=$(BENCH_DIR)/loadgen-head -rounds $(ROUNDS) $(ARGS)

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
	$(FUZZ) ./sidecar/protocol/jsonmodel -fuzz '^FuzzParseJSONRPC$$'
	$(FUZZ) ./sidecar/protocol/jsonmodel -fuzz '^FuzzParseHTTP$$'
	$(FUZZ) ./sidecar/protocol/jsonmodel -fuzz '^FuzzScanner$$'
	$(FUZZ) ./sidecar/protocol/jsonmodel -fuzz '^FuzzBareMediaType$$'
	$(FUZZ) ./sidecar/protocol/jsonmodel -fuzz '^FuzzCanonicalFast$$'
	$(FUZZ) ./policy/manifest -fuzz '^FuzzParseManifest$$'
	$(FUZZ) ./policy/config -fuzz '^FuzzConfig$$'
	$(FUZZ) ./sidecar/identity -fuzz '^FuzzVerify$$'
	$(FUZZ) ./sidecar/identity -fuzz '^FuzzEncodeClaims$$'
	$(FUZZ) ./sidecar/identity -fuzz '^FuzzJWTHeader$$'

## fuzz: every fuzz target for longer (500,000 executions each).
fuzz:
	$(MAKE) fuzz-short FUZZTIME=500000x

PODMAN      ?= podman
IMAGE       ?= capgate/capgate
IMAGE_TAG   ?= $(RELEASE_VERSION)
IMAGE_ARCH  ?= $(shell $(GO) env GOARCH)
IMAGE_BUILD ?= bin/image
CA_CERTS    ?= /etc/ssl/certs/ca-certificates.crt
## image: the container image IMAGE:IMAGE_TAG (capgate/capgate:dev; VERSION=v1.2.3 tags v1.2.3) with podman: the static
## binary and the build machine's CA bundle on an empty base, UID 65532, OCI labels (Containerfile, docs/deploy.md).
image:
	@command -v $(PODMAN) >/dev/null || { echo "make image: $(PODMAN) is not installed (Debian: apt-get install podman); see docs/deploy.md"; exit 1; }
	@test -s $(CA_CERTS) || { echo "make image: no CA bundle at $(CA_CERTS) (Debian: apt-get install ca-certificates), or set CA_CERTS"; exit 1; }
	rm -rf $(IMAGE_BUILD) && mkdir -p $(IMAGE_BUILD)
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(STATIC_BUILD) -o $(IMAGE_BUILD)/capgate ./cmd/capgate
	cp $(CA_CERTS) $(IMAGE_BUILD)/ca-certificates.crt
	$(PODMAN) build --quiet --os linux --arch $(IMAGE_ARCH) --timestamp $(SOURCE_DATE_EPOCH) \
		--build-arg VERSION=$(RELEASE_VERSION) --build-arg REVISION=$(or $(COMMIT),unknown) \
		--build-arg CREATED=$$(date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ) \
		-f $(CURDIR)/Containerfile -t $(IMAGE):$(IMAGE_TAG) $(IMAGE_BUILD)
	@echo "image: $(IMAGE):$(IMAGE_TAG) (linux/$(IMAGE_ARCH), commit $(or $(COMMIT),unknown))"

## image-name: print the tag `make image` gives, without building (envoy/helm/capgate and envoy/kubernetes use it).
image-name:
	@echo "$(IMAGE):$(IMAGE_TAG)"

## chart: the Helm chart's README from its values schema, its render checked with the finance example, and the
## packaged chart dist/capgate-<version>.tgz (Helm's own packaging, as a library; push: docs/deploy.md).
chart:
	$(GO) run ./test/chartpkg -chart envoy/helm/capgate -out $(DIST)

DIST            ?= dist
DIST_PLATFORMS  ?= linux/amd64 linux/arm64
CYCLONEDX_GOMOD ?= github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
TOOLS           ?= bin/tools
## dist: release binaries in DIST/ (dist/): static capgate-VERSION-linux-{amd64,arm64} (DIST_PLATFORMS), a CycloneDX SBOM
## of each (the modules linked in with their licences, by cyclonedx-gomod, pinned) and SHA256SUMS, stamped with version and commit.
dist:
	rm -rf $(DIST) && mkdir -p $(DIST) $(TOOLS)
	GOBIN=$(abspath $(TOOLS)) $(GO) install $(CYCLONEDX_GOMOD)
	@set -e; for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/capgate-$(RELEASE_VERSION)-$$os-$$arch; \
		echo "GOOS=$$os GOARCH=$$arch $(STATIC_BUILD) -o $$out ./cmd/capgate"; \
		GOOS=$$os GOARCH=$$arch $(STATIC_BUILD) -o $$out ./cmd/capgate; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 GOFLAGS=-trimpath $(TOOLS)/cyclonedx-gomod app -json -std -licenses -assert-licenses -noserial -notimestamp \
			-main cmd/capgate -output $$out.cdx.json .; \
	done
	cd $(DIST) && sha256sum capgate-* > SHA256SUMS
	@echo "dist: $$(ls $(DIST) | tr '\n' ' ')"

## clean: remove bin/ and dist/.
clean:
	rm -rf bin $(DIST)
