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
# # FedShift: mixed-precision aggregation with weight shifting — a reproduction companion
#
# **Paper.** J. Seo, M. Kim, C. Rong, *FedShift: Robust Federated Learning Aggregation Scheme in Resource
# Constrained Environment via Weight Shifting*, arXiv 2402.01070 (v2).
#
# **The paper's claim.** When half of the clients ("inferior", slow links) upload their trained weights
# quantized to 4–8 bits and the other half upload fp32, the aggregate is biased. FedShift subtracts, after
# aggregation, a fraction (the inferior clients' share, |𝕀|/K) of each layer's mean weight:
# ŵ = w − (|𝕀|/K)·mean(w)·𝟏 (Eq. 10). Across FedAvg (FedPAQ), FedProx, SCAFFOLD and Fed-EF this adds
# +0.7 to +5.4 points of CIFAR-10 accuracy (Table I), holds for Dirichlet splits and both quantizers
# (Table II), costs nothing to communicate, and comes with a convergence bound (Theorem 1) and a
# divergence identity (Theorem 2).
#
# **What this notebook reproduces**, every number computed here (paper numbers are typed in and labelled):
# Table III exactly from the codecs; Table I and II analogues; Figure 7/8/9 analogues; the shift-only ablation;
# the authors' early-stopped K-means against a converged one; Theorem 2 printed vs corrected on every round of
# the runs; Theorem 1 in sympy, where it turns negative, and against a run with measured constants; the fixed
# point at which FedShift stalls on a quadratic. Errata are listed at the end, then the claims table.
#
# **Profiles** (papermill `-f notebooks/profiles/fedshift/<name>.yaml`): `quick` (the committed outputs; digits,
# 20 clients, 1 seed), `cpu` (`make reproduce`; digits, 3 seeds, more rounds and bit
# widths), `gpu` (the paper's CNN2 and local settings on Fashion-MNIST, 3 seeds, one GPU), `full` (the paper's
# scale: CIFAR-10 from local files, 100 clients, 800 rounds, 3 seeds; many GPU-hours).

# %% tags=["parameters"] jupyter={"source_hidden": true}
profile: str = "quick"  # the profile the notebook runs under (quick: these defaults)
results_root: "Optional[str]" = None  # folder of the notebook's tables, figures and claims (None: none saved)
runs_root: "Optional[str]" = None  # the run store's folder (None: results/runs)
runner: str = "local"  # how runs execute: local processes or Ray tasks (one of "local", "ray")
ray_address: "Optional[str]" = None  # an existing Ray cluster's address (None: a local Ray)
ledger: "Optional[str]" = None  # an evidence ledger folder to read the runs from, computing none: a run it lacks is named where a table needs it (None: compute them into the run store)
data_root: "Optional[str]" = None  # the datasets' folder (None: the data-root rule, fedlib.data.roots)
device: str = "cpu"  # torch device of the runs (auto: a CUDA GPU when there is one)
seeds: list[int] = [0]  # seeds of every grid (Theorem 1: the first only)
dataset: str = "digits"  # dataset name (fedlib.data)
model: str = "mlp"  # model name (fedlib.models)
model_kwargs: dict = {"hidden": [64], "bias": False}  # the model's keyword arguments
num_clients: int = 20  # clients of the parity (and Dirichlet) split
per_round_inferior: int = 2  # inferior (quantizing) clients sampled each round
per_round_superior: int = 2  # superior (fp32) clients sampled each round
rounds: int = 10  # communication rounds
local_epochs: float = 1.0  # local epochs per round
batch_size: int = 16  # local minibatch size (Dirichlet splits: min_size is half of it)
lr: float = 0.05  # local SGD learning rate
momentum: float = 0.9  # local SGD momentum
augment: "Optional[str]" = None  # local augmentation (fedlib.core.augment; crop_flip for CIFAR, as the authors' code)
fedprox_mu: float = 0.01  # FedProx's proximal weight
scaffold_coef: str = "samples"  # SCAFFOLD's control-variate divisor (one of "steps", "samples")
algorithms: list[str] = ["fedavg", "fedprox", "scaffold", "fedef"]  # Table I methods
quantizers: list[str] = ["kmeans"]  # Table I weight quantizers (the first: the ablations')
bits_list: list[int] = [2, 4, 8]  # Table I bit widths (the lowest: the ablations')
kmeans_init: str = "quantile"  # K-means initialisation (fedlib.codecs.kmeans)
kmeans_iters: int = 50  # Lloyd iterations of the converged K-means
table2_alphas: list[float] = [0.1, 0.5, 100.0]  # Table II Dirichlet concentrations
table2_bits: list[int] = [2, 4]  # Table II bit widths
table2_quantizers: list[str] = ["uniform", "kmeans"]  # Table II weight quantizers
ablations: bool = True  # run the mechanism ablations
kmeans_reference_bits: "Optional[int]" = 4  # bits of the converged-vs-reference K-means grid (None: off)
theorem1_rounds: int = 20  # rounds of Theorem 1's strongly convex runs (0: off)
theorem1_local_steps: int = 10  # local SGD steps per round of Theorem 1's runs
theorem1_lam: float = 0.5  # L2 weight of Theorem 1's softmax regression
sma_window: int = 5  # rounds of the accuracy curves' moving average
threads: "Union[int, str]" = 1  # torch threads per run (or "auto")

# %%
from fedlib.display import Scorecard, full_table, hide_parameters_in_html, show_progress
from fedlib.notebook_params import check_notebook_parameters

params = check_notebook_parameters("fedshift", globals())  # a mistyped -p / profile name stops here
hide_parameters_in_html()
scorecard = Scorecard("Claims")  # the count of this notebook's verdicts, filled in by its last cell

