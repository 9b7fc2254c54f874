# The two commands users need: `make lab` (set up and open the course) and `make test`
# (set up and run every check). Every target sets up .venv itself when it is missing.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two stamps, one per install: `make lab` installs what the chapters need (the `lab` extra), `make test` adds the
# test tools (the `dev` extra) on top. Their names carry a hash of the files that define the install, so editing
# them re-installs, and a second run with nothing changed skips straight to the work.
HASH   := $(shell cat settings.ini setup.py | sha1sum | cut -c1-12)
STAMP  := $(VENV)/.installed-lab-$(HASH)
DEV    := $(VENV)/.installed-dev-$(HASH)
TORCH  ?= torch==2.13.0
PORT   ?= 8888
# pytest in two processes (pytest-xdist), one torch thread each (tests/conftest.py); each test file runs whole on one
# worker, so a file's module fixtures are built once. `make test XDIST=` runs pytest in one process.
XDIST  ?= -n 2 --dist loadfile
# JupyterLab's configuration for the course: the save hook that cleans notebooks, and settings
# overrides (no news pop-up, no update check, no widget state saved into the notebooks)
LAB    := $(CURDIR)/tools/lab

.PHONY: help setup lab test check-sync prerender nbtest pytest docs docs-check readme bench hooks clean

help:
	@echo "make lab    set up .venv (what the chapters need) and open the course in JupyterLab (localhost, with a token)"
	@echo "make test   add the test tools to .venv and run every check (sync, notebooks, pytest, docs checks)"
	@echo "make docs   docs checks, then render the site with Quarto (exit 2 when Quarto is missing)"
	@echo "make readme render README.md from nbs/index.ipynb without Quarto"
	@echo "make bench  run the attention benchmarks (python -m transformer_lit.bench)"

$(STAMP): settings.ini setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@# torch first and explicitly: a bare `torch` requirement would pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[lab]"
	@rm -f $(VENV)/.installed-*
	@$(MAKE) --no-print-directory hooks
	@touch $@

# the test tools on top of the lab install (a lab-only .venv gets them on the first `make test`)
$(DEV): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[lab,dev]"
	@rm -f $(VENV)/.installed-dev-*
	@touch $@

setup: $(DEV)

hooks:
	@# nbdev's Jupyter save hook and merge driver, plus a pre-commit hook that refuses unclean notebooks
	@$(BIN)/nbdev_install_hooks >/dev/null 2>&1 || true
	@if [ -f .git/hooks/post-merge ]; then printf '#!/bin/bash\n.venv/bin/nbdev_trust\n' > .git/hooks/post-merge; fi
	@if [ -d .git/hooks ]; then cp tools/pre-commit .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; fi

lab: $(STAMP)
	@# trusted notebooks show their saved HTML outputs (the kernel-free explorer) as they are
	@$(BIN)/jupyter trust nbs/*.ipynb >/dev/null
	@# started from nbs/, so the save hook and the notebooks' relative paths see the same directory
	cd nbs && $(CURDIR)/$(BIN)/jupyter lab --config=$(LAB)/jupyter_server_config.py \
	  --LabApp.app_settings_dir=$(LAB) --LabApp.news_url=None --port=$(PORT) --no-browser \
	  $(if $(filter 0,$(shell id -u)),--allow-root,)

test: $(DEV)
	$(BIN)/python tools/check_sync.py
	@# nbdev's pre-render step as the docs workflow runs it (no Quarto needed), then a check of torch's global state
	MPLBACKEND=Agg $(BIN)/python tools/prerender.py
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(BIN)/python tools/test_nbs.py --workers 2
	MPLBACKEND=Agg $(BIN)/python -m pytest tests/ -q $(XDIST)

check-sync: $(STAMP)
	$(BIN)/python tools/check_sync.py

prerender: $(STAMP)
	MPLBACKEND=Agg $(BIN)/python tools/prerender.py

nbtest: $(STAMP)
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(BIN)/python tools/test_nbs.py --workers 2

pytest: $(DEV)
	MPLBACKEND=Agg $(BIN)/python -m pytest tests/ -q $(XDIST)

docs-check: $(DEV)
	$(BIN)/python -m pytest tests/test_docs.py -q

docs: docs-check
	@if command -v quarto >/dev/null 2>&1; then \
	  $(BIN)/python tools/docs.py; \
	else \
	  echo "The docs checks passed, but Quarto is not installed, so the site cannot be rendered."; \
	  echo "Install Quarto (https://quarto.org/docs/get-started/), for example on Debian/Ubuntu:"; \
	  echo "  $(BIN)/nbdev_install_quarto    # or download the .deb from https://quarto.org/docs/download/"; \
	  echo "then run 'make docs' again."; \
	  exit 2; \
	fi

readme: $(STAMP)
	$(BIN)/python tools/render_readme.py

bench: $(STAMP)
	$(BIN)/python -m transformer_lit.bench

clean:
	rm -rf _docs _proc nbs/_docs .pytest_cache .hypothesis .nbtest
