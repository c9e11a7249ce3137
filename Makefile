# farm: build, test, demo and benchmarks. See README.md.
GO      ?= go
BIN     := bin/farm
DEMO    := demo

.PHONY: all build test unit demo bench clean fmt vet

all: build

build:
	$(GO) build -o $(BIN) ./cmd/farm

# All tests: unit tests, end-to-end tests of the built binary on the local
# backend, and (started here when possible) against a real single-node Slurm.
test: build
	./integration/run-tests $(GO) test -count=1 -timeout 14m ./...

# Unit and local-backend tests only; no Slurm is started.
unit: build
	$(GO) test -count=1 -timeout 10m ./...

# A small farm on the local backend, from init to its statuses.
demo: build
	rm -rf $(DEMO)
	$(BIN) init $(DEMO)
	sed -i 's/^#SBATCH -t .*/#SBATCH -t 0-00:05/' $(DEMO)/job_script.sh
	cd $(DEMO) && ../$(BIN) submit 2 --backend local
	cd $(DEMO) && ../$(BIN) wait --timeout 5m
	cd $(DEMO) && ../$(BIN) Status

# Claim benchmarks and end-to-end throughput (see BENCHMARKS.md).
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./casetable/
	$(GO) test -run '^$$' -bench 'Throughput|Status10M' -benchtime 1x ./integration/

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin $(DEMO)