# %%
import time
import warnings
from dataclasses import replace

warnings.simplefilter("ignore")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import sympy as sp
import torch

from fedlib import build_model, load_dataset
from fedlib.codecs.base import Identity
from fedlib.codecs.kmeans import REFERENCE_CODE, KMeansQuantizer, weight_quantizer
from fedlib.data import label_counts
from fedlib.papers import fedshift as fs
from fedlib.notebook_runs import notebook_records
from fedlib.runs import build_run
from fedlib.runs.spec import named_runs
from fedlib.papers.fedshift.claims import (ShiftGains, Theory, bundle_from_runs, claims as fedshift_claims, figure_algorithm,
                                    figure_runs, figure_specs, kmeans_gain)
from fedlib.paths import results_dir
from theory import fedshift as th

sns.set_theme(style="whitegrid", context="notebook")
pd.set_option("display.precision", 4)
out_dir = results_dir("fedshift", params.results_root)
t_start = time.perf_counter()
ds = load_dataset(params.dataset, root=params.data_root)
K = params.per_round_inferior + params.per_round_superior
print(f"profile={params.profile}: {params.dataset} ({len(ds.y_train)} train / {len(ds.y_test)} test), {params.num_clients} clients, "
      f"{K} per round ({params.per_round_inferior} inferior + {params.per_round_superior} superior), {params.rounds} rounds, seeds {list(params.seeds)}")

# %% [markdown]
# ## Setup
#
# The paper's setting next to ours. Inferior clients are the odd client ids (the reference code's
# rule); every round selects a fixed number of inferior and superior clients (the code's "half-odd-even"
# selection), so the shift coefficient is |𝕀_t|/K every round. Aggregation is uniform (1/K), as in Eq. 4
# and the code, also for Dirichlet splits. The downlink is fp32; inferior clients upload their trained
# **weights** quantized layer by layer.

# %%
setup = pd.DataFrame([
    ("dataset", "CIFAR-10", params.dataset),
    ("model", "CNN2 (2 conv + 2 fc, bias-free, 2,155,872 params)", f"{params.model} {params.model_kwargs}"),
    ("clients N / per round K", "100 / 10 (5 inferior + 5 superior)", f"{params.num_clients} / {K} ({params.per_round_inferior} + {params.per_round_superior})"),
    ("rounds", "800", str(params.rounds)),
    ("local training", "10 epochs, batch 50, SGD lr 0.005, momentum 0.9", f"{params.local_epochs} epochs, batch {params.batch_size}, SGD lr {params.lr}, momentum {params.momentum}"),
    ("partition (Table I)", "label parity shards: even labels on superior, odd on inferior", "same rule (parity_shards)"),
    ("partition (Table II)", "Dirichlet alpha 0.1 / 0.5 / 100", f"Dirichlet alpha {list(params.table2_alphas)}"),
    ("inferior bits", "4, 5, 6, 7, 8", str(list(params.bits_list))),
    ("quantizer", "layer-wise K-means (Table I), + uniform ASYM (Table II)", f"{list(params.quantizers)} (K-means init {params.kmeans_init}, <= {params.kmeans_iters} Lloyd iterations)"),
    ("FedProx mu / SCAFFOLD", "0.01 / code: c_i uses 1/(n_i E lr)", f"{params.fedprox_mu} / coef={params.scaffold_coef!r}"),
    ("Fed-EF", "adapted to weights (no details)", "FedAvg + error feedback on the quantized weights"),
    ("seeds", "3", str(len(params.seeds))),
], columns=["item", "paper", "this run"])
setup


# %% [markdown]
# ## The runs, as data
#
# Every run this notebook reads is a run spec (frozen, JSON: data, split, model, algorithm, uplink codec, local
# training, rounds, seed, and FedShift's own options) built from the parameters above by
# `fedlib.papers.fedshift.experiments`: Table I, Table II, the mechanism ablations, the K-means-setting grid and
# Theorem 1's runs. `run_specs` executes the ones not yet in the store (`results/runs/`, or `runs_root`): executing
# the notebook again recomputes nothing, an interrupted run resumes from its checkpoint, `runner="ray"` runs them
# as Ray tasks. Each run records per round the test accuracy of the (shifted) global model, FedShift's per-layer
# statistics (the inputs of Theorem 2), Fig. 9's divergences and, for FedShift runs, the accuracy of the aggregate
# before the shift; per client its upload's quantization error; and Fig. 8's prediction histogram.
#
# With `ledger` set, the runs come from that evidence ledger and none is computed: each table below shows the
# runs it holds and names those it lacks, a figure that needs runs the ledger lacks is not drawn, and the claims
# that read them read "not testable", naming them.

# %%
specs = fs.experiments(params)
print(f"{len(specs)} runs")
records = notebook_records(specs, params, progress=show_progress())
runs = fs.run_table(records)
curves_all, layer_record = fs.record_table(records, "rounds"), fs.record_table(records, "layers")
# every table the claims read (the Claims section), as the ledger's judge builds them: each section shows its own
evidence = bundle_from_runs(params, records, ds.num_classes)
first_parity = next(s for s in specs if s.split.name == "parity" and s.get("labels")["method"] != "theorem1")
counts = label_counts(build_run(first_parity, params.data_root).data.client_indices, ds.y_train.numpy(), ds.num_classes)
fig, ax = plt.subplots(figsize=(7, 4))
sns.heatmap(counts, cmap="Blues", ax=ax, cbar_kws={"label": "samples"})
ax.set_title("Parity-shard split (Fig. 6 analogue): odd client ids = inferior, odd labels")
plt.show()

