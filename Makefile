# credprovider: make demo | make test | make build | make bench
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
BUNDLE := dist/credprovider
SOURCES := $(shell find credprovider -name '*.py') build.spec

.PHONY: venv lint format typecheck build test test-fast demo bench reliability-report clean

$(STAMP):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check credprovider tests bench
	$(VENV)/bin/ruff format --check credprovider tests bench

format: $(STAMP)
	$(VENV)/bin/ruff format credprovider tests bench
	$(VENV)/bin/ruff check --fix credprovider tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict credprovider

$(BUNDLE)/credprovider: $(SOURCES) $(STAMP)
	PYTHONHASHSEED=0 SOURCE_DATE_EPOCH=1700000000 $(VENV)/bin/pyinstaller --noconfirm \
		--log-level WARN --distpath dist --workpath build/pyinstaller build.spec
	cd $(BUNDLE) && for name in $$(cd ../.. && $(PY) -c \
		'from credprovider.entry import PLUGIN_MODULES; print(*PLUGIN_MODULES)'); do \
		ln -sf credprovider $$name; done
	@touch $@

build: $(BUNDLE)/credprovider
	@echo "bundle: $(BUNDLE) $$(du -sm $(BUNDLE) | cut -f1) MiB, $$(find $(BUNDLE) -type f | wc -l) files"
	@ls -l $(BUNDLE) | grep -- '->'

# The full suite: lint, types, the bundle, and every test (unit, integration, through the bundle).
test: lint typecheck build
	CREDPROVIDER_REQUIRE_BUNDLE=1 $(PY) -m pytest -q

# Quick loop while developing: no lint, no bundle (bundle tests skip).
test-fast: $(STAMP)
	$(PY) -m pytest -q -x

demo: build
	$(PY) -m tests.demo

bench: build
	$(PY) -m bench.run

# Fault injection, hostile input, spoofing and secret hygiene (also part of make test), with figures.
reliability-report: build
	$(PY) -m pytest -q tests/reliability
	$(PY) -m tests.reliability.report

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
