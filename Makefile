# credprovider: make demo | make test | make build | make release | make bench
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# pip is pinned: it installs the wheels a bundle carries, and writes their metadata (release/wheels.py).
PIP := pip==26.3
STAMP := $(VENV)/.installed-$(shell (cat pyproject.toml; echo '$(PIP)') | sha256sum | cut -c1-12)
HOST_ARCH := $(shell uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')
ARCHES := amd64 arm64
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' credprovider/__init__.py)
BUNDLE := dist/credprovider
RELEASE := dist/release
SOURCES := $(shell find credprovider -name '*.py') build.spec $(wildcard release/*.py release/*.c \
	release/*.json release/*.lock release/patches/*/*.patch)
# Root filesystems, built interpreters and wheels are cached here between runs (keyed by recipe).
export CREDPROVIDER_BUILD_CACHE ?= $(HOME)/.cache/credprovider-build

.PHONY: host-tools venv lint format typecheck build release release-here reproduce release-check test \
	test-fast demo bench reliability-report clean fetch-debs go-tools

$(STAMP):
	@release/host-tools.sh build
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q '$(PIP)'
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# Everything make test needs from Debian, installed when missing (one line and exit 1 if it cannot).
host-tools:
	@release/host-tools.sh test

lint: $(STAMP)
	$(VENV)/bin/ruff check credprovider emulators tests bench release demo.py
	$(VENV)/bin/ruff format --check credprovider emulators tests bench release demo.py

format: $(STAMP)
	$(VENV)/bin/ruff format credprovider emulators tests bench release demo.py
	$(VENV)/bin/ruff check --fix credprovider emulators tests bench release demo.py

typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict credprovider release

# One portable bundle per architecture (its own glibc, built in a Debian 11 chroot; the other
# architecture under qemu-user): see docs/release.md. Needs root; release/host-tools.sh installs the
# Debian tools it needs (this machine's bundle: debootstrap, cmake ...; the other's: qemu-user-static).
# A bundle names the commit it was built from (--version, the release's provenance): a new commit
# builds it again, even one that changed no source.
HEAD_STAMP := dist/.head-$(shell git rev-parse --short=12 HEAD 2>/dev/null || echo none)
$(HEAD_STAMP):
	@mkdir -p dist && rm -f dist/.head-* && touch $@

dist/bundles/%/credprovider: $(SOURCES) $(STAMP) $(HEAD_STAMP)
	@release/host-tools.sh $(if $(filter $*,$(HOST_ARCH)),build,release)
	$(PY) -m release bundle --arch $* --out dist/bundles/$*
	@touch $@

# The bundle every test, the demo and the benchmark run: this machine's architecture.
$(BUNDLE)/credprovider: dist/bundles/$(HOST_ARCH)/credprovider
	ln -sfn bundles/$(HOST_ARCH) $(BUNDLE)

build: $(BUNDLE)/credprovider
	@echo "bundle: $(BUNDLE) -> $$(readlink $(BUNDLE)): $$(du -sm dist/bundles/$(HOST_ARCH) | cut -f1) MiB, $$(find dist/bundles/$(HOST_ARCH) -type f | wc -l) files"

# Every architecture's tarball, .deb and .rpm, their SBOMs, and SHA256SUMS over them: remade when a
# bundle or what the artifacts add to it (configs, licence, release/*.py) changed.
RELEASE_INPUTS := LICENSE $(wildcard config/*.yaml config/examples/*.yaml) \
	$(wildcard charts/credprovider/*.yaml charts/credprovider/templates/*)
$(RELEASE)/SHA256SUMS: $(foreach arch,$(ARCHES),dist/bundles/$(arch)/credprovider) $(RELEASE_INPUTS)
	@release/host-tools.sh release
	$(PY) -m release artifacts --out $(RELEASE)

# A first build's release: this machine's architecture only (no other interpreter, no qemu-user):
# its tarball, .deb, .rpm, SBOMs, OCI image and chart, in dist/release-<arch>, minutes after make build.
release-here: $(BUNDLE)/credprovider $(RELEASE_INPUTS)
	@release/host-tools.sh release
	$(PY) -m release artifacts --arch $(HOST_ARCH) --out dist/release-$(HOST_ARCH)
	@ls -l dist/release-$(HOST_ARCH)

# make release REGISTRY=host/repository also pushes the OCI image (basic auth from
# CREDPROVIDER_REGISTRY_AUTH=user:password when set); SIGNING_KEY=key.asc (an armored OpenPGP
# secret key without a passphrase) signs the .rpm files, the repositories, the provenance and
# SHA256SUMS; COSIGN_KEY=cosign.key (its password in COSIGN_PASSWORD) signs the pushed image with
# cosign, the signature stored beside it (docs/release.md: how to verify each).
ifneq ($(COSIGN_KEY),)
ifeq ($(REGISTRY),)
$(error COSIGN_KEY signs the image pushed to REGISTRY: give REGISTRY=host/repository too)
endif
endif
release: $(RELEASE)/SHA256SUMS
	$(if $(SIGNING_KEY),$(PY) -m release sign --out $(RELEASE) --signing-key $(SIGNING_KEY))
	@ls -l $(RELEASE)
	$(if $(REGISTRY),$(PY) -m release push --registry $(REGISTRY) $(if $(COSIGN_KEY),--cosign-key $(COSIGN_KEY)))

# The release built again from the same commit (dist/reproduce) and compared byte for byte with
# dist/release: which file, which byte and which member differ, if any.
reproduce: release
	$(PY) -m release reproduce

# Only the release checks, for every tarball: the ELF rules, the launcher, and each tarball on an
# older userland (Debian 11 root filesystems; arm64 under qemu-user). make test runs them too.
release-check: release fetch-debs
	CREDPROVIDER_REQUIRE_ARCHES="$(ARCHES)" $(PY) -m pytest -q tests/release

fetch-debs: $(STAMP)
	$(PY) -m release fetch-debs

# Every Go binary the tests run (the kubelet and its control plane, containerd, the registry, crictl,
# Helm, cosign: release/gobuild.py), built into the cache where missing (minutes cold, nothing warm).
go-tools: $(STAMP)
	$(PY) -m release go-tools

# The full suite: lint, types, the bundles and tarballs of both architectures, and every test
# (unit, integration, through this machine's bundle, and both tarballs in Debian 11 root filesystems).
# Each phase is timed (dist/test-phases.tsv); the suite's summary says where the time went and
# keeps it in dist/test-times.json (tests/timing.py; docs/development.md reads its figures there).
# The Go tools are built beside the bundles (make -j2: two jobs, each phase itself one job at a
# time), and the tests run on TEST_WORKERS pytest-xdist workers: much of the suite waits (a kubelet,
# a cluster, a kill point) rather than computes. Each test module runs on one worker (its module
# fixtures: one fleet cluster, one control plane), the slowest modules first, and every end-to-end
# test on the same one (tests/schedule.py). The workers' temporary directories are under a short
# /tmp/cpt.* (a kubelet's unix sockets lie under them, and a socket's path has at most 107 bytes):
# removed when the suite passes, kept to look at when it fails (marked FAILED: each run removes those
# of earlier failed runs but the newest, which are 5 GB each). Where /tmp is a tmpfs, /var/tmp:
# the agent refuses to place plugins on a filesystem lost at reboot, and the tests' nodes are there.
TEST_WORKERS ?= 4
PHASES := dist/test-phases.tsv
timed = @start=$$(date +%s%N); $(MAKE) --no-print-directory -j1 $(1) && \
	echo "$(1)	$$(( ($$(date +%s%N) - start) / 1000000 ))" >> $(PHASES)
test:
	@mkdir -p dist && : > $(PHASES)
	$(call timed,host-tools)
	$(call timed,venv)
	$(call timed,lint)
	$(call timed,typecheck)
	@$(MAKE) --no-print-directory -j2 timed-go-tools timed-release
	$(call timed,fetch-debs)
	@base=/tmp; [ "$$(findmnt -n -o FSTYPE -T /tmp 2>/dev/null)" != tmpfs ] || base=/var/tmp; \
	for failed in $$(ls -dt $$base/cpt.*/FAILED 2>/dev/null | tail -n +2); do \
		rm -rf "$${failed%/FAILED}"; done; \
	tmp=$$(mktemp -d $$base/cpt.XXXXXX) && echo "pytest on $(TEST_WORKERS) workers, in $$tmp" && \
	CREDPROVIDER_TEST_TIMES=dist/test-times.json CREDPROVIDER_TEST_PHASES=$(PHASES) \
		CREDPROVIDER_REQUIRE_BUNDLE=1 CREDPROVIDER_REQUIRE_ARCHES="$(ARCHES)" \
		$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
		--basetemp=$$tmp; status=$$?; \
	if [ $$status -eq 0 ]; then rm -rf $$tmp; else touch $$tmp/FAILED; \
		echo "kept $$tmp to look at (the next run removes it unless it is the newest)"; fi; \
	exit $$status

.PHONY: timed-go-tools timed-release
timed-go-tools:
	$(call timed,go-tools)
timed-release:
	$(call timed,build)
	$(call timed,release)

# Quick loop while developing: no lint, no bundle (bundle tests skip).
test-fast: $(STAMP)
	$(PY) -m pytest -q -x

demo: build
	$(PY) -m demo

bench: build
	$(PY) -m bench.run

# Fault injection, hostile input, spoofing and secret hygiene (also part of make test), with figures.
reliability-report: build
	$(PY) -m pytest -q tests/reliability
	$(PY) -m tests.reliability.report

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