# %% [markdown]
# ## Table III: payload sizes from the codecs (CNN2 on CIFAR-10 shapes)
#
# The codecs encode every layer of `build_model("fedshift_cnn2", (3, 32, 32), 10)` and count bits: N bits
# per weight, plus side information (uniform: min and max per layer; K-means: the 2^N-entry codebook per
# layer) at 32 bits per float. Table III prints the weight size as whole KiB.

# %%
# NBVAL_CHECK_OUTPUT
cnn2 = build_model("fedshift_cnn2", (3, 32, 32), 10, init="kaiming_normal_fan_in", seed=0)
layers = {k: v.detach().reshape(-1) for k, v in cnn2.named_parameters()}
print("CNN2 layers:", {k: v.numel() for k, v in layers.items()}, "total", sum(v.numel() for v in layers.values()))
rows, messages = [], {}
for bits, kind in [(4, "uniform"), (4, "kmeans"), (8, "uniform"), (8, "kmeans"), (32, "none")]:
    codec = Identity() if kind == "none" else weight_quantizer(kind, bits, **({"max_iter": params.kmeans_iters} if kind == "kmeans" else {}))
    msgs = {k: codec.encode(v) for k, v in layers.items()}
    messages[(bits, kind)] = (codec, msgs)
    payload = sum(m.payload_bits for m in msgs.values())
    side = sum(m.side_bits for m in msgs.values())
    rows.append({"bits": bits, "quantization": kind, "weight_KiB": int(payload / 8 / 1024),
                 "weight_KiB_exact": payload / 8 / 1024, "side_info_KiB": side / 8 / 1024})
table3 = th.PAPER_TABLE3.merge(pd.DataFrame(rows), on=["bits", "quantization"])
table3["weight_size_matches"] = table3["weight_KiB"] == table3["paper_weight_KB"]
print(table3[["bits", "quantization", "paper_weight_KB", "weight_KiB", "weight_KiB_exact", "weight_size_matches",
              "paper_aux_KB", "side_info_KiB"]].to_string(index=False))
print(f"efficiency threshold ratio r = (8.421 - 0.179) / 1.059 = {th.threshold_ratio():.2f}  (paper: 7.78)")

# %% [markdown]
# The weight sizes match exactly. The auxiliary sizes do not: the raw side information is 0.03 KiB (4
# layers × min/max) for uniform and 0.25 / 16 KiB (4 layers × 16 / 256 fp32 centroids) for K-means,
# against the paper's 0.25 / 6.19 / 88.82 KB. The paper does not say how it measured them (serialized
# objects, probably); they cannot be derived from the text. The computing overhead is machine-bound;
# here is ours (the paper: Apple M1 Pro, 10 / 179 / 10 / 2,172 ms).

# %%
timing = []
for (bits, kind), (codec, _) in messages.items():
    if kind == "none":
        continue
    t0 = time.perf_counter()
    for v in layers.values():
        codec.encode(v.reshape(-1))
    timing.append({"bits": bits, "quantization": kind, "measured_ms": 1000 * (time.perf_counter() - t0)})
th.PAPER_TABLE3[["bits", "quantization", "paper_overhead_ms"]].merge(pd.DataFrame(timing), on=["bits", "quantization"])

# %% [markdown]
# ## Quantizers (Figs. 2-3, Eqs. 5-6, Algorithm 1)
#
# Uniform ASYM puts 2^N levels evenly between a layer's min and max; K-means puts them where the weights
# are. On a trained-like bell-shaped layer K-means has far lower error, and — a property the paper does
# not state — **K-means keeps each layer's mean exactly** (each centroid is its cluster's mean), while
# uniform rounding shifts it. So under the paper's main (K-means) setting, quantization does not move the
# very statistic FedShift corrects; this matters for reading Tables I-II.

# %%
gen = torch.Generator().manual_seed(0)
samples = {
    "CNN2 conv2 (Kaiming)": layers["conv2.weight"],
    "heavy-tailed (t-like)": torch.randn(51200, generator=gen) / torch.rand(51200, generator=gen).sqrt() * 0.02,
}
qrows = []
for name, x in samples.items():
    for bits in range(1, 9):
        for kind in ("uniform", "kmeans"):
            codec = weight_quantizer(kind, bits, **({"max_iter": params.kmeans_iters} if kind == "kmeans" else {}))
            info = codec.encode(x).info
            qrows.append({"weights": name, "bits": bits, "quantizer": kind, "mse": info["mse"],
                          "abs_mean_bias": abs(info["mean_bias"]), "mean_abs_weight": float(x.abs().mean())})
qstudy = pd.DataFrame(qrows)
fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
sns.lineplot(qstudy, x="bits", y="mse", hue="quantizer", style="weights", marker="o", ax=axes[0])
axes[0].set_yscale("log")
axes[0].set_title("quantization MSE")
sns.lineplot(qstudy.assign(abs_mean_bias=qstudy.abs_mean_bias + 1e-12), x="bits", y="abs_mean_bias", hue="quantizer",
             style="weights", marker="o", ax=axes[1], legend=False)
axes[1].set_yscale("log")
axes[1].set_title("|mean(DeQ(Q(w))) - mean(w)| (K-means: float rounding)")
x = samples["CNN2 conv2 (Kaiming)"]
for kind, color in (("uniform", "C0"), ("kmeans", "C1")):
    codec = weight_quantizer(kind, 4)
    axes[2].hist(codec.decode(codec.encode(x)).numpy(), bins=120, alpha=0.55, color=color, label=f"{kind} 4-bit")
axes[2].hist(x.numpy(), bins=120, histtype="step", color="k", label="fp32")
axes[2].set_yscale("log")
axes[2].set_title("conv2 weights before/after 4-bit (Fig. 3 analogue)")
axes[2].legend()
plt.tight_layout()
plt.show()


