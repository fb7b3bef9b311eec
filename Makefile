# Set-up on a fresh machine: `make demo` (the main job) and `make test` (all tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tileblas-installed

.PHONY: demo test install bench docs clean

$(STAMP): pyproject.toml setup.py src/tileblas/kernels/_native.c src/tileblas/kernels/_pool.c src/tileblas/kernels/_pool.h \
		src/tileblas/blas/_fastpath.c src/tileblas/blas/_fp.h $(wildcard src/tileblas/blas/_fp_*.c) \
		src/tileblas/rblas/_guard.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/tileblas demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

docs: $(STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs/_build/html/index.html"

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build docs/_build docs/reference/api src/*.egg-info src/tileblas/*.so src/tileblas/*/*.so
