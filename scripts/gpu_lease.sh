#!/usr/bin/env bash
# One lease of a GPU machine, in one command (`make gpu-carry` prepares what it needs and prints how to call it):
#   1. the carried wheels, where the machine lacks them;
#   2. `pytest -m gpu` (the conformance battery on CUDA, seeds in one batch included);
#   3. `make bench-gpu`'s tables: the batched executors, 3 and 12 runs in one batch, and the 3 under other settings
#      (no TF32, cuDNN autotuning, bf16 autocast, convolutions as matrix products); no sequential column (5-10x slower,
#      measured on the first two leases) and no worker table (four workers added nothing on the first);
#   4. pieces of the ledger, one per word of PIECES (a notebook's name: `--only` it; `all`: the whole plan in priority
#      order; default `all`), each with the seconds left, a cell's seeds trained as one batch; should one fail, a
#      piece of the same runs each alone (--no-seed-batches) with what is left.
# Every log goes to $OUT (default /tmp/gpu-lease), with the ledger's entries packed in one archive.
#
#   bash scripts/gpu_lease.sh SECONDS COMMIT     # SECONDS: the whole command's limit; COMMIT: this checkout's commit
#   BENCH=0 bash scripts/gpu_lease.sh ...        # no benchmark (about 100 s more for the pieces; the step's table
#                                                # is measured: docs/speed.md)
#   PIECES="taco all" bash scripts/gpu_lease.sh ...  # TACO's runs first, then the plan's priority order
#   LEDGER=.gpu-carry/ledger-1.tar.gz BATTERY=0 BENCH=0 bash scripts/gpu_lease.sh ...
#       # a second call on a machine still warm: first unpack the ledger the first call brought back (copied here into
#       # the carried folder; this call's copy of the working tree holds the committed ledger alone), then pieces only
#
# A dry run on a CPU (no GPU, no network): a copy of the tracked files and .gpu-carry (`prepare_gpu_carry.py
# --python-version` of this Python), a stand-in `nvidia-smi` on PATH, and SECONDS under 105, which leaves a piece
# fewer than 30 s, so none starts: `unshare -n bash scripts/gpu_lease.sh 100 $(git rev-parse HEAD)`.
set -u
total=${1:?the seconds this command may take}
export FEDLIB_COMMIT=${2:?the commit of this checkout (a copy without .git)}
out=${OUT:-/tmp/gpu-lease}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD FEDLIB_DATA=$PWD/.gpu-carry/data
left() { echo $((total - SECONDS)); }

if [ -n "${LEDGER:-}" ]; then
    # an earlier call's `ledger.tar.gz` (its folder `gpu`, index and entries), over the committed one; the pieces
    # read it as every ledger is read (each entry checked against its index line)
    strays=$(tar tzf "$LEDGER" | grep -vE '^gpu/(\.claims/)?[^/]*$')
    if [ $? -gt 1 ] || [ -n "$strays" ] || ! tar xzf "$LEDGER" -C evidence; then
        echo "LEDGER=$LEDGER: not a ledger archive this script packed (gpu/, its files, its claims); nothing run"
        exit 1
    fi
    echo "ledger from $LEDGER: $(ls evidence/gpu | grep -c '\.tar\.gz$') entries"
fi
# The carried wheels, offline: what is already installed is left as it is (scripts/prepare_gpu_carry.py lists them).
python3 -m pip install --quiet --no-index --find-links .gpu-carry/wheels -r .gpu-carry/requirements.txt || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ "${BATTERY:-1}" != 0 ]; then
    # The repository's pytest options name nbval's, which this machine need not have: none are needed here.
    timeout 120 python3 -m pytest -o addopts="" -m gpu -q -p no:cacheprovider -n 4 tests/test_conformance.py \
        >"$out/pytest-gpu.log" 2>&1
    echo "pytest -m gpu (exit $?): $(tail -1 "$out/pytest-gpu.log")"
fi
if [ "${BENCH:-1}" != 0 ]; then
    timeout 150 python3 benchmarks/bench_gpu.py --executors vmap graph --seeds 3 12 \
        --modes no-tf32 autotune bf16 gemm-conv --workers 2>&1 | tee "$out/bench-gpu.log"
fi
for which in ${PIECES:-all}; do
    if [ "$which" = all ]; then only=(); else only=(--only "$which"); fi
    budget=$(($(left) - 75))  # planning the profile, the last run's export and packing the ledger come after
    echo "piece ${which}: budget ${budget} s"
    [ "$budget" -gt 30 ] || break
    # The piece's budget counts from its plan; `timeout` keeps the packing below inside the command's limit whatever
    # it does (on 2026-11-30 a piece overran its budget, the command was killed before packing, and the runs it had
    # finished were lost with the machine).
    timeout $((budget + 40)) python3 -m fedlib piece --profile gpu ${only[@]+"${only[@]}"} --budget "${budget}s" \
        >"$out/piece-$which.log" 2>&1
    status=$?
    echo "piece ${which} (exit $status):"
    grep -v "not started" "$out/piece-$which.log" | tail -30
    budget=$(($(left) - 45))
    if [ "$status" -ne 0 ] && [ "$budget" -gt 30 ]; then
        echo "piece ${which} with every run alone, budget ${budget} s"
        timeout $((budget + 30)) python3 -m fedlib piece --profile gpu ${only[@]+"${only[@]}"} --no-seed-batches \
            --budget "${budget}s" >"$out/piece-$which-alone.log" 2>&1
        echo "piece ${which} --no-seed-batches (exit $?):"
        grep -v "not started" "$out/piece-$which-alone.log" | tail -20
    fi
done
tar czf "$out/ledger.tar.gz" -C evidence gpu