# %% [markdown]
# ## Table I analogue: four algorithms × bit widths × with/without FedShift
#
# Our accuracy is the mean over the last 3 rounds of the post-shift global model (mean ± std over seeds).
# The paper's cells (CIFAR-10, 800 rounds, 3 seeds) are shown beside ours where the bit width matches.

# %%
grid = evidence.table1  # Table I's runs as the claims read them (fedlib/papers/fedshift/claims.py)
grid.to_csv(out_dir / "table1_runs.csv", index=False)
records.complete(fs.table1_specs(params), "Table I's missing cells")
if len(grid):
    t1 = fs.summarize(grid, ["quantizer", "algorithm", "bits", "shift"])
    t1 = t1.merge(th.PAPER_TABLE1.assign(quantizer="kmeans"), on=["quantizer", "algorithm", "bits", "shift"], how="left")
    display(fs.beside_paper(t1, ["quantizer", "algorithm"]))

# %%
gains = ShiftGains.of(grid)  # FedShift minus its baseline on the same seed (fedlib/papers/fedshift/claims.py)
if records.complete(fs.table1_specs(params), "FedShift's gains"):
    paper_gains = th.PAPER_TABLE1.pivot_table(index=["algorithm", "bits"], columns="shift", values="paper_acc")
    paper_gains = (paper_gains[True] - paper_gains[False]).unstack("bits")
    print("FedShift - baseline, points (ours; the 32 column is the shift-only ablation at full precision):")
    display(gains.by_bits.round(2))
    print("paper (Table I, K-means):")
    display(paper_gains.round(1))
    print(f"mean gain over {len(gains.quantized)} quantized (quantizer, algorithm, bits, seed) runs: {gains.mean:+.2f} ± "
          f"{gains.se:.2f} (SE); cells with a positive mean gain: {(gains.cells > 0).mean():.0%}")

# %% [markdown]
# ## Figure 7 analogue: training curves (SMA), baseline vs FedShift, with FedShift's pre-shift model

# %%
def smooth(r: pd.DataFrame, col: str) -> pd.Series:
    return r.groupby("run")[col].transform(lambda v: 100 * v.rolling(params.sma_window, min_periods=1).mean())


records.complete([s for s in fs.table1_specs(params) if s.get("labels")["bits"] < 32], "Figure 7's missing curves")
r = curves_all[curves_all["run"].isin(grid.loc[grid["bits"] < 32, "run"])].sort_values(["run", "round"])
if len(r):
    r = r.assign(cell=r["quantizer"] + " 32+" + r["bits"].astype(int).astype(str))
    curves = [r.assign(acc=smooth(r, "test_acc"), model=r["shift"].map(fs.MODEL_NAMES))]
    if r["shift"].any():  # FedShift's runs also record the aggregate's accuracy before the shift
        shifted = r[r["shift"]]
        curves.append(shifted.assign(acc=smooth(shifted, "pre_shift_acc"), model="FedShift, before shift"))
    g = sns.relplot(pd.concat(curves), x="round", y="acc", hue="model", row="method", col="cell", kind="line", height=2.2,
                    aspect=1.4, errorbar=None, facet_kws={"margin_titles": True})
    g.set_axis_labels("round", f"test acc % (SMA {params.sma_window})")
    plt.show()

# %% [markdown]
# ## Figure 8 analogue: predicted-label distribution
#
# The paper: without the shift, the mixed-precision global model over-predicts the labels of the
# quantized (inferior, odd-label) clients; with it, predictions are more uniform. We measure, for FedAvg at
# the lowest bit width (first quantizer), the share of test predictions falling in the inferior clients' (odd) classes
# (ideal 0.5) and the KL divergence of the prediction histogram from uniform.

# %%
low, ref = min(params.bits_list), figure_algorithm(params.algorithms)
fig_runs = figure_runs(grid, params)
hist = fs.figure_predictions(records, fig_runs)
lb_seeds, lb = evidence.label_bias_seeds, evidence.label_bias
records.complete(figure_specs(params), "Figure 8's missing bars")
if len(hist):
    display(lb)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.barplot(hist, x="label", y="fraction", hue="model", errorbar=None, ax=ax)
    ax.axhline(1 / ds.num_classes, color="k", ls=":")
    ax.set_title(f"{ref} {params.quantizers[0]} 32+{low}: predicted labels on the test set (odd labels = inferior clients)")
    plt.show()

# %% [markdown]
# ## Figure 9 analogue: layer-wise divergence, and Theorem 2 on every round
#
# Top: ‖w^t − w^{t−1}‖ per layer; bottom: mean over the selected clients of ‖w_k^t − w^{t−1}‖ — for the runs
# of Fig. 8, with and without the shift (two separate runs, as in Fig. 9).

# %%
div = fs.divergence_rows(records, fig_runs)  # per round, for the figure
div_summary = evidence.divergence
records.complete(figure_specs(params), "Figure 9's missing curves")
if len(div):
    g = sns.relplot(div, x="round", y="value", hue="model", row="what", col="layer", kind="line", height=2.6,
                    aspect=1.4, errorbar=None, facet_kws={"sharey": False, "margin_titles": True})
    plt.show()
    display(div_summary)

# %% [markdown]
# **Theorem 2** (appendix Eq. 30): for the same round's client updates, D_FA² − D_FS² =
# (IP/K)(((K+S)/K)(m^{t+1})² − 2 m^t m^{t+1}), with D_FA = ‖w^{t+1} − ŵ^t‖ (no shift), D_FS = ‖ŵ^{t+1} − ŵ^t‖,
# m^t the layer mean of the model the clients started from and m^{t+1} that of the aggregate. The main
# text's Eq. 12 prints the last term as −2m^t/(m^{t+1})². The FedShift hook records these quantities every
# round; we evaluate both forms on every (round, layer) of every FedShift run of this notebook.

