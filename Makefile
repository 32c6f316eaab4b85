# bayesynth: two commands.  `make demo` and `make test` each set up .venv from scratch if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.bayesynth-installed

# Plots render without a screen. (bayesynth sets PyTensor's BLAS flags itself: see bayesynth/__init__.py.)

export MPLBACKEND ?= Agg

.PHONY: demo test venv benchmark peers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/bayesynth demo

# A notebook cell may take up to 900 s (nbmake's default is 300): notebook 02 takes about
# 290 s in all on 2 idle cores, and its fitting cell timed out at 300 s while another job
# shared the cores (2026-12-05).
test: $(STAMP)
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q --durations=20 \
		--nbmake --nbmake-timeout=900 tests notebooks

# The peers benchmarks/real_data.py compares with (--synthesizers "SDV copula,CTGAN"): SDV needs
# PyTorch, so it lives in an environment of its own (PyTorch's CPU build; not needed by tests).
PEERS := .venv-peers
$(PEERS)/.installed:
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet "torch==2.13.0" "sdv==2.0.0"
	touch $@

peers: $(PEERS)/.installed

benchmark: $(STAMP)
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python benchmarks/copula_gibbs.py

clean:
	rm -rf $(VENV) $(PEERS) .pytest_cache
