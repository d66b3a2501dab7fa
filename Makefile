# sealrun — build, test, install. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
export GOTOOLCHAIN := local
export CGO_ENABLED ?= 1

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
# The C compiler and C library the static helpers are built with, stamped into sealrund's build
# record (attestations' build.toolchain): what a rebuild needs beside the Go version.
TOOLCHAIN ?= $(shell $(CC) --version 2>/dev/null | head -1 | tr -s ' ' '_'),$(shell getconf GNU_LIBC_VERSION 2>/dev/null | tr ' ' '-')
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X github.com/sealrun/sealrun/buildinfo.toolchain=$(TOOLCHAIN)
PREFIX  ?= /usr/local
FUZZTIME ?= 30s
# Where make test keeps the local demo/test images and the debootstrap cache between runs.
TEST_STATE  ?= /var/lib/sealrun-test
BUILD_CACHE ?= /var/cache/sealrun/build
# gVisor's runsc, built by make deps (scripts/runsc.sh): Debian's is too old for sealrun.
RUNSC ?= /usr/local/bin/runsc

# Tests build with the test seams (daemon.TestSeams: scripted entrypoints, overlays, failpoints);
# make build and make install never do. GOFLAGS reaches the binaries the tests build too.
TEST_GOFLAGS := -tags=sealrun_testseams

# Where the browser tests write the screenshots of the pages they open (test artefacts).
ARTIFACTS ?= /tmp/sealrun-test-artifacts

# Where make demo keeps its images, runs and reports (never the production state dir).
DEMO_STATE  ?= /var/lib/sealrun-demo
DEMO_FLAGS  ?=

.PHONY: gpu-kit uninstall all help build toolchain cross test test-images test-unit test-cgroup2 test-stress bench soak lint fuzz install deps deps-demo clean demo docs

all: build

help:
	@echo "make build      bin/sealrun, bin/sealrund, bin/runner and bin/runner-exec (static), bin/sealrun-netns-hook and bin/sealrun-hook-relay"
	@echo "make cross      build sealrun (the verifier) for macOS and Windows"
	@echo "make demo       the main job: a whole sealed benchmark here (3 seeds of the scripted agent,"
	@echo "                verified attestations, the leaderboard); DEMO_FLAGS=\"--seeds 1 --quick\" for less"
	@echo "make test       install deps, then every test; root-only tests run when root"
	@echo "make test-images  only make test's first part as root: the local images, the AIRS data, the SDKs"
	@echo "make test-unit  tests that need no root and no extra packages"
	@echo "make test-cgroup2  the cgroup/device/container tests and a sealed run through sealrund.service"
	@echo "                in a cgroup-v2-only Debian guest (qemu, systemd as PID 1); after make test-images"
	@echo "make test-stress  the timing-sensitive tests (terminals, pauses, kills and restarts, Slurm, the attack"
	@echo "                suite's window, faults) STRESS_RUNS times (default 10) beside stress-ng; after make test-images"
	@echo "make bench      benchmarks, with figures and ratios"
	@echo "make docs       the CLI reference (docs/cli) from the commands themselves"
	@echo "make soak       the load suite at full size: 8,000 container starts (1,000 of each role under runc,"
	@echo "                crun and gVisor, which runs no controller) and 200 runs beside stress-ng (about 50 min)"
	@echo "make lint       gofmt, go vet, staticcheck"
	@echo "make fuzz       run each fuzz target for FUZZTIME (default $(FUZZTIME))"
	@echo "make install    binaries to $(PREFIX)/bin; /etc/sealrun and /var/lib/sealrun"
	@echo "make deps       apt-get install what the project needs (idempotent)"
	@echo "make deps-demo  only what make demo needs"

# make toolchain prints what make build stamps as build.toolchain (sealrun verify --rebuild compares).
toolchain:
	@echo '$(TOOLCHAIN)'