# %%
shift_specs = [s for s in specs if s.get("labels")["shift"]]  # every FedShift run, Theorem 1's included
records.complete(shift_specs, "Theorem 2's checks of the missing FedShift runs")
shift_rounds = curves_all[curves_all["shift"].astype(bool)]
dfa2 = layer_record[(layer_record["key"] == "shift/dfa2") & layer_record["value"].notna()]
no_record = sorted(set(shift_rounds["run"]) - set(dfa2["run"]))
if no_record:  # a run that diverged before its first shift records no finite quantity
    print(f"{len(no_record)} FedShift run(s) recorded no finite Theorem 2 quantity (diverged): {no_record}")
checks = [th.check_theorem2(r, layer_record[layer_record["run"] == key]).assign(run=key)
          for key, r in shift_rounds.groupby("run") if key not in no_record]
t2 = pd.concat(checks, ignore_index=True) if checks else pd.DataFrame()
t2.to_csv(out_dir / "theorem2_checks.csv", index=False)
if len(t2):
    display(t2.groupby("layer")[["rel_err_corrected", "rel_err_printed"]].agg(["median", "max"]))
    display(t2.head(6)[["run", "round", "layer", "measured", "corrected", "printed", "rel_err_corrected",
                        "rel_err_printed"]])

# %%
# NBVAL_CHECK_OUTPUT
if len(t2):
    decidable = t2[t2["eq31_decidable"]]
    print(f"(round, layer) checks: {len(t2)}")
    print(f"corrected Eq. 30 holds (rel. error <= 1e-4) in all of them: {bool(t2['holds_corrected'].all())}")
    print(f"printed Eq. 12 holds in all of them: {bool(t2['holds_printed'].all())}")
    print(f"Eq. 31 predicts D_FS < D_FA exactly when observed (where the sign is above float noise): "
          f"{bool((decidable['eq31_predicts_shorter'] == decidable['observed_shorter']).all())}")

# %% [markdown]
# How large is the shift? Its length per layer is c·|m^{t+1}|·√P; we compare it with the length of the
# round's own update D_FA. A shift much shorter than the update cannot change training much.

# %%
if len(t2):
    print(f"printed Eq. 12 holds in {int(t2['holds_printed'].sum())} of {len(t2)} (round, layer); "
          f"Eq. 31 decidable in {len(decidable)}; the shift shortened the step (D_FS < D_FA) in "
          f"{decidable['observed_shorter'].mean():.0%} of those")
    t2["shift_over_update"] = t2["coef"] * t2["m_agg"].abs() * np.sqrt(t2["P"]) / np.sqrt(t2["dfa2"])
    display(t2.groupby("layer")["shift_over_update"].describe(percentiles=[0.5, 0.9])[["mean", "50%", "90%", "max"]])

# %% [markdown]
# ## Table II analogue: Dirichlet splits × quantizer × bit width (FedAvg)

# %%
grid2 = evidence.table2
grid2.to_csv(out_dir / "table2_runs.csv", index=False)
records.complete(fs.table2_specs(params), "Table II's missing cells")
if len(grid2):
    t2s = fs.summarize(grid2, ["quantizer", "alpha", "bits", "shift"]).merge(th.PAPER_TABLE2, how="left", on=["quantizer", "alpha", "bits", "shift"])
    display(fs.beside_paper(t2s, ["quantizer", "alpha"]))
    print("mean |upload mean bias| per quantizer (uniform shifts layer means, K-means does not):")
    display(grid2.groupby(["quantizer", "bits"])["upload_mean_bias"].mean().unstack("bits"))
elif not params.table2_alphas:
    print(f"Table II is not in this profile (table2_alphas = {list(params.table2_alphas)})")

# %% [markdown]
# ## Mechanism ablations (ours; not in the paper)
#
# * **Shift-only at full precision** (32+32 with the shift, the 32 column of the gain table above): if the
#   shift helps as much without any quantization, its gain comes from centring weights (a per-layer mean
#   shrinkage), not from correcting quantization — and with K-means there is no mean error to correct.
# * **One scalar mean for the whole model** instead of per layer.
# * **Random (non-stratified) selection**, where |𝕀_t| varies from round to round.

# %%
def pick(**labels) -> pd.Series:
    """Accuracy per seed of the runs with these labels."""
    return runs[np.logical_and.reduce([runs[k] == v for k, v in labels.items()])].set_index("seed")["acc"]


q0 = params.quantizers[0]
base = dict(method="fedavg", quantizer=q0, bits=low, split="parity", kmeans="converged" if q0 == "kmeans" else "-")
fp32 = dict(method="fedavg", quantizer="none", split="parity", scope="layer", selection="stratified")
variants = {f"FedAvg {q0} 32+{low} baseline": dict(base, shift=False, scope="layer", selection="stratified"),
            f"FedAvg {q0} 32+{low} FedShift (per layer)": dict(base, shift=True, scope="layer", selection="stratified"),
            f"FedAvg {q0} 32+{low} FedShift (whole-model mean)": dict(base, shift=True, scope="model", selection="stratified"),
            f"FedAvg {q0} 32+{low} random selection, baseline": dict(base, shift=False, scope="layer", selection="random"),
            f"FedAvg {q0} 32+{low} random selection, FedShift": dict(base, shift=True, scope="layer", selection="random"),
            "FedAvg 32+32 baseline": dict(fp32, shift=False), "FedAvg 32+32 shift only": dict(fp32, shift=True)}
