# bayesynth: two commands.  `make demo` and `make test` each set up .venv from scratch if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.bayesynth-installed

# Plots render without a screen. (bayesynth sets PyTensor's BLAS flags itself: see bayesynth/__init__.py.)

export MPLBACKEND ?= Agg

.PHONY: demo test venv benchmark clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/bayesynth demo

test: $(STAMP)
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q --durations=20 --nbmake tests notebooks

benchmark: $(STAMP)
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python benchmarks/copula_gibbs.py

clean:
	rm -rf $(VENV) .pytest_cache