build:
	@mkdir -p bin
	$(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o bin/sealrun ./cmd/sealrun
	$(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o bin/sealrund ./cmd/sealrund
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS) -extldflags=-static' -o bin/runner ./cmd/runner
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o bin/sealrun-netns-hook ./cmd/sealrun-netns-hook
	for c in runner-exec sealrun-hook-relay; do $(CC) -static -O2 -Wall -Wextra -Werror -o bin/$$c cmd/$$c/main.c || exit 1; done

# The verify path (sealrun verify, attest, track, exam, leaderboard) builds for macOS and
# Windows too; the verbs that run containers say "Linux only" there.
cross:
	@for p in darwin/amd64 darwin/arm64 windows/amd64; do \
	  echo "cross: GOOS=$${p%/*} GOARCH=$${p#*/} go build ./cmd/sealrun"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/sealrun || exit 1; \
	done

deps:
	@scripts/deps.sh all
	@GO=$(GO) RUNSC_DEST=$(RUNSC) scripts/runsc.sh

# make deps-demo: only what make demo runs (no browser, cluster, guest, registry or gVisor).
deps-demo:
	@scripts/deps.sh demo

# As root, make test first builds the local images (busybox controller; debootstrap python with
# numpy and torch) into TEST_STATE: minutes the first time, seconds once BUILD_CACHE holds them;
# and fetches the raw data of the shipped AIRS task (scripts/airs-digits-data.sh: Debian's
# python3-sklearn, sha256-pinned) into TEST_STATE/airs-digits-raw, and the official OpenAI and
# Anthropic SDKs and asciinema's web player (scripts/sdk-clients.sh: npm ci from a lock file) into TEST_STATE/sdk-clients,
# which tests may not fetch.
# -count=1: tests that touch the host (runc, cgroups, netns) are never served from the cache.
# Packages run in parallel: each root test's sandbox host has its own run directory, reaps and
# leak-checks only what it made, and UID ranges are allocated machine-wide.
# make test-images: that first part alone (.ci/run starts the cgroup v2 guest once it is done).
test-images: build
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "make test: local images in $(TEST_STATE) (debootstrap cache $(BUILD_CACHE); the first build takes minutes)"; \
	  scripts/stage.sh images bin/sealrun --state-dir $(TEST_STATE) images build-local --cache-dir $(BUILD_CACHE) --lock $(TEST_STATE)/images.lock; \
	  [ -d $(TEST_STATE)/airs-digits-raw ] || scripts/airs-digits-data.sh $(TEST_STATE)/airs-digits-raw; \
	  scripts/sdk-clients.sh $(TEST_STATE)/sdk-clients; \
	fi

# go test runs three test binaries at once (-p 3; its default is one a core, two here): the two
# longest packages, e2e and daemon, spend most of their minutes waiting on their runs' clocks
# (vmstat beside the daemon's tests: the CPUs idle for minutes at a time), and every test that
# waits on time passes beside stress-ng's load (make test-stress).
test: deps build cross test-images
	@echo "make test: screenshots of the pages the browser tests open go to $(ARTIFACTS)"
	SEALRUN_TEST_ARTIFACTS=$(ARTIFACTS) SEALRUN_TEST_STATE=$$( [ "$$(id -u)" = 0 ] && echo $(TEST_STATE) ) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) scripts/stage.sh "go test ./..." $(GO) test -p 3 -count=1 -timeout 30m ./...
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "make test: again under crun: the sandbox (every role's posture probe), compute calls (no output lost: 300 calls, runc's stage made 1,000), grading, a sealed run, the attack and fault suites"; \
	  SEALRUN_TEST_RUNTIME=crun SEALRUN_TEST_OUTPUT_CALLS=300 SEALRUN_TEST_STATE=$(TEST_STATE) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) scripts/stage.sh "crun: sandbox runner grader" $(GO) test -count=1 -timeout 20m ./sandbox ./runner ./grader && \
	  SEALRUN_TEST_RUNTIME=crun SEALRUN_TEST_STATE=$(TEST_STATE) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) scripts/stage.sh "crun: daemon" $(GO) test -count=1 -timeout 20m -run '^(TestExecuteSealedRun|TestHostileScaffold|TestFault.*)$$' ./daemon && \
	  echo "make test: again with the runner and grader under gVisor ($(RUNSC), the controller under runc): the sandbox, compute calls, grading, a sealed run, the attack and fault suites" && \
	  SEALRUN_TEST_RUNTIME=$(RUNSC) SEALRUN_TEST_ROLE_RUNTIMES=controller=runc SEALRUN_TEST_OUTPUT_CALLS=300 SEALRUN_TEST_STATE=$(TEST_STATE) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) scripts/stage.sh "gVisor: sandbox runner grader" $(GO) test -p 1 -count=1 -timeout 20m ./sandbox ./runner ./grader && \
	  SEALRUN_TEST_ROLE_RUNTIMES=runner=$(RUNSC),grader=$(RUNSC) SEALRUN_TEST_STATE=$(TEST_STATE) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) scripts/stage.sh "gVisor: daemon" $(GO) test -count=1 -timeout 20m -run '^(TestExecuteSealedRun|TestHostileScaffold|TestFault.*)$$' -skip '^TestFaultRuntimeFailsMidRun$$' ./daemon; \
	fi

# make demo: installs what it needs, builds everything (images from Debian packages: minutes the
# first time, seconds after), runs the demo as root and prints the leaderboard and the reports.
demo: deps-demo build
	@if [ "$$(id -u)" != 0 ]; then echo "make demo runs sealed runs (namespaces, cgroups, runc): run it as root (sudo make demo)"; exit 1; fi
	bin/sealrun --state-dir $(DEMO_STATE) demo --cache-dir $(BUILD_CACHE) $(DEMO_FLAGS)

test-unit:
	SEALRUN_NO_ROOT_TESTS=1 GOFLAGS=$(TEST_GOFLAGS) $(GO) test -count=1 ./...