ablation = pd.DataFrame({name: pick(**labels).agg(["mean", "std", "count"]) for name, labels in variants.items()}).T
records.complete(fs.ablation_specs(params) + [s for s in fs.table1_specs(params) if s.get("labels")["bits"] == 32],
                 "The ablations' missing runs")
if (ablation["count"] > 0).any():
    display(ablation[ablation["count"] > 0])  # the variants with runs

# %%
if records.complete([s for s in figure_specs(params) if s.get("labels")["shift"]], "The layer means' trajectory"):
    traj = layer_record[layer_record["run"].isin(fig_runs) & layer_record["shift"]
                        & (layer_record["key"] == "shift/m_agg")]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    sns.lineplot(traj.rename(columns={"value": "layer mean"}), x="round", y="layer mean", hue="layer", errorbar=None,
                 ax=ax)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_title(f"FedShift {ref} 32+{low}: per-layer mean of the aggregate before each shift")
    plt.show()

# %% [markdown]
# ## The authors' K-means: early-stopped, random start (issue 13 g)
#
# The reference code quantizes with `fast_pytorch_kmeans.KMeans(n_clusters=2**bits, max_iter=300)`: k points
# drawn with replacement as the start, an empty cluster's centroid set to 0, and a stop once one update moves
# the codebook by a summed squared distance ≤ 1e-4, an absolute tolerance. On weights of scale ~0.05 that
# stops after a few Lloyd iterations. `KMeansQuantizer(bits, **REFERENCE_CODE)` is that setting; ours runs
# Lloyd to convergence from quantile starts. The code also hard-codes 5 inferior clients in the shift
# coefficient (5/K); with the stratified 5 + 5 selection of the paper (and our `per_round_inferior` every round)
# that is the same coefficient as |𝕀_t|/K, so only the K-means setting can change the runs. First on CNN2's
# layers (Kaiming init, 5 random starts each), then in the round loop.

# %%
# NBVAL_CHECK_OUTPUT
fits = fs.kmeans_setting_study(layers, bits=4, starts=5)
print(fits.groupby("layer", sort=False).agg({"weights": "first", "weight sd": "first", "converged iters": "first",
                                             "reference iters": ["min", "max"], "MSE ratio": ["median", "max"],
                                             "not at nearest centroid": "max"}).round(3).to_string())
print(f"median MSE ratio over the {len(fits)} fits: {fits['MSE ratio'].median():.2f}")

# %% [markdown]
# In the round loop: every Table I method with 32+`kmeans_reference_bits` K-means uploads, converged vs reference,
# with and without the shift, paired by seed. Does the shift's gain (Table I's gap) depend on the setting? G1 tests
# the gain under the authors' setting, G2 whether the two settings' gains agree within 1 point (TOST). Both keep each
# layer's mean, so the early stop changes the quantization error, not the statistic the shift corrects.

# %%
ks = evidence.kmeans
km_gain = kmeans_gain(ks)  # the shift's gain per (method, seed), one column per K-means setting
records.complete(fs.kmeans_setting_specs(params), "The K-means-setting grid's missing cells")
if len(ks):
    display(ks.groupby(["method", "kmeans", "shift"])[["acc", "upload_mse", "lloyd_iters"]].mean().unstack("shift").round(4))
elif params.kmeans_reference_bits is None:
    print(f"the K-means-setting grid is off in this profile (kmeans_reference_bits = {params.kmeans_reference_bits})")
if km_gain.notna().to_numpy().any():  # a pair with and without the shift
    print("shift gain (points) per method and seed:")
    display(km_gain.round(2))

# %% [markdown]
# ## Theory
#
# ### Eqs. 9-11 (sympy, symbolic client weights)

# %%
# NBVAL_CHECK_OUTPUT
for K_, I_, P_ in [(4, 2, 3), (5, 2, 2)]:
    ident = th.eq9_eq10_identity(K_, I_, P_)
    print(f"K={K_}, I={I_}, P={P_}: Eq.9 - Eq.10 = {ident['eq9_minus_eq10']}, mean(w_hat) - (S/K) m = {ident['mean_minus_S_over_K_m']}")

# %% [markdown]
# ### Theorem 2: derivation, the printed form, condition (31)

# %%
# NBVAL_CHECK_OUTPUT
d2 = th.theorem2_derivation()
print("derived D_FA^2 - D_FS^2 =", d2["derived"])
print("derived - Eq. 30 (corrected) =", d2["derived_minus_corrected"])
print("derived - Eq. 12 (printed)   =", sp.factor(d2["derived_minus_printed"]))
print("Eq. 31: D_FS < D_FA  iff ", th.theorem2_condition(), "> 0;  threshold (K+S)/(2K) at I=S=K/2:",
      sp.Rational(3, 4))

# %% [markdown]
# ### Theorem 1: the bound in sympy, and where it turns negative
#
# With the theorem's β = 2/μ, the denominator D(τ) = (1+1/ε)βμ − (τ+γ)/ε − 1 changes sign at τ + γ = ε + 2;
# beyond it the "vanishes when M → 0" term tends to −εLB₂M/2 < 0, so the bound on 𝔼F − F* ≥ 0 goes negative.
# The appendix's Eq. 20 writes a different second denominator (a missing 1/(τ+γ)) with a different limit.

# %%
# NBVAL_CHECK_OUTPUT
f1 = th.theorem1_facts()
print("main text - proof's last step:", f1["main_minus_proof"])
print("D(tau) with beta = 2/mu:", f1["D_tau"], "; zero at tau =", f1["D_tau_zero_at_tau"])
print("tau -> oo limit of the M term, main text:", f1["limit_second_term_main"])
print("tau -> oo limit of the M term, appendix Eq. 20:", f1["limit_second_term_eq20"])

