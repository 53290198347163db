# The two commands a user types: `make reproduce` (the main job) and `make test`.
# Every target installs what it needs first (a .venv in this folder).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fedlib-installed
# The CPU wheel of this version is what this project is tested with, but on Linux plain pip resolves
# torch==2.13.0 to PyPI's CUDA build (several GB with its nvidia-* packages) unless pip is configured
# with a CPU-wheel source. `make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu` gets the CPU
# build (docs/install.md). On a GPU machine, set TORCH_SPEC to the build you want.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
# fedlib and its ~170 dependencies are installed by uv (itself pip-installed into the venv first), which resolves and
# downloads in parallel: about 6 s here against pip's 102 s for the same packages (docs/install.md). uv reads no pip
# configuration: behind a mirror set UV_INDEX_URL, or use INSTALLER=pip. torch always goes through pip (TORCH_INDEX).
# --compile-bytecode: uv writes no .pyc by default, as pip does, and where PYTHONDONTWRITEBYTECODE is set every fresh
# interpreter (each test subprocess, notebook kernel, run worker) then compiles its imports again. torch's bytecode is
# compiled on every core (compileall -j 0) rather than by pip on one: `make setup` on a fresh clone here took 48, 51
# and 62 s, against 63 and 73 s (docs/install.md). Bytecode is a cache, so a file that does not compile (torch ships test
# files in 3.12-only syntax) is left to import time.
INSTALLER ?= uv
INSTALL_uv = $(PY) -m pip install --quiet --disable-pip-version-check "uv==0.13.9" && \
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY)
INSTALL_pip = $(PY) -m pip install --quiet --disable-pip-version-check
PROFILE ?= cpu
BUDGET ?= 10m
ARGS ?=
# Thread counts are chosen per run by fedlib (threads="auto", measured by `make bench`): do not pin
# OMP_NUM_THREADS here, it would override that choice for every process.

.PHONY: setup test reproduce report gpu-piece ledger-piece ledger-expected gpu-carry bench bench-gpu lab notebooks clean

setup: $(STAMP)

# The kernel name and display name below are the kernelspec the committed notebooks carry
# (scripts/build_notebooks.py, KERNELSPEC; tests/test_environment.py keeps them equal).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-compile --disable-pip-version-check $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import importlib.util as u; print(*u.find_spec("torch").submodule_search_locations)')" > /dev/null || true
	$(if $(INSTALL_$(INSTALLER)),,$(error INSTALLER=$(INSTALLER) is not an installer: \
	use INSTALLER=uv or INSTALLER=pip))
	$(INSTALL_$(INSTALLER)) -e ".[ray,flower,notebooks,test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (fedlib)" > /dev/null
	touch $(STAMP)

# Test modules and notebooks run in parallel worker processes, one per core (at most 4); --dist loadscope keeps each
# notebook's cells, and each test module, in one worker (nbval runs a notebook's cells in one kernel). A third
# worker on 2 cores was measured no faster (docs/tests.md, "How long `make test` takes").
# The workers keep every core busy, where a run with two torch threads (a CNN with threads "auto") would spin its
# OpenMP threads for many times its arithmetic: passive waiting, the same results (docs/tests.md, "Speed").
test: setup
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadscope

# ARGS: more options of `python -m fedlib reproduce` (--help), e.g. ARGS='--only fedaq -p rounds 2'.
reproduce: setup
	$(PY) -m fedlib reproduce --profile $(PROFILE) $(if $(WORKERS),--workers $(WORKERS)) $(ARGS)

# A profile's rendered results as pages to commit (docs/report/<profile>/: REPORT.html and every notebook as HTML),
# from RESULTS, the --results folder of a `make reproduce` run: `make report` after `make reproduce`.
RESULTS ?= results
report: setup
	$(PY) scripts/publish_report.py --results $(RESULTS) --profile $(PROFILE)

# One piece of the gpu profile: the next runs the ledger (evidence/gpu/) lacks, in the papers' priority order, within
# BUDGET; RATE=<client-steps/s> for runs of which no rate is measured yet, STALE=1 to recompute stale entries first.
gpu-piece: setup
	$(PY) -m fedlib piece --profile gpu --budget $(BUDGET) $(if $(RATE),--rate $(RATE)) $(if $(STALE),--recompute-stale)

# The same piece in the background at the lowest CPU priority, on any machine (a CPU computes the gpu profile's runs
# too, slower; each finished run goes into the ledger at once; a run longer than BUDGET trains to its end and the next
# piece resumes it: --long-runs continue): `make ledger-piece BUDGET=3h`, its log in PIECE_LOG.
# Fashion-MNIST must be readable (Debian's dataset-fashion-mnist, data/fashion_mnist/, or FEDLIB_DATA).
# PIECES=<n> starts n pieces at once, the second's log PIECE_LOG with -2 before .log, and so on: they share the results
# folder and never compute a run twice (each claims a run before it starts it). One per core where the runs left train
# on one thread, as FedShift's do (docs/ledger.md: two on this VM's 2 cores, 70-72 s a round each).
PIECE_LOG ?= results/ledger-piece.log
PIECES ?= 1
ledger-piece: setup
	@case "$(PIECES)" in ''|*[!0-9]*|0*) echo "PIECES=$(PIECES): the number of pieces to start, 1 or more" >&2; exit 2;; esac
	mkdir -p $(dir $(PIECE_LOG))
	@for i in $$(seq 1 $(PIECES)); do \
		log=$(PIECE_LOG); [ $$i = 1 ] || log=$${log%.log}-$$i.log; \
		nohup nice -n 19 $(PY) -m fedlib piece --profile gpu --budget $(BUDGET) --long-runs continue $(if $(RATE),--rate $(RATE)) > $$log 2>&1 & \
		echo "ledger piece $$i of $(PIECES) runs in the background (budget $(BUDGET), nice 19); follow it with: tail -f $$log"; \
	done

# After a piece: notebooks/expected-results-gpu.md rebuilt from the ledger by the headline judge (no dataset needed).
ledger-expected: setup
	$(PY) -m fedlib from-ledger --profile gpu --headlines-only --write-expected

# What a bare GPU machine (torch, numpy, pandas, sympy, seaborn; no network) needs for a piece, in .gpu-carry/,
# and the command to run there.
gpu-carry: setup
	$(PY) scripts/prepare_gpu_carry.py

bench: setup
	$(PY) benchmarks/bench_round.py
	$(PY) benchmarks/bench_cold.py
	$(PY) benchmarks/bench_mucsc.py

# Per-round training time at the four papers' scales on a GPU: sequential vs batched vs the GPU-time floor.
bench-gpu: setup
	$(PY) benchmarks/bench_gpu.py

# Jupyter refuses to start as root without --allow-root (containers often run as root). The config pairs each
# notebooks/<name>.ipynb with its jupytext source <name>.py (notebooks/jupytext.toml) and lists only the .ipynb.
lab: setup
	$(VENV)/bin/jupyter lab notebooks/ --config=jupyter_server_config.json $(if $(filter 0,$(shell id -u)),--allow-root)

# Rebuild the committed notebooks (quick profile, with outputs) from their jupytext sources.
notebooks: setup
	$(PY) scripts/build_notebooks.py

clean:
	rm -rf results .pytest_cache
