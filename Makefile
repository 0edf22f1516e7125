# The two commands a reader needs: `make book` and `make test`. Both set up everything.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(shell $(if $(wildcard $(PY)),$(PY),python3) scripts/toc_notebooks.py)
export TRANSFORMER_BOOK_QUIET := 1

.PHONY: book serve execute test lint unit nbval nbval-alt seeds html pdf browser colab bench margins gpu-check install clean

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# Both editions: the English one at the site's root, the zh-TW one under zh-TW/, its
# pages generated from the English pages and the catalogues (scripts/i18n.py). Each
# edition holds local copies of MathJax, require.js and the widget manager, fetched
# from npm into _build/npm (scripts/npm_copies.py), so the book works offline. The two
# editions build side by side (Sphinx uses one core), each into its own log, printed
# when both are done; either one's warning fails the build.
book: $(STAMP)
	$(PY) scripts/npm_copies.py
	$(PY) scripts/i18n.py generate
	$(VENV)/bin/jupyter-book build . -W -n --keep-going > _build/book-en.log 2>&1 & en=$$!; \
	$(VENV)/bin/jupyter-book build zh-TW -W -n --keep-going > _build/book-zh-TW.log 2>&1 & \
	zh=$$!; wait $$en; en_rc=$$?; wait $$zh; zh_rc=$$?; \
	cat _build/book-en.log _build/book-zh-TW.log; \
	echo "jupyter-book: English exit status $$en_rc, zh-TW $$zh_rc"; \
	test $$en_rc -eq 0 && test $$zh_rc -eq 0
	rm -rf _build/html/zh-TW && cp -r zh-TW/_build/html _build/html/zh-TW
	@echo "The book is in $(CURDIR)/_build/html/index.html, its zh-TW edition in" \
		"_build/html/zh-TW (make serve to browse them)"

serve:
	@echo "Serving http://localhost:8000 (Ctrl-C to stop)"
	$(PY) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

execute: $(STAMP)
	$(PY) scripts/execute.py $(NOTEBOOKS)
	$(PY) scripts/i18n.py generate

bench: $(STAMP)
	$(PY) scripts/execute.py --bench $(NOTEBOOKS)
	$(PY) scripts/bench_attention.py

# The margin of every bound the chapters and the seeds tests assert, under each numeric
# configuration this CPU runs (about 13 minutes a configuration on 2 cores): a table in
# _build/margins/report.md, tightest first.
margins: $(STAMP)
	$(PY) scripts/margins.py all _build/margins $(NOTEBOOKS)

gpu-check: $(STAMP)
	$(PY) scripts/gpu_check.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests scripts book
	$(VENV)/bin/ruff format --check src tests scripts book

# Two processes at a time, each with torch's own threads (two here). OMP_WAIT_POLICY=
# PASSIVE lets a thread that waits sleep instead of spinning: with two processes of two
# threads on two cores, spinning threads take the cores from the working ones (the
# nbval stage below stalled for 12 minutes without it). It changes how threads wait,
# never what they compute. Measured on 2 cores: unit 180 s against 223 s one at a time.
TWO_AT_A_TIME := OMP_WAIT_POLICY=PASSIVE
# The stages that run two notebooks or two seeds tests at a time also keep a chapter's
# independent runs in this process, in turn on one thread (the same numbers:
# transformer_book._parallel): forked workers beside a second notebook would put three
# or four busy processes on two cores, and Chapter 6's timed KV-cache check failed so
# once in a fresh-clone run (the cached generation 4.5 times as slow as it is alone).
# make unit keeps the workers: its tests check that they fork.
ONE_WORKER := TRANSFORMER_BOOK_WORKERS=1
unit: $(STAMP)
	env $(TWO_AT_A_TIME) $(VENV)/bin/pytest -q -n 2 -m "not slow and not browser and not seeds" tests

NBVAL := $(VENV)/bin/pytest -q --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg \
	--nbval-current-env -p no:cacheprovider