# %%
taus = np.linspace(1, 60, 400)
vals = dict(gamma=7.0, eps=20.0, beta=2.0, mu=1.0, L=1.0, B1=1.0, B2=1.0, M=0.01, Delta1=1.0)
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(taus, th.theorem1_bound(taus, *vals.values()))
ax.axvline(vals["eps"] + 2 - vals["gamma"], color="r", ls=":", label="tau + gamma = eps + 2")
ax.axhline(0, color="k", lw=0.8)
ax.set(ylim=(-5, 5), xlabel="tau")
ax.set_title("Theorem 1's right-hand side (mu = L = 1, eps = 20, gamma = 7, M = 0.01)")
ax.legend()
plt.show()

# %% [markdown]
# ### Theorem 1 with constants measured on a run (issue 13 f)
#
# The figure above uses assumed constants, so it illustrates and tests nothing. Here the theorem meets a run in
# its own setting: a strongly convex problem (bias-free softmax regression with L2 weight λ = `theorem1_lam` on
# digits, so μ ≥ λ), 10 clients on the parity split, full participation, E = `theorem1_local_steps` plain SGD
# steps per round with the theorem's step sizes η_τ = β/(τ+γ), β = 2/μ, γ = max(8L/μ, E) − 1 (μ = λ and L from the
# certified bound λ + λ_max(X_kᵀX_k/n_k)/2, so η_1 = 1/(4L)), fp32 uploads, with and without the shift (one
# whole-model mean, α = the inferior clients' share of the data). A probe hook measures every round:
# F(w^τ) − F* (F* and every F_k* by L-BFGS), the secant curvature ‖Δ∇F‖/‖Δw‖ along each round's step (L),
# Σ p_k σ_k² (exact mini-batch variance at batch size B), max_k 𝔼‖g_B‖² (G²), the aggregate's squared mean (M),
# Γ = F* − Σ p_k F_k* and Δ_1 = ‖w⁰ − w*‖². L, σ² and G² are the largest values seen on the run's global iterates,
# so they are estimates from below of the suprema the assumptions name. The bound is the main-text form,
# minimised over ε among the values where its denominator is positive (the theorem holds for every ε > 0).

# %%
# NBVAL_CHECK_OUTPUT
t1_rounds = curves_all[curves_all["method"] == "theorem1"]
t1_est, t1_checks = th.theorem1_report(t1_rounds, local_steps=params.theorem1_local_steps, mu_=params.theorem1_lam, num_params=640)
records.complete(fs.theorem1_specs(params), "Theorem 1's missing runs")
if len(t1_est):
    # mean_w_star is 0 up to the solver's float error (~1e-11, which varies with the machine's threads): shown as such
    print(t1_est.to_string(index=False, float_format=lambda v: f"{v:.3g}" if v == 0 or abs(v) >= 1e-9 else "<1e-9"))
elif not params.theorem1_rounds:
    print("theorem1_rounds = 0: no run")

# %%
if t1_checks:
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for (shift, seed), check in t1_checks.items():
        name = "FedShift" if shift else "FedAvg"
        ax.semilogy(check["tau"], check["measured_gap"], label=f"{name} measured, seed {seed}")
        ax.semilogy(check["tau"], check["bound"], ls="--", label=f"{name} Theorem 1 bound, seed {seed}")
    ax.set(xlabel="tau (local steps)", ylabel="F(w) - F*")
    ax.legend(fontsize=7)
    plt.show()

# %% [markdown]
# Reading it: with measured constants B₁β² (β = 2/μ) is large and the bound stays positive only for ε > τ + γ − 2,
# so it holds with room to spare (C9d; the smallest bound/gap ratio is above) and says little. mean(w*) = 0 here
# (softmax + L2: the class-summed weights vanish at the optimum); the quadratic below has mean(w*) ≠ 0 and stalls.

# %% [markdown]
# ### Where FedShift stalls: a quadratic with mean(w*) ≠ 0
#
# Clients F_k(w) = ½‖w − c_k‖² (P = 50, N = 10, all participate, α = I/K = 0.5, 5 local GD steps). The per-round
# shift pulls the iterate's mean to a fixed point m_fp = (1−α)(1−ρ)m*/(1−(1−α)ρ), ρ = (1−η)^E, so FedShift
# converges to a point with gap F − F* = P(m_fp − m*)²/2 > 0, and with decaying steps to the mean-constrained
# minimiser (gap P m*²/2). FedAvg converges to w*. "Vanishes when M → 0" really requires mean(w*) ≈ 0.

# %%
# NBVAL_CHECK_OUTPUT
P_q, m_star = 50, 0.264
centers = th.quadratic_problem(P_q, 10, m_star, 0)
qrows = []
for lr_q in (0.1, 0.02):
    sim = th.simulate_quadratic(centers, 3000, 5, lr_q, 0.5, shift=True)
    pred = th.quadratic_fixed_point(m_star, P_q, 5, lr_q, 0.5)
    qrows.append({"steps": f"constant lr {lr_q}", "predicted gap": pred["gap"], "simulated gap": sim["gap"].iloc[-1],
                  "FedAvg gap": th.simulate_quadratic(centers, 3000, 5, lr_q, 0.5, shift=False)["gap"].iloc[-1],
                  "constrained-minimiser gap": pred["constrained_gap"]})
