.PHONY: build install test demo bench fuzz

# What `tmend version` reports (cmd/tmend/buildinfo); the commit's own date keeps builds
# reproducible.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE     ?= $(shell TZ=UTC0 git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null)
MODIFIED ?= $(shell git rev-parse --git-dir >/dev/null 2>&1 && { test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true; })
LDFLAGS  := -s -w -X github.com/tmend/tmend/cmd/tmend/buildinfo.version=$(VERSION) \
	-X github.com/tmend/tmend/cmd/tmend/buildinfo.commit=$(COMMIT) \
	-X github.com/tmend/tmend/cmd/tmend/buildinfo.date=$(DATE) \
	-X github.com/tmend/tmend/cmd/tmend/buildinfo.modified=$(MODIFIED)

# BUILDFLAGS adds go build flags (demo.sh passes -v to show its progress).
build:
	CGO_ENABLED=0 go build $(BUILDFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o bin/tmend ./cmd/tmend

# Into $(go env GOBIN) or $(go env GOPATH)/bin, stamped like build.
install:
	CGO_ENABLED=0 go install -trimpath -ldflags '$(LDFLAGS)' ./cmd/tmend

# go vet + go test -race against a throwaway PostgreSQL (or TMEND_TEST_DATABASE_URL).
test:
	scripts/test.sh

# The main job end to end on a throwaway PostgreSQL, then the daemon and its console
# until Ctrl-C. It builds bin/tmend itself, to show the build's progress.
demo:
	scripts/demo.sh

bench:
	go test -run '^$$' -bench . -benchmem ./repair/

fuzz:
	go test -run '^$$' -fuzz FuzzRepair -fuzztime 60s ./repair/