# Numeric configurations. Low-order digits of floating-point results, and the path of a
# training run, depend on the CPU's kernels (ATen's avx512, avx2 or portable `default`,
# with MKL's and oneDNN's) and on the thread count, so the notebooks print nothing that
# does, and every bound they assert must hold under each. A bound that holds under two
# kernel sets can still fail under the third, so each stage that executes every chapter
# runs under its own (scripts/numerics.py, which falls back to the CPU's highest where
# one is above it and prints what it chose):
#   nbval  avx2     the kernels of most readers' laptops, with the notebook's own seed
#   seeds  best     the machine's highest (avx512 where the CPU has it), other seeds
#   colab  default  the portable kernels, one thread, Colab's package set
# An AVX-512 machine thus checks all three; an AVX2 machine checks avx2 and default.
# An ATEN_CPU_CAPABILITY set by the caller is a ceiling (ATEN_CPU_CAPABILITY=avx2 make
# test tests as an AVX2 machine would).
NUMERICS = $$($(PY) scripts/numerics.py $(1))
SAY_NUMERICS = @$(PY) scripts/numerics.py --describe $(1)
ALT_NUMERICS := $$($(PY) scripts/numerics.py default)

# Two chapters at a time (one per worker: --dist loadscope keeps a notebook's cells in
# one kernel, in order), each kernel with its two threads, as a reader's run has: 331 s
# against about 440 s one at a time. No cell asserts a timing (timings are printed, and
# their cells are NBVAL_IGNORE_OUTPUT), so the load of the other chapter changes nothing
# that is compared.
nbval: $(STAMP)
	$(call SAY_NUMERICS,avx2)
	env $(TWO_AT_A_TIME) $(ONE_WORKER) $(call NUMERICS,avx2) $(NBVAL) -n 2 --dist loadscope \
		$(NOTEBOOKS)

nbval-alt: $(STAMP)
	env $(ALT_NUMERICS) $(NBVAL) $(NOTEBOOKS)

# Each chapter's headline experiment with seeds other than the notebook's. The tests
# run one thread each (tests/conftest.py's one_thread), two processes at a time, the
# longest (marked heavy) first. (Not xdist_group: under pytest 9 it keeps no group in
# one process, so tests that share work are one test.)
seeds: $(STAMP)
	$(call SAY_NUMERICS,best)
	env $(ONE_WORKER) $(call NUMERICS,best) $(VENV)/bin/pytest -q -n 2 -m seeds tests

html: book

# A PDF of each edition in _build/pdf/ (and in the site's pdf/ folders, for the
# download menu): the built HTML printed by headless Chromium (scripts/pdf.py), then
# read back with poppler-utils (tests/test_pdf.py). Needs `make book` first. `make
# browser` alone, before `make pdf`, skips the menus' PDF links (CI=true fails).
pdf: $(STAMP)
	$(PY) scripts/pdf.py
	$(VENV)/bin/pytest -q -m browser tests/test_pdf.py

# Two pages at a time (pytest-xdist; each worker its own server and Chromium): a page
# mostly waits (loading, typesetting, a widget's views), so one at a time kept the CPU
# busy for 72 of 257 s; two took 164 s, three 175. Under that load a page once took
# over Playwright's default 30 s to go quiet, so the tests' waits allow 90 s (WAIT_MS).
browser: $(STAMP)
	$(PY) scripts/npm_copies.py axe-core@4.14.1
	$(VENV)/bin/pytest -q -rs -m browser -n 2 tests/test_book_html.py tests/test_search.py

# Every chapter on Google Colab's own package set (tests/colab/requirements.txt) and
# Python 3.13 (python3.13 on PATH, else pyenv's), installed as Colab's setup cell does;
# no cell may write to stderr. On a fresh machine it downloads about 3 GB (torch 2.11.0
# from PyPI is the CUDA build), into a temporary environment (README: make colab).
# ALT_NUMERICS holds each kernel to one thread, so two notebooks run side by side.
colab: $(STAMP)
	$(call SAY_NUMERICS,default)
	env $(ONE_WORKER) $(ALT_NUMERICS) $(VENV)/bin/pytest -q -n 2 -m slow tests/test_colab_like.py

# `make test` builds the Colab stage's environment from its start, in the background
# (most of it is waiting on PyPI's downloads, about 3 GB), while the other stages run;
# `make colab` then takes it over (COLAB_ENV; the build's log: _build/colab-env.log).
COLAB_ENV := $(CURDIR)/_build/colab-env
test: $(STAMP)
	rm -rf $(COLAB_ENV) && mkdir -p $(COLAB_ENV)
	(env COLAB_ENV=$(COLAB_ENV) $(VENV)/bin/pytest -q -p no:cacheprovider \
		tests/test_colab_like.py::test_the_environment_is_colabs \
		> _build/colab-env.log 2>&1 &)
	$(MAKE) lint unit nbval seeds book pdf browser
	env COLAB_ENV=$(COLAB_ENV) $(MAKE) colab
	@echo "make test: all stages passed"

clean:
	rm -rf _build zh-TW/_build dist .pytest_cache .ruff_cache