dec = th.simulate_quadratic(centers, 4000, 5, lambda t: 2 / (5 * t + 10), 0.5, shift=True)
qrows.append({"steps": "lr 2/(5t+10)", "predicted gap": P_q * m_star**2 / 2, "simulated gap": dec["gap"].iloc[-1],
              "FedAvg gap": th.simulate_quadratic(centers, 4000, 5, lambda t: 2 / (5 * t + 10), 0.5, shift=False)["gap"].iloc[-1],
              "constrained-minimiser gap": P_q * m_star**2 / 2})
quad = pd.DataFrame(qrows)
shown = quad.assign(**{"FedAvg gap < 1e-9": quad["FedAvg gap"] < 1e-9}).drop(columns="FedAvg gap")
print(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))

# %%
fig, ax = plt.subplots(figsize=(7, 3.2))
for shift in (False, True):
    s = th.simulate_quadratic(centers, 300, 5, 0.1, 0.5, shift=shift)
    ax.semilogy(s["round"], s["gap"] + 1e-16, label="FedShift" if shift else "FedAvg")
ax.axhline(th.quadratic_fixed_point(m_star, P_q, 5, 0.1, 0.5)["gap"], color="r", ls=":", label="predicted plateau")
ax.set(xlabel="round", ylabel="F(w) - F*")
ax.legend()
plt.show()

# %% [markdown]
# ## Errata and decisions
#
# * **Eq. 12 typo** (main text): the last term −2m^t/(m^{t+1})² must be −2m^t m^{t+1} (appendix Eq. 30).
#   The printed form fails on every round of our runs; the corrected one holds to float precision.
# * **Theorem 1**: the appendix's Eq. 20 and the main text differ in the second denominator; with β = 2/μ
#   the bound is negative for τ + γ > ε + 2; the induction's contraction factor (1+1/ε)(1−η_τμ) exceeds 1
#   for small η_τ, so O(1/T) is not established. Convergence to w* also needs mean(w*) ≈ 0 per layer
#   (quadratic above). Lemma 1 writes w_k^* where w_k^τ is meant, drops a p_k, and ‖𝟏_P‖ = P should be ‖𝟏_P‖² = P.
# * **Algorithm 2**: line 4 ("select 𝕂 from C·N clients" → select K = C·N of the N clients), line 17
#   (w_k^t → w_k^{t+1}), line 21 (output ŵ^T).
# * **Table II**: α = 0.5 non-uniform Δ printed +2.9 (4-bit) and +0.1 (6-bit); the printed means give +1.9
#   and +3.1.
# * **Table III**: the auxiliary sizes (0.25 / 6.19 / 88.82 KB) are not derivable; we count raw side
#   information (min/max or codebook at 32 bits per float).
# * **Decisions** (paper silent): stratified selection and odd-id inferior clients (reference code);
#   uniform aggregation; per-tensor shift of every weight tensor (BN buffers never shifted); K-means =
#   exact 1-D Lloyd from quantile init (the code: early-stopped, random init, `REFERENCE_CODE`); Fed-EF = FedAvg with
#   error feedback on the quantized weights (server lr 1). SCAFFOLD's control variates use the reference
#   code's 1/(n_i E η) (`scaffold_coef="samples"`): the standard 1/(#steps η) ("steps") made SCAFFOLD with
#   momentum 0.9 diverge in our runs (the momentum inflates (x − y_i)/(#steps η) about 1/(1−0.9) = 10×).

# %% [markdown]
# ## Reading the results
#
# * The theory checks and Table III are exact and machine-independent.
# * The accuracy tables are small-scale analogues (digits, an MLP, few rounds): compare signs and trends,
#   not levels, with the paper. Seeds matter: each claim below states its rule (`criterion`) and what it
#   rests on (`evidence`); the gains (C3, C7, G1) are tested pair by pair (FedShift minus its baseline on the
#   same seed) above a floor of 0.5 points with a one-sided Wilcoxon signed-rank test, C4 counts a cell only
#   where the baseline alone does not already beat full precision, and Theorem 1 with assumed constants is
#   illustrative, not a test. The quick profile runs one seed, so every claim on runs reads "not testable" there.
# * Where the shift is a tiny fraction of a round's update ("how large is the shift"), FedShift and the baseline
#   follow almost the same trajectory. K-means uploads keep layer means (Table II's mean-bias table), so a gain
#   there cannot come from correcting a quantization bias of the mean; the 32+32 shift-only row tests mean shrinkage.

# %% [markdown]
# ## Claims
# `fedlib/papers/fedshift/claims.py` declares each claim: its paper value, the runs it reads (this profile's cells) and
# its rule. One judge (`fedlib.claims.judge`) checks every claim's runs first: a missing run or a NaN accuracy reads
# "not testable" and names the run, a diverged or at-chance run "not reproduced (diverged)", fewer than two seeds
# "not testable"; then the rule (from `fedlib.report`, stated in the `criterion` column) judges the tables above.

# %%
theory = Theory(threshold_ratio=th.threshold_ratio(), theorem2=t2, assumed=vals,
                bound_at_1e6=th.theorem1_bound(1e6, *vals.values()), limit=str(f1["limit_second_term_main"]),
                mean_star=m_star, quadratic=quad, theorem1_runs=t1_est, theorem1_checks=t1_checks,
                theorem2_missing=named_runs(records.lacking(shift_specs)),
                theorem1_missing=named_runs(records.lacking(fs.theorem1_specs(params))))
# the runs' tables (`evidence`) with what this notebook computed besides: the test labels, Table III, the theory
claims = fedshift_claims(replace(evidence, test_labels=ds.y_test.numpy(), table3=table3, theory=theory))
claims.save(out_dir)
print(f"total notebook run time: {time.perf_counter() - t_start:.0f} s")
claims_table = claims.table()
scorecard.show(claims_table, claims.errata_checks())  # errata checks counted apart
full_table(claims_table)