# make test-cgroup2: the hosts users own boot cgroup v2 with systemd as the cgroup owner; this
# machine is cgroup v1 (hybrid). It boots a cgroup-v2-only Debian guest under qemu (KVM where it
# works, else TCG emulation), its root built once with debootstrap and cached in BUILD_CACHE, and
# runs there the root tests of sandbox, runner, grader, controller, the daemon's cgroup tests and
# the CLI's sandbox verbs, then a whole sealed run through sealrund started by systemd from
# deploy/sealrund.service. It needs the local images make test builds. CGROUP2_FLAGS=--bench adds
# the container benchmarks.
CGROUP2_FLAGS ?=
test-cgroup2: deps
	@if [ ! -f $(TEST_STATE)/images.lock ]; then echo "make test-cgroup2 needs the local images: run make test-images (or make test) first, as root (it builds them into $(TEST_STATE))"; exit 1; fi
	scripts/cgroup2-guest.sh --cache $(BUILD_CACHE)/cgroup2-guest --state $(TEST_STATE) $(CGROUP2_FLAGS)

# make test-stress: the timing-sensitive tests, STRESS_RUNS times (default 10), beside stress-ng's
# CPU and I/O load (STRESS_LOAD): a test that waits on a sleep or on text already on the screen
# fails here first. STRESS_GROUPS picks some of its groups (scripts/stress.sh lists them).
test-stress: deps build
	TEST_STATE=$(TEST_STATE) BUILD_CACHE=$(BUILD_CACHE) RUNSC=$(RUNSC) ARTIFACTS=$(ARTIFACTS) GO=$(GO) scripts/stress.sh

# make soak: the load suite at full size (issue: the host's failures are never the agent's):
# 1,000 container starts of each role under runc, crun and gVisor beside stress-ng, then 200
# sealed runs queued at once at concurrency 4 beside it. make test runs both at a small size.
soak: deps build
	@if [ "$$(id -u)" != 0 ] || [ ! -f $(TEST_STATE)/images.lock ]; then echo "make soak runs containers as root with the local images: run make test first, as root"; exit 1; fi
	SEALRUN_LOAD_STARTS=1000 SEALRUN_TEST_STATE=$(TEST_STATE) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) $(GO) test -count=1 -timeout 6h -v -run '^TestStartsUnderLoad$$' ./sandbox
	SEALRUN_SOAK_RUNS=200 SEALRUN_TEST_STATE=$(TEST_STATE) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) $(GO) test -count=1 -timeout 8h -v -run '^TestSoak$$' ./daemon

bench: build
	@SEALRUN_TEST_STATE=$$( [ "$$(id -u)" = 0 ] && [ -f $(TEST_STATE)/images.lock ] && echo $(TEST_STATE) ) SEALRUN_TEST_BUILD_CACHE=$(BUILD_CACHE) GOFLAGS=$(TEST_GOFLAGS) scripts/bench.sh

lint:
	@out=$$($(GO) list -f '{{.Dir}}' ./... | xargs gofmt -l); if [ -n "$$out" ]; then echo "gofmt: run gofmt -w on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

fuzz:
	@set -e; export GOFLAGS=$(TEST_GOFLAGS); for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg; \
	  done; \
	done

install: build
	install -d -m 0755 $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/etc/sealrun $(DESTDIR)/etc/systemd/system
	install -d -m 0711 $(DESTDIR)/var/lib/sealrun
	install -m 0755 bin/sealrun bin/sealrund bin/runner bin/runner-exec bin/sealrun-netns-hook bin/sealrun-hook-relay $(DESTDIR)$(PREFIX)/bin/
	[ -e $(DESTDIR)/etc/sealrun/sealrun.toml ] || install -m 0644 deploy/sealrun.toml $(DESTDIR)/etc/sealrun/sealrun.toml
	install -m 0644 deploy/sealrund.service $(DESTDIR)/etc/systemd/system/sealrund.service
	install -d -m 0755 $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	bin/sealrun docs --man $(DESTDIR)$(PREFIX)/share/man/man1
	bin/sealrun completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sealrun
	getent group sealrun >/dev/null || groupadd --system sealrun
	@echo "installed; next: sealrun keys generate --out /etc/sealrun/keys, edit /etc/sealrun/sealrun.toml, systemctl enable --now sealrund"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,sealrun sealrund runner runner-exec sealrun-netns-hook sealrun-hook-relay) $(DESTDIR)/etc/systemd/system/sealrund.service
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/sealrun*.1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sealrun
	@echo "removed the binaries and the unit; /etc/sealrun and /var/lib/sealrun (keys, runs, attestations) are kept"

# make gpu-kit: what scripts/gpu-check.sh check needs on a bare GPU machine, in gpu-kit/ (under
# 64 MiB: sealrun's binaries static and stripped, Debian's runc, libseccomp2 and busybox-static
# .debs, the ARI kit); docs/DEVELOPING.md says how to run the check there.
gpu-kit: build
	GO=$(GO) LDFLAGS='$(LDFLAGS)' scripts/gpu-check.sh pack gpu-kit

# make docs: the CLI reference (docs/cli, one page per command) from the commands themselves;
# TestCLIReferenceIsGenerated fails when the checked-in pages differ from what this writes.
docs: build
	bin/sealrun docs --markdown docs/cli

clean:
	rm -rf bin
