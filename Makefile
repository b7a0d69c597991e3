# Everything runs in ./.venv, created on first use. `make demo` is the main job
# on the embedded defaults; `make test` installs everything and runs all tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)
STAMP := $(VENV)/.ragkit-installed

.PHONY: install demo test contract-counts clean

$(STAMP): pyproject.toml $(PLUGINS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ragkit plugins
	$(VENV)/bin/ragkit doctor

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

contract-counts: $(STAMP)
	$(PY) -m ragkit.testing.contracts

clean:
	rm -rf $(VENV) ragkit_data .pytest_cache .hypothesis
