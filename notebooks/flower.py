# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A reproduced spec in Flower: same curves, same bits
#
# `fedlib.flower` runs a fedlib run spec as a Flower 1.42 app: `FedlibStrategy` (the server side: fedlib's
# sampler on its keyed stream, partition ids mapped to node ids once, the downlink codec, the algorithm's
# declared client view, its `aggregate` over replies sorted by client, hooks, central evaluation) and
# `client_app` (the client side: local training with the client's keyed batch stream, the uplink codec on the
# client's keyed noise stream, its error-feedback residual and state kept in its Flower context). Both are
# adapters over the round phases `run_federation` itself calls (`fedlib.engine.federation`), so there is no second
# copy of the round logic.
#
# Two runs, each once by fedlib's loop (into the run store) and once by Flower's simulation engine (Ray):
# **TACO with planted freeloaders** (Flower has no TACO; the freeloaders' memory and the expulsion live in the
# client and server state) and **FedAQ's quantized links** (Flower has no compressor with exact bit
# accounting). The result is the parity table: record for record, bit for bit.
#
# | profile | data | clients | rounds | seeds |
# |---|---|---|---|---|
# | `quick` (committed outputs, nbval) | digits (8×8), MLP | 10 | 8 | 1 |
# | `cpu` (`make reproduce`) | digits, MLP | 10 | 25 | 3 |
#
# Each profile's time, measured: docs/notebooks.md.

# %% tags=["parameters"] jupyter={"source_hidden": true}
profile: str = "quick"  # the profile the notebook runs under (quick: these defaults)
results_root: "Optional[str]" = None  # folder of the notebook's tables, figures and claims (None: none saved)
runs_root: "Optional[str]" = None  # the run store's folder (None: results/runs)
runner: str = "local"  # how runs execute: local processes or Ray tasks (one of "local", "ray")
ray_address: "Optional[str]" = None  # an existing Ray cluster's address (None: a local Ray)
ledger: "Optional[str]" = None  # an evidence ledger folder to read the runs from, computing none: a run it lacks is named where a table needs it (None: compute them into the run store)
data_root: "Optional[str]" = None  # the datasets' folder (None: the data-root rule, fedlib.data.roots)
device: str = "cpu"  # torch device of the runs (auto: a CUDA GPU when there is one)
seeds: list[int] = [0]  # seeds; each runs both specs in both loops
dataset: str = "digits"  # dataset name (fedlib.data)
model: str = "mlp"  # model name (fedlib.models)
model_kwargs: dict = {"hidden": [32]}  # the model's keyword arguments
num_clients: int = 10  # clients (one Flower node each)
dirichlet: float = 0.5  # Dirichlet label skew of the TACO run (FedAQ uses its equal shards)
rounds: int = 8  # communication rounds
local_steps: int = 10  # local SGD steps per round
batch_size: int = 32  # local minibatch size
lr: float = 0.05  # local SGD learning rate
kappa: float = 0.6  # the TACO freeloader threshold (Eq. 10)
expel_after: int = 3  # rounds with alpha at or above kappa that expel a client (Eq. 10)
n_freeloaders: int = 2  # planted freeloaders in the TACO run
fedaq_alpha: float = 0.01  # the FedAQ uplink resolution; the downlink's is alpha / sqrt(2n) (Eq. 22)
flower_workers: int = 2  # Ray actors running client apps
threads: int = 1  # torch threads per run (pinned: bitwise parity across processes)

# %%
from fedlib.display import hide_parameters_in_html, show_progress
from fedlib.notebook_params import check_notebook_parameters

params = check_notebook_parameters("flower", globals())  # a mistyped -p / profile name stops here
hide_parameters_in_html()

# %%
import os
import warnings

warnings.simplefilter("ignore")
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedlib.flower import run_in_simulation
from fedlib.papers.flower import experiments
from fedlib.paths import results_dir
from fedlib.runs import Keys, RunStore, run_specs

out = results_dir("flower", params.results_root)
specs = experiments(params)
print(f"{len(specs)} specs:", [dict(s.get("labels"))["run"] for s in specs])

# %% [markdown]
# ## fedlib's loop
# The specs run as every notebook's do: `run_specs` into the run store (a second execution recomputes nothing).

# %%
store, keys = RunStore.at(params.runs_root), Keys(params.data_root)
run_specs(specs, store=store, keys=keys, executor=params.runner, ray_address=params.ray_address, progress=show_progress())
fedlib_records = [store.load(keys(spec)) for spec in specs]

# %% [markdown]
# ## Flower's simulation engine
# One `run_simulation` (one Ray start, `flower_workers` actors) runs the specs one after the other on
# `num_clients` virtual SuperNodes. Nothing here is stored: it is computed every time.

# %%
flower_records = run_in_simulation(specs, root=params.data_root, workers=params.flower_workers)


# %% [markdown]
# ## Parity
# Every table each run records (per round, per client, per layer, TACO's α and expulsions) compared exactly,
# wall-clock columns aside; then the accuracy gap and the bits each way, summed over the rounds.

# %%
# NBVAL_CHECK_OUTPUT
def measured(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[c for c in frame.columns if str(c).endswith("_s")]).reset_index(drop=True)


def identical(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(measured(a[k]).equals(measured(b[k])) for k in a)


rows = []
for spec, ours, theirs in zip(specs, fedlib_records, flower_records):
    a, b = ours["rounds"], theirs["rounds"]
    rows.append({"run": dict(spec.get("labels"))["run"], "seed": spec.seed, "tables": len(ours),
                 "records identical": identical(ours, theirs),
                 "max |Δ test acc|": float(np.max(np.abs(a["test_acc"] - b["test_acc"]))),
                 "bits up (fedlib)": int(a["bits_up"].sum()), "bits up (Flower)": int(b["bits_up"].sum()),
                 "bits down (fedlib)": int(a["bits_down"].sum()), "bits down (Flower)": int(b["bits_down"].sum()),
                 "expelled (fedlib / Flower)": f"{int(a['expelled'].iloc[-1])} / {int(b['expelled'].iloc[-1])}"
                 if "expelled" in a else "-"})
parity = pd.DataFrame(rows)
parity.to_csv(out / "parity.csv", index=False)
parity

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for (spec, ours, theirs), color in zip(zip(specs, fedlib_records, flower_records), plt.cm.tab10.colors):
    label = f"{dict(spec.get('labels'))['run']}, seed {spec.seed}"
    for rec, style, who in ((ours, "-", "fedlib"), (theirs, "o", "Flower")):
        r = rec["rounds"]
        axes[0].plot(r["round"], r["test_acc"], style, color=color, mfc="none", label=f"{label} ({who})")
        axes[1].plot(r["round"], (r["bits_up"] + r["bits_down"]).cumsum() / 8e3, style, color=color, mfc="none")
axes[0].set(xlabel="round", ylabel="test accuracy", title="Same curves (lines: fedlib, circles: Flower)")
axes[1].set(xlabel="round", ylabel="kB sent, up + down (cumulative)", title="Same bits")
axes[0].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Equal records follow from one round logic and keyed randomness: every draw (sampling, batches, codec noise,
# freeloader noise) comes from a stream keyed by (purpose, round, client), so a client app in a Ray actor
# redraws exactly what fedlib's loop draws, and the server reads the replies in client order whatever order
# they arrive in. On a GPU (`gpu` profile, `device: auto`) client apps train on the GPU too, and the
# comparison is of the same arithmetic on the same device. docs/flower.md says
# how to take a spec into a deployed Flower app (`flwr run`) and what is not supported.
