# gridwire: every target loops over the modules of go.work.
MODULES := events pkg services/ingest services/incarnator services/executor services/stager services/watcher services/readside services/property cmd/gridwire
GO ?= go
BIN := bin/gridwire
DATA ?= .gridwire-data
TESTFLAGS ?= -count=1 -timeout 20m
# A build in workspace mode (go.work) carries no VCS stamp, so `gridwire version` and
# GET /v1/version would say only "(devel)": the checkout's commit is linked in instead.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

.PHONY: all build test race lint run bench e2e tidy clean

all: lint build test

# cmd/gridwire is one main package: `go build ./...` there would leave its binary in the
# source tree, so it is built once, into $(BIN).
build:
	@for m in $(filter-out cmd/gridwire,$(MODULES)); do (cd $$m && $(GO) build ./...) || exit 1; done
	$(GO) build -ldflags "-X main.version=$(or $(VERSION),(devel))" -o $(BIN) ./cmd/gridwire

test: lint
	@for m in $(MODULES); do echo "== $$m"; (cd $$m && $(GO) test $(TESTFLAGS) ./...) || exit 1; done

# Every module's tests again under the race detector (CI runs it after make test): it
# has caught what no test asserted, a fork job's PID read after its reaper released it.
race:
	@for m in $(MODULES); do echo "== race $$m"; (cd $$m && $(GO) test -race $(TESTFLAGS) ./...) || exit 1; done

lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(GO) vet -tags e2e ./...) || exit 1; done

# As root (a fresh machine, a container), the built-in fork cluster would run jobs as
# root: make run (and make bench, for its /bin/true jobs) gives that consent explicitly;
# a config with run_as is the way out (docs/security.md).
run: build
	./$(BIN) serve --data $(DATA) $$([ "$$(id -u)" = 0 ] && echo --allow-root-jobs)

bench: build
	./$(BIN) bench $$([ "$$(id -u)" = 0 ] && echo --allow-root-jobs)
	@for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchtime 2s ./...) || exit 1; done

e2e: build
	bash .ci/e2e

tidy:
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy) || exit 1; done

clean:
	rm -rf bin $(DATA)
