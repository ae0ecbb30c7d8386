.PHONY: build test demo bench fuzz

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/tmend ./cmd/tmend

# go vet + go test -race against a throwaway PostgreSQL (or TMEND_TEST_DATABASE_URL).
test:
	scripts/test.sh

# The main job end to end on a throwaway PostgreSQL.
demo: build
	scripts/demo.sh

bench:
	go test -run '^$$' -bench . -benchmem ./repair/

fuzz:
	go test -run '^$$' -fuzz FuzzRepair -fuzztime 60s ./repair/
