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
# # TACO: tailored adaptive correction against over-correction — a reproduction companion
#
# **Paper.** W. Liu, Z. Zhan, C. Joe-Wong, E. Ngai, J. Duan, D. Guo, X. Chen, X. Zhang, *TACO: Tackling
# Over-correction in Federated Learning with Tailored Adaptive Correction* (arXiv, c. 2024–25).
#
# **The paper's claim.** Drift-correcting FL methods (FedProx, SCAFFOLD, STEM, FedACG) apply one correction
# strength to every client and *over-correct* under non-IID data, sometimes diverging. TACO gives each client
# its own coefficient α_i (Eq. 7: one minus its share of the update norms, times its clipped cosine with the
# mean update), corrects local steps by γ(1−α_i)·Δ_t (Eq. 8), aggregates with weights ∝ α_i (Eq. 9), expels
# clients whose α stays above κ (freeloaders, Eq. 10), and outputs z_T (Eq. 15). It reports the best final
# accuracy on six datasets (Table V), fewer rounds and less client time to target accuracy (Tables I, III,
# V, Fig. 4), α ordered by data diversity (Table II), perfect freeloader detection (Table VIII), an ablation
# (Table VI), 100-client scalability (Table VII), and a convergence theorem.
#
# **What this notebook reproduces**, every measured number computed here (paper numbers typed in, labelled):
# Table I (time per 100 local updates, on the paper's CNN), Table II (mean α per client group with 8 planted
# freeloaders), Tables III/V (per-round client time, final accuracy, rounds- and time-to-target), Table VI
# (ablation), Table VII (100 clients), Table VIII (κ × λ with TPR/FPR), Fig. 6 (α plugged into FedProx and
# SCAFFOLD), Fig. 7 (γ sensitivity), a digits run where a *uniform* correction over-corrects and diverges
# while TACO's tailored one does not, and the theory: exact over-correction boundaries on quadratics
# (sympy, checked against runs of the real code on both sides), Lemma 2 as printed vs corrected, and what
# Theorem 1 / Corollary 2 do and do not imply. Errata and a claims table close the notebook.
#
# **Profiles** (papermill `-f notebooks/profiles/taco/<name>.yaml`): `quick` (committed outputs; digits,
# 20 clients, K = 10, T = 15, 1 seed; ≈ 1 min on 2 CPU cores), `cpu` (`make reproduce`; 3 seeds, K = 20,
# T = 25, Dirichlet ablations, all seven algorithms at 100 clients; ≈ 4 min on a quiet machine), `full` (the
# paper's scale: FMNIST from local files, CNN, K = 100, T = 100; a GPU and GPU-hours, specs/taco.md 7.5).

# %% tags=["parameters"]
profile = "quick"
seeds = [0]
extra_seeds = [0]  # seeds for the ablation, scalability, Fig. 6 and gamma-sweep runs
dataset = "digits"
model = "mlp"
model_kwargs = {"hidden": [32]}
num_clients = 20
group_sizes = [7, 7, 6]
label_fractions = [0.1, 0.2, 0.5]
rounds = 15
local_steps = 10
batch_size = 32
lr = 0.05
target_acc = 0.75
margin_pts = 1.0  # accuracy differences below this many points count as ties in the verdicts
algorithms = ["FedAvg", "FedProx", "FoolsGold", "Scaffold", "STEM", "FedACG", "TACO"]
fedprox_zeta = 0.1
scaffold_alpha = 1.0
stem_alpha = 0.2
fedacg_beta = 0.001
fedacg_lambda = 0.85
foolsgold_variant = "taco_paper"
taco_gamma = "1/K"
taco_output = "w"  # evaluate TACO on w_t ("z": the output model z_t of Eq. 15); specs/taco.md A5
kappa = 0.6
lambda_frac = 0.2
n_freeloaders = 8
kappa_grid = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
lambda_fracs = [0.1, 0.2, 0.5]
ablation_partitions = ["groups"]
scal_clients = 100
scal_dirichlet = 0.5
scal_rounds = 10
scal_steps = 5
scal_algorithms = ["FedAvg", "Scaffold", "TACO"]
gamma_grid = [0.0, 0.01, 0.1, 1.0]
gamma_steps = [10]
overcorrection_gamma = 3.0
timing_dataset = "mnist5k"
timing_model = "taco_cnn"
timing_clients = 4
timing_rounds = 4
timing_repeats = 3
theory_rounds = 60
threads = 1
device = "cpu"  # "auto" uses a CUDA GPU when there is one
results_root = None

# %%
from fedlib.notebook_params import check_notebook_parameters

check_notebook_parameters("taco", globals())  # a mistyped -p / profile name stops here

# %%
import os
import time
import warnings

warnings.simplefilter("ignore")
os.environ.setdefault("TQDM_DISABLE", "1")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from fedlib import FederatedData, LocalTraining, build_model, load_dataset, make_algorithm, run_federation
from fedlib.data import dirichlet
from fedlib.federation import evaluate, resolve_device
from fedlib import report, targets
from fedlib.report import Claims, results_dir
from fedlib.papers.taco import (Freeloaders, alpha_table, client_groups, detection_rates, offline_expulsion,
                         plant_freeloaders, time_per_100_updates)
from theory import taco as th

sns.set_theme(style="whitegrid", context="notebook")
pd.set_option("display.precision", 4)
pd.set_option("display.max_colwidth", 160)
out_dir = results_dir("taco", results_root)
device = resolve_device(device)
t_start = time.perf_counter()
ds = load_dataset(dataset)
print(f"profile={profile}: {dataset} ({len(ds.y_train)} train / {len(ds.y_test)} test), {num_clients} clients, "
      f"K={local_steps} local steps, T={rounds} rounds, seeds {seeds}")

# %% [markdown]
# ## Setup
#
# | | paper (§V-A) | here |
# |---|---|---|
# | data, model | FMNIST/SVHN/CIFAR-10 CNN, CIFAR-100 ResNet18, adult MLP, Shakespeare LSTM | `dataset`, `model` (quick/cpu: digits, MLP 64–32–10) |
# | clients | 20, full participation (100 in Table VII) | `num_clients`, full participation (`scal_clients`) |
# | non-IID | "synthetic" groups A/B/C = 10%/20%/50% of labels; Dir(φ) | groups 7/7/6 (1/2/5 of 10 labels, random assignment); Dir(φ) |
# | local work | K = 100–1000 steps, batch 64, η_l = 0.01, η_g = Kη_l | `local_steps`, `batch_size`, `lr`; η_g = Kη_l (model averaging) |
# | TACO | γ = 1/K, κ = 0.6, λ = T/5, α⁰ = 0.1, output z_T | same (`taco_gamma`, `kappa`, `lambda_frac`); rounds evaluated on w_t, z_T reported (A5) |
# | baselines | FedProx ζ = 0.1, SCAFFOLD α = 1, STEM α = 0.2, FedACG β = 0.001, FoolsGold | same; FedACG λ = 0.85 (FedACG's default, TACO gives none) |
# | aggregation | 1/N or D_i/D (unstated) | uniform 1/N for every baseline (specs/taco.md A3) |
#
# FoolsGold is TACO's rendition (weights = clipped cosine with the mean update); `foolsgold_variant="original"`
# runs Fung et al.'s history/pardoning/logit rule. STEM uses two gradients of each mini-batch per step (the
# server averages both iterates and directions). FedACG broadcasts the look-ahead model θ + λm.

# %%
if not set(extra_seeds) <= set(seeds):
    raise ValueError(f"extra_seeds {extra_seeds} must be a subset of seeds {seeds} (Fig. 6 reuses the main runs)")


def build_split(n_clients: int, partition: str, seed: int):
    """(client indices, group name per client) for the groups split or a Dirichlet split."""
    labels = ds.y_train.numpy()
    if partition == "groups":
        sizes = np.round(np.array(group_sizes) * n_clients / sum(group_sizes)).astype(int)
        sizes[-1] = n_clients - sizes[:-1].sum()
        return client_groups(labels, sizes, label_fractions, rng=seed)
    if partition.startswith("dir"):
        parts = dirichlet(labels, n_clients, float(partition[3:]), seed, min_size=5)
        return parts, np.array(["-"] * n_clients)
    raise ValueError(f"unknown partition {partition!r}: use 'groups' or 'dir<phi>', e.g. 'dir0.5'")


def algo_spec(name: str):
    specs = {
        "FedAvg": ("fedavg", {}),
        "FedProx": ("fedprox", {"mu": fedprox_zeta}),
        "FoolsGold": ("foolsgold", {"variant": foolsgold_variant}),
        "Scaffold": ("scaffold", {}) if scaffold_alpha == 1.0 else
                    ("taco_scaffold", {"form": "fixed", "coefficient": scaffold_alpha}),
        "STEM": ("stem", {"alpha": stem_alpha}),
        "FedACG": ("fedacg", {"beta": fedacg_beta, "lam": fedacg_lambda}),
        "TACO": ("taco", {"gamma": taco_gamma, "kappa": kappa, "output": taco_output}),
    }
    if name not in specs:
        raise ValueError(f"unknown algorithm {name!r}; choose from {sorted(specs)}")
    key, kw = specs[name]
    return make_algorithm(key, **kw)


def model_fn(data=ds, name=None, kwargs=None):
    name, kwargs = name or model, model_kwargs if kwargs is None else kwargs
    return lambda: build_model(name, data.input_shape, data.num_classes, **kwargs)


def run(algorithm, parts, seed, *, steps=local_steps, T=rounds, data=ds, mfn=None, **kw):
    # one executor for every algorithm, so that wall-clock comparisons measure the algorithms, not the executors
    return run_federation(mfn or model_fn(data), FederatedData(data, parts), algorithm, T,
                          local=LocalTraining(lr=lr, batch_size=batch_size, epochs=None, steps=steps),
                          aggregation_weights="uniform", seed=seed, executor="sequential", threads=threads,
                          device=device, progress=False, **kw)


def diverged(res) -> bool:
    last = res.rounds["test_loss"].iloc[-1]
    return not np.isfinite(last) or last > 10 * res.rounds["test_loss"].iloc[0]


# %% [markdown]
# ## Runs: all seven algorithms on the three-group split (Tables III and V)

# %%
main_runs = {}
for seed in seeds:
    parts, groups = build_split(num_clients, "groups", seed)
    for name in algorithms:
        main_runs[(name, seed)] = run(algo_spec(name), parts, seed)
curves = pd.concat([r.rounds.assign(algorithm=n, seed=s) for (n, s), r in main_runs.items()], ignore_index=True)
print(f"{len(main_runs)} runs, {time.perf_counter() - t_start:.0f} s so far")

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
sns.lineplot(curves, x="round", y="test_acc", hue="algorithm", ax=ax[0])
ax[0].axhline(target_acc, ls=":", c="grey")
ax[0].set_title("test accuracy (Fig. 2a analogue)")
curves["cum_train_s"] = curves.groupby(["algorithm", "seed"])["train_s"].cumsum()
sns.lineplot(curves, x="cum_train_s", y="test_acc", hue="algorithm", ax=ax[1], legend=False)
ax[1].set_title("accuracy vs cumulative client time (Fig. 2c analogue)")
ax[1].set_xlabel("client training time (s)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Table V (round-to-accuracy) and Table III / Fig. 4 (client time), measured beside the paper's FMNIST column
#
# "rounds" is the first round reaching `target_acc` (`fedlib.targets`; inf: not reached in T rounds), shown as
# the median over seeds beside how many seeds reached it, so a seed that never arrives counts; "time" sums the
# round's client training time (sequential clients, so the *sum*, not the slowest client; on one CPU the
# two orderings agree). "×" in the paper = divergence. The paper's Table III column is its per-round client
# time for ResNet18 on CIFAR-100 (K = 200); only the overhead relative to FedAvg is comparable.

# %%
PAPER_V_FMNIST = {"FedAvg": (71.36, "85"), "FedProx": (67.14, "100+"), "FoolsGold": (73.09, "80"),
                  "Scaffold": (68.84, "100+"), "STEM": (72.97, "69"), "FedACG": (70.91, "92"), "TACO": (73.28, "59")}
PAPER_III = {"FedAvg": 4.50, "FedProx": 5.05, "Scaffold": 5.01, "FoolsGold": 4.50, "STEM": 6.48, "FedACG": 5.07,
             "TACO": 4.81}
rows = []
for (name, seed), r in main_runs.items():
    rows.append({"algorithm": name, "seed": seed, "final_acc": 100 * r.final_accuracy,
                 "rounds_to_target": targets.rounds_to_target(r.rounds, target_acc),
                 "time_to_target_s": targets.cost_to_target(r.rounds, target_acc, "train_s"),
                 "round_client_s": float(r.rounds["train_s"].iloc[1:].median()), "diverged": diverged(r)})
per_seed = pd.DataFrame(rows)
table5 = per_seed.groupby("algorithm", sort=False).agg(
    acc_mean=("final_acc", "mean"), acc_std=("final_acc", "std"), rounds_to_target=("rounds_to_target", "median"),
    seeds_reaching=("rounds_to_target", lambda v: f"{int(np.isfinite(v).sum())}/{len(v)}"),
    time_to_target_s=("time_to_target_s", "median"), round_client_s=("round_client_s", "mean"),
    diverged=("diverged", "any")).reindex(algorithms)
table5["round_time_vs_fedavg_%"] = 100 * (table5["round_client_s"] / table5.loc["FedAvg", "round_client_s"] - 1)
table5["paper_FMNIST_acc"] = [PAPER_V_FMNIST[a][0] for a in table5.index]
table5["paper_FMNIST_rounds(70%)"] = [PAPER_V_FMNIST[a][1] for a in table5.index]
table5["paper_III_round_s"] = [PAPER_III[a] for a in table5.index]
table5["paper_III_vs_fedavg_%"] = [100 * (PAPER_III[a] / 4.50 - 1) for a in table5.index]
table5.to_csv(out_dir / "table5_table3.csv")
taco_final = {}
for s_ in seeds:
    r, algo = main_runs[("TACO", s_)], algo_spec("TACO")
    for out_name in ("w", "z"):
        algo.output = out_name
        taco_final.setdefault(out_name, []).append(
            100 * evaluate(model_fn()(), algo.eval_params(r.params, r.server_state), {}, ds.x_test, ds.y_test)[0])
print(f"TACO final accuracy on w_T: {np.mean(taco_final['w']):.2f}, on the output model z_T (Eq. 15): "
      f"{np.mean(taco_final['z']):.2f} (per round the table uses {taco_output}_t)")
table5

# %% [markdown]
# ### Table I: computation time per 100 local updates, on the paper's CNN
#
# The paper times 100 local updates of its CNN (FMNIST: FedAvg 0.323 s; SVHN: 0.441 s). We time the same
# CNN (`taco_cnn`, NIID-Bench simple-cnn) on `timing_dataset` with each algorithm's real local step
# (`time_per_100_updates`: process CPU seconds — synchronised wall seconds on a GPU — of a short run per 100
# local updates, evaluation only at the end), repeated `timing_repeats` times in a rotating order, keeping the minimum (the CPU is shared; CPU time and
# the minimum are the least disturbed measurement). Expect ±10% noise at this size: only large gaps (STEM's
# second gradient) are resolved. Only ratios to FedAvg are comparable across hardware.

# %%
PAPER_I = {"FedAvg": (0.323, 0.441), "FoolsGold": (0.323, 0.441), "FedProx": (0.399, 0.511),
           "Scaffold": (0.348, 0.462), "STEM": (0.455, 0.543), "FedACG": (0.401, 0.513)}
tds = load_dataset(timing_dataset)
tparts, _ = client_groups(tds.y_train.numpy(), [timing_clients], [0.5], rng=0)
run(algo_spec("FedAvg"), tparts, 0, T=1, data=tds, mfn=model_fn(tds, timing_model, {}))  # process warm-up, discarded
timing = []
for rep_ in range(timing_repeats):
    for name in algorithms[rep_ % len(algorithms):] + algorithms[:rep_ % len(algorithms)]:  # rotate the order
        cost = time_per_100_updates(lambda: run(algo_spec(name), tparts, 0, T=timing_rounds, data=tds,
                                                mfn=model_fn(tds, timing_model, {}), eval_every=timing_rounds),
                                    clock="process" if device.type == "cpu" else "wall")
        timing.append({"algorithm": name, "s_per_100_updates": cost})
table1 = pd.DataFrame(timing).groupby("algorithm", sort=False).min()
table1["vs_fedavg_%"] = 100 * (table1["s_per_100_updates"] / table1.loc["FedAvg", "s_per_100_updates"] - 1)
table1["paper_FMNIST_s"] = [PAPER_I.get(a, (np.nan,))[0] for a in table1.index]
table1["paper_FMNIST_vs_fedavg_%"] = 100 * (table1["paper_FMNIST_s"] / 0.323 - 1)
table1.to_csv(out_dir / "table1.csv")
table1

# %% [markdown]
# ## Table II: mean α per client group, with 8 of 20 clients replaced by freeloaders
#
# Freeloaders upload the previous global update w_{t−1} − w_t (the paper's definition) and are drawn
# uniformly from all clients. This run keeps every client (no expulsion) so α is observed all along; the
# first round (α⁰ = 0.1, freeloaders upload 0) is dropped from the means.

# %%
PAPER_II = pd.DataFrame({"MNIST": ["0.23±0.02", "0.27±0.03", "0.41±0.02", "0.88±0.01"],
                         "FMNIST": ["0.18±0.09", "0.27±0.03", "0.37±0.01", "0.75±0.01"]},
                        index=["A", "B", "C", "Freeloaders"])
parts, groups = build_split(num_clients, "groups", seeds[0])
free = plant_freeloaders(num_clients, n_freeloaders, rng=seeds[0])
fl_run = run(algo_spec("TACO"), parts, seeds[0], client_behavior=Freeloaders(free))
alphas = alpha_table(fl_run, groups, free)
table2 = alphas[alphas["round"] > 1].groupby("group")["alpha"].agg(["mean", "std"]).reindex(PAPER_II.index)
table2 = table2.join(PAPER_II.add_prefix("paper_"))
table2.to_csv(out_dir / "table2.csv")
table2

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.5))
sns.lineplot(alphas, x="round", y="alpha", hue="group", hue_order=list(PAPER_II.index), ax=ax)
ax.axhline(kappa, ls=":", c="grey")
ax.set_title("α_i^t per group (8 freeloaders); dotted: κ")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Table VIII: freeloader detection, κ × λ (TPR / FPR)
#
# One live run with expulsion at the defaults (κ = 0.6, λ = T/5) gives the measured TPR/FPR; the grid
# replays Eq. (10) on the α traces of the no-expulsion run above (`offline_expulsion`). The replay is an
# approximation: in a live run an expulsion changes later α values. The live run checks it at the default.

# %%
PAPER_VIII = {0.4: ("100/25", "100/12.5", "100/0"), 0.5: ("100/6.25", "100/0", "100/0"),
              0.6: ("100/0",) * 3, 0.7: ("100/0",) * 3, 0.8: ("100/0",) * 3, 0.9: ("100/0", "100/0", "0/0"),
              1.0: ("0/0",) * 3}
lam_default = max(1, round(lambda_frac * rounds))
live = run(make_algorithm("taco", gamma=taco_gamma, kappa=kappa, expel_after=lam_default, output=taco_output),
           parts, seeds[0],
           client_behavior=Freeloaders(free))
live_det = detection_rates(live.server_state["expelled"], free, num_clients)
replay_det = detection_rates(offline_expulsion(fl_run.server_state["alpha_history"], kappa, lam_default), free,
                             num_clients)
print(f"live run (kappa={kappa}, lambda={lam_default}): TPR {live_det.tpr:.0%} ({live_det.caught}/{live_det.freeloaders}), "
      f"FPR {live_det.fpr:.0%} ({live_det.misjudged}/{live_det.normal}); replay: TPR {replay_det.tpr:.0%}, "
      f"FPR {replay_det.fpr:.0%}; expelled in rounds {sorted(live.server_state['expelled_round'].values())}")
grid = []
for kap in kappa_grid:
    for j, frac in enumerate(lambda_fracs):
        lam_ = max(1, round(frac * rounds))
        det = detection_rates(offline_expulsion(fl_run.server_state["alpha_history"], kap, lam_), free, num_clients)
        grid.append({"kappa": kap, "lambda": f"T*{frac}", "TPR_%": 100 * det.tpr, "FPR_%": 100 * det.fpr,
                     "paper_TPR/FPR_%": PAPER_VIII.get(kap, ("-",) * 3)[j] if j < 3 else "-"})
table8 = pd.DataFrame(grid)
table8.to_csv(out_dir / "table8.csv", index=False)
table8.pivot(index="kappa", columns="lambda", values=["TPR_%", "FPR_%", "paper_TPR/FPR_%"])

# %% [markdown]
# ## Table VI: ablation (tailored correction × tailored aggregation)
#
# Row assignment inferred (check marks are lost in the extraction, specs/taco.md 5.6): neither = FedAvg,
# both = TACO. "corr only" = Eq. (8) with uniform aggregation, "agg only" = plain local SGD with Eq. (9).
# Where "agg only" loses accuracy, the mechanism is the one the theory section
# isolates on quadratics: weights ∝ α_i give clients with a negative cosine weight 0 and move the fixed point.

# %%
PAPER_VI = {"neither": "89.98 / 92.93 / 78.42 / 78.88", "agg only": "91.30 / 93.20 / 79.76 / 83.34",
            "corr only": "95.16 / 95.91 / 83.52 / 83.69", "both": "95.22 / 96.10 / 83.64 / 83.80"}
variants = {"neither": dict(correction="none", aggregation="uniform"), "agg only": dict(correction="none"),
            "corr only": dict(aggregation="uniform"), "both": {}}
abl = []
for partition in ablation_partitions:
    for seed in extra_seeds:
        p_parts, _ = build_split(num_clients, partition, seed)
        for label, kw in variants.items():
            r = run(make_algorithm("taco", gamma=taco_gamma, output=taco_output, **kw), p_parts, seed)
            abl.append({"partition": partition, "seed": seed, "variant": label, "final_acc": 100 * r.final_accuracy})
table6 = pd.DataFrame(abl).pivot_table(index="variant", columns="partition", values="final_acc").reindex(list(variants))
table6["paper (FEMNIST .2/.5, adult .1/.5)"] = [PAPER_VI[v] for v in table6.index]
table6.to_csv(out_dir / "table6.csv")
table6

# %% [markdown]
# ## Table VII: scalability, 100 clients (Dirichlet split)

# %%
PAPER_VII = {"FedAvg": 88.14, "FedProx": 89.54, "FoolsGold": 89.66, "Scaffold": 92.26, "STEM": 86.56,
             "FedACG": 87.90, "TACO": 92.86}
scal = []
for seed in extra_seeds:
    s_parts, _ = build_split(scal_clients, f"dir{scal_dirichlet}", seed)
    for name in scal_algorithms:
        r = run(algo_spec(name), s_parts, seed, steps=scal_steps, T=scal_rounds)
        scal.append({"algorithm": name, "seed": seed, "final_acc": 100 * r.final_accuracy})
table7 = pd.DataFrame(scal).groupby("algorithm", sort=False)["final_acc"].agg(["mean", "std"])
table7["paper_FEMNIST_100clients"] = [PAPER_VII[a] for a in table7.index]
table7.to_csv(out_dir / "table7.csv")
table7

# %% [markdown]
# ## Fig. 6: tailored coefficients plugged into FedProx and SCAFFOLD
#
# The paper gives no formula; both readings of specs/taco.md A10 run: *literal* (ζ_i = α_i, SCAFFOLD
# coefficient α_i) and *factor* (ζ_i = ζ(1−α_i), coefficient 1−α_i).

# %%
plug = []
for seed in extra_seeds:
    parts, _ = build_split(num_clients, "groups", seed)
    for base, key in (("FedProx", "taco_fedprox"), ("Scaffold", "taco_scaffold")):
        plug.append({"method": base, "form": "original", "seed": seed,
                     "final_acc": 100 * main_runs[(base, seed)].final_accuracy})
        for form in ("literal", "factor"):
            kw = {"form": form, "zeta": fedprox_zeta} if key == "taco_fedprox" else {"form": form}
            plug.append({"method": base, "form": form, "seed": seed,
                         "final_acc": 100 * run(make_algorithm(key, **kw), parts, seed).final_accuracy})
fig6 = pd.DataFrame(plug).pivot_table(index="method", columns="form", values="final_acc")[["original", "literal", "factor"]]
fig6.to_csv(out_dir / "fig6.csv")
fig6

# %% [markdown]
# ## Fig. 7: sensitivity to γ (the paper: best near 1/K; too large fails)

# %%
sweep = []
for K in gamma_steps:
    for gamma in [*gamma_grid, 1.0 / K]:
        for seed in extra_seeds:
            parts, _ = build_split(num_clients, "groups", seed)
            r = run(make_algorithm("taco", gamma=gamma, output=taco_output), parts, seed, steps=K)
            sweep.append({"K": K, "gamma": gamma, "is_1/K": np.isclose(gamma, 1 / K), "seed": seed,
                          "final_acc": 100 * r.final_accuracy, "diverged": diverged(r)})
fig7 = pd.DataFrame(sweep).groupby(["K", "gamma"]).agg(final_acc=("final_acc", "mean"), diverged=("diverged", "any"),
                                                       is_1_over_K=("is_1/K", "first")).reset_index()
fig7.to_csv(out_dir / "fig7.csv", index=False)
fig, ax = plt.subplots(figsize=(6, 3.5))
sns.lineplot(fig7.assign(gamma_plot=fig7["gamma"].clip(lower=1e-3)), x="gamma_plot", y="final_acc", hue="K",
             marker="o", ax=ax)
ax.set_xscale("log")
ax.set_xlabel("γ (0 drawn at 1e-3)")
ax.set_title("final accuracy vs γ")
plt.tight_layout()
plt.show()
fig7

# %% [markdown]
# ## Over-correction on real data: a uniform correction diverges, TACO's tailored one does not
#
# Same γ for both: "uniform" gives every client the factor γ(1−0) = γ, "tailored" gives γ(1−α_i). With
# γ ≥ 1 the uniform factor makes the correction a heavy-ball momentum ≥ 1 (theory below: m ≥ 1), while
# TACO's α rises as updates align (α → 1 − 1/N when the correction dominates), shrinking its factor.

# %%
parts, _ = build_split(num_clients, "groups", seeds[0])
oc = {}
for label, kw in {"uniform γ(1-0)": dict(correction="uniform", uniform_alpha=0.0), "TACO γ(1-α_i)": {}}.items():
    oc[label] = run(make_algorithm("taco", gamma=overcorrection_gamma, output="w", **kw), parts, seeds[0])
oc_curves = pd.concat([r.rounds.assign(correction=k) for k, r in oc.items()], ignore_index=True)
fig, ax = plt.subplots(1, 2, figsize=(11, 3.5))
sns.lineplot(oc_curves, x="round", y="test_loss", hue="correction", ax=ax[0])
ax[0].set_yscale("log")
ax[0].set_title(f"test loss, γ = {overcorrection_gamma}")
sns.lineplot(oc_curves, x="round", y="alpha_mean", hue="correction", ax=ax[1], legend=False)
ax[1].set_title("mean α (uniform: computed, not used)")
plt.tight_layout()
plt.show()
oc_summary = pd.DataFrame({k: {"final_test_loss": r.rounds["test_loss"].iloc[-1], "final_acc": r.final_accuracy,
                               "diverged": diverged(r), "mean_alpha_last": r.rounds["alpha_mean"].iloc[-1]}
                           for k, r in oc.items()}).T
oc_summary

# %% [markdown]
# ## Theory (theory/taco.py)
#
# ### Exact over-correction conditions on quadratic clients
#
# Clients f_i(w) = ½(w − b_i)ᵀdiag(h_i)(w − b_i), full-batch local GD, η_g = Kη_l. With α held fixed, a TACO
# round is a linear map on (w, Δ); per coordinate its characteristic polynomial and Jury conditions are:

# %%
# NBVAL_CHECK_OUTPUT
poly = th.taco_characteristic_polynomial()
print("char. polynomial:", poly)
print("Jury (all > 0 for stability):", th.jury_conditions(poly))
sc = th.scaffold_homogeneous()
print("SCAFFOLD drift coefficient (equal curvature):", sc["expected"])
print("SCAFFOLD over-corrects for a >=", sc["threshold_a"], "-> small-step limit", sc["small_step_threshold"])

# %% [markdown]
# With P̄ = Σ_i p_i P_i, P_i = 1 − (1 − η_l h_i)^K, m = Σ_i p_i γ(1−α_i) r_i, r_i = P_i/(Kη_l h_i): stable iff
# m < 1 and 0 < P̄ < 2(1 + m). A uniform correction over-corrects at γ* = 1/((1−α) max_j Σ_i p_i r_ij);
# SCAFFOLD with coefficient a at a* = 2/r (≈ 2) — the paper's a = 1 is always stable on convex quadratics.
# Both are checked below against `run_federation` runs of the real TACO / SCAFFOLD code at 0.8× and 1.25×
# the predicted boundary, in two settings (K, η_l); "measured_rate" is the growth factor of |w_{t+1} − w_t|.

# %%
settings = [th.QuadraticSetting("N4 d4 K10 eta0.05", 4, 4, 10, 0.05, seed=0),
            th.QuadraticSetting("N4 d4 K5 eta0.1", 4, 4, 5, 0.1, seed=1)]
boundary = pd.concat([th.boundary_rows(s, m_, rounds=theory_rounds) for s in settings
                      for m_ in ("taco_uniform", "scaffold")], ignore_index=True)
boundary.to_csv(out_dir / "theory_boundaries.csv", index=False)
boundary

# %%
# NBVAL_CHECK_OUTPUT
print(boundary[["setting", "method", "factor", "predicted", "simulated", "agree"]].to_string(index=False))

# %%
h0, _ = settings[0].instance()
p0 = np.full(h0.shape[0], 1 / h0.shape[0])
g_star = th.taco_critical_gamma(h0, p0, 0.0, settings[0].K, settings[0].eta)
gammas = np.linspace(0.1, 2.0, 60) * g_star
rho = [th.taco_spectral_radius(h0, p0, np.full(4, g), settings[0].K, settings[0].eta) for g in gammas]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(gammas, rho, label="predicted ρ(M)")
sub = boundary[(boundary["setting"] == settings[0].name) & (boundary["method"] == "taco_uniform")]
ax.scatter(sub["coefficient"], sub["measured_rate"], c="red", zorder=3, label="measured rate (real code)")
ax.axhline(1, ls=":", c="grey")
ax.axvline(g_star, ls="--", c="grey")
ax.set_xlabel("γ (uniform α = 0)")
ax.set_ylabel("spectral radius / growth per round")
ax.legend()
ax.set_title("TACO over-correction boundary on a quadratic")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Where the runs settle: the correction never moves the fixed point, the α-weighting does
#
# A stable run on the quadratic stops at w_fp = Σ_i p_iP_ib_i / Σ_i p_iP_i (per coordinate), independent of
# the correction; with TACO's adaptive weights p_i ∝ α_i the weights can keep switching (a client with a
# negative cosine drops to weight 0), so the run may not settle at all. Runs of the real code:

# %%
fixed_points = th.fixed_point_rows(settings[0], rounds=2 * theory_rounds)
fixed_points.to_csv(out_dir / "theory_fixed_points.csv", index=False)
fixed_points

# %% [markdown]
# ### Lemma 2 as printed vs corrected
#
# With a constant factor β = γ(1−α) and uniform weights, Lemma 1 is heavy-ball momentum. The paper's
# z_t = w_t + β(w_t − w_{t−1}) does **not** give z_{t+1} = z_t − η_gΔ̃_t unless β = 0; the corrected
# z_t = w_t + β/(1−β)(w_t − w_{t−1}) gives z_{t+1} = z_t − η_gΔ̃_t/(1−β):

# %%
# NBVAL_CHECK_OUTPUT
lem = th.lemma2_printed_vs_corrected()
for k in ("claimed", "printed_z", "printed_gap", "corrected_z"):
    print(f"{k:>12}: {lem[k]}")

# %% [markdown]
# Checked on a run of the real TACO code (quadratic clients, β = 0.5); Δ̃_t is recomputed independently by
# replaying each client's local GD in numpy. Residuals are relative to |η_gΔ̃_t|.

# %%
lemma_runs = th.lemma_checks(settings[0], beta=0.5, rounds=10)
lemma_runs.describe().loc[["mean", "max"]]

# %% [markdown]
# ### What Theorem 1 and Corollary 2 do and do not imply
#
# Y_t (the "over-correction term") depends on the α_i only through Σ_i(1 − α_i): its gradient in every α_i is
# the same, so Corollary 2's allocation (1 − α_i) ∝ μ_i/c_i does not follow from minimising Y_t. It is the
# minimiser of Σ_i(1−α_i)²/(μ_i/c_i) at a fixed sum (the Cauchy–Schwarz equality case):

# %%
# NBVAL_CHECK_OUTPUT
yt = th.y_term(3)
print("dY/dalpha_i identical for all i:", yt["all_equal"], "->", yt["gradients"][0])
lag = th.corollary2_lagrange(3)
print("argmin sum x_i^2/q_i s.t. sum x_i = sigma:", lag["solution"], "proportional:", lag["proportional"])

# %%
th.theorem_scope()

# %% [markdown]
# ## Errata and reading decisions (specs/taco.md section 8)
#
# * **Lemma 2 is false unless α = 1** (shown above, symbolically and on runs); Theorem 1's bound is stated for
#   the printed z_t. The corrected auxiliary sequence uses β/(1−β) and an effective step η_g/(1−β).
# * **Corollary 2 does not follow** from Y_t (allocation-invariant); the proof also assumes uniform 1/N
#   aggregation (not Eq. 9), equal D_i, and uses E|ΣΔ|² ≤ (ΣE|Δ|)², invalid for random vectors.
# * **Algorithm 1 typos** (extra 1/N in FoolsGold's line 20, missing K in lines 22/23, STEM's line 21 mixing a
#   gradient into a model delta, circular FoolsGold ρ_i, FedACG starting from w_t): we implement the originals
#   (FedACG look-ahead; STEM `server_extra="none"`) and break FoolsGold's circularity with the mean update.
# * **Table I header** has six names for five columns: the first value column is FedAvg and FoolsGold together.
# * **Table VIII FPRs** are multiples of 1/16, impossible with 12 honest clients; we report raw counts.
# * **γ = 1/K** makes the whole-round correction about one local step along Δ_t (A7); `correction_units`
#   offers the model-delta reading. TACO's α is computed by each client from its own previous upload and
#   two published numbers (the contract does not pass client ids); it equals the server's α (tests).
# * **Evaluated model** (A5): the paper does not say whether reported accuracies are of w_t or z_t. TACO is
#   evaluated per round on `taco_output` (default w_t, as every baseline); the final accuracy of z_T is
#   printed beside Table V and enters the claims table.

# %% [markdown]
# ## Claims

# %%
# Verdicts come from the rules in fedlib.report (criterion and evidence columns); accuracy differences below
# margin_pts points count as ties. Claims on the main runs are void if a run they rest on diverged.
claims = Claims()
acc = table5["acc_mean"]
base = acc.drop("TACO")
main_note = f"{len(seeds)} seed(s) x {len(algorithms)} algorithms, main split, T = {rounds}"
c1 = [a for a in ("FedProx", "Scaffold") if a in acc and acc[a] < acc["FedAvg"] - margin_pts]
claims.add("C1 FedProx (ζ=0.1) and SCAFFOLD (α=1) underperform FedAvg (over-correction)",
           "FMNIST: FedProx 67.14, Scaffold 68.84 < FedAvg 71.36; both diverge on SVHN",
           f"FedProx {acc.get('FedProx', np.nan):.2f}, Scaffold {acc.get('Scaffold', np.nan):.2f}, FedAvg {acc['FedAvg']:.2f}",
           report.criterion_met(f"mean final accuracy over seeds of FedProx and of SCAFFOLD below FedAvg's by more than "
                                f"{margin_pts:g} points (partly: one of them)", len(c1) == 2, partly=bool(c1),
                                evidence=f"{main_note}; below: {', '.join(c1) or 'none'}"))
best_base = base.idxmax()
claims.add("C2 TACO has the best final accuracy (Table V)", "TACO best on 6/6 datasets (e.g. FMNIST 73.28)",
           f"TACO {acc['TACO']:.2f} vs best baseline {best_base} {base.max():.2f}, FedAvg {acc['FedAvg']:.2f}",
           report.criterion_met(f"TACO's mean final accuracy over seeds >= every baseline's (partly: above FedAvg's by "
                                f"more than {margin_pts:g} points)", acc["TACO"] >= base.max(),
                                partly=acc["TACO"] > acc["FedAvg"] + margin_pts, evidence=main_note)
           .unless_diverged(curves[curves["algorithm"] == "TACO"], by=["algorithm", "seed"], num_classes=ds.num_classes))
rt = per_seed.pivot(index="seed", columns="algorithm", values="rounds_to_target")
claims.add(f"C3 TACO reaches the target ({target_acc:.0%}) in fewer rounds than FedAvg",
           "FMNIST 59 vs 85 rounds (70%)",
           "per seed TACO " + ", ".join(f"{v:g}" for v in rt["TACO"]) + " vs FedAvg " + ", ".join(f"{v:g}" for v in rt["FedAvg"])
           + " rounds (inf: never)",
           report.reaches_sooner(rt["TACO"], rt["FedAvg"], names=("TACO", "FedAvg"),
                                 quantity=f"rounds to {target_acc:.0%}", evidence=f"seeds {list(rt.index)}, T = {rounds}")
           .unless_diverged(curves[curves["algorithm"].isin(["TACO", "FedAvg"])], by=["algorithm", "seed"],
                            num_classes=ds.num_classes))
ov = table1["vs_fedavg_%"]
stem_cost, taco_cost = ov.get("STEM", np.nan), ov.get("TACO", np.nan)
taco_cheap = taco_cost <= ov.reindex(["FedProx", "Scaffold", "FedACG"]).min()
claims.add("C4 client cost per local update: STEM highest, TACO small (Tables I/III)",
           "per round vs FedAvg: STEM +44.0%, FedProx +12.2%, TACO +6.9%",
           f"per 100 updates vs FedAvg: STEM {stem_cost:+.1f}%, TACO {taco_cost:+.1f}%, "
           f"FedProx {ov.get('FedProx', np.nan):+.1f}%",
           report.criterion_met("STEM's overhead over FedAvg the largest, TACO's below half of STEM's and no larger than "
                                "FedProx's, SCAFFOLD's and FedACG's (partly: all but the last)",
                                stem_cost == ov.max() and taco_cost < stem_cost / 2 and taco_cheap,
                                partly=stem_cost == ov.max() and taco_cost < stem_cost / 2,
                                evidence=f"{timing_repeats} timing repeats of 100 updates, {timing_model} on {timing_dataset}"))
order = table2["mean"]
claims.add("C5 mean α ordered A < B < C < freeloaders (Table II)", "MNIST 0.23 < 0.27 < 0.41 < 0.88",
           " < ".join(f"{g} {order[g]:.2f}" for g in order.index),
           report.criterion_met("mean α strictly ordered A < B < C < freeloaders (partly: freeloaders highest)",
                                order["A"] < order["B"] < order["C"] < order["Freeloaders"],
                                partly=order["Freeloaders"] == order.max()))
g = table8[table8["kappa"].isin([0.6, 0.7, 0.8])]
never = table8[table8["kappa"] == 1.0]
claims.add("C6 freeloader detection TPR 100% / FPR 0% at κ = 0.6–0.8; κ = 1 never detects (Table VIII)",
           "TPR 100%, FPR 0% for κ 0.6–0.8, every λ; κ=1.0: TPR 0",
           f"live (κ={kappa}, λ={lam_default}): TPR {live_det.tpr:.0%}, FPR {live_det.fpr:.0%}; replay κ 0.6–0.8: "
           f"TPR min {g['TPR_%'].min():.0f}%, FPR max {g['FPR_%'].max():.0f}%; κ=1: TPR max {never['TPR_%'].max():.0f}%",
           report.criterion_met("live run TPR 100% and FPR 0%, replays at κ 0.6–0.8 TPR 100% and FPR 0%, κ = 1 TPR 0 "
                                "(partly: the live run detects any freeloader)",
                                live_det.tpr == 1.0 and live_det.fpr == 0.0 and g["TPR_%"].min() == 100
                                and g["FPR_%"].max() == 0 and never["TPR_%"].max() == 0, partly=live_det.tpr > 0,
                                evidence=f"{n_freeloaders} planted freeloaders, κ grid {kappa_grid}, λ fractions {lambda_fracs}"))
abl_mean = table6.drop(columns=table6.columns[-1]).mean(axis=1)
gain_corr, gain_agg = abl_mean["corr only"] - abl_mean["neither"], abl_mean["agg only"] - abl_mean["neither"]
claims.add("C7 tailored correction contributes more than tailored aggregation (Table VI)",
           "FEMNIST Dir(0.2): corr +5.18, agg +1.32 points over neither",
           f"corr {gain_corr:+.2f}, agg {gain_agg:+.2f}, both {abl_mean['both'] - abl_mean['neither']:+.2f} points",
           report.criterion_met(f"mean gain over 'neither' of 'corr only' larger than of 'agg only' and larger than "
                                f"{margin_pts:g} points", gain_corr > gain_agg and gain_corr > margin_pts,
                                evidence=f"seeds {extra_seeds}, partitions {ablation_partitions}"))
best_gamma = fig7.loc[fig7.groupby("K")["final_acc"].idxmax()]
gamma_inv_k = bool(all(np.isclose(best_gamma["gamma"], 1 / best_gamma["K"])))
claims.add("C8 best γ ≈ 1/K; too large a γ fails (Fig. 7)", "γ* ≈ 1/K; large γ can fail to converge",
           "; ".join(f"K={int(r.K)}: best γ={r.gamma:.3g} ({r.final_acc:.1f}%)" for r in best_gamma.itertuples())
           + f"; any divergence: {bool(fig7['diverged'].any())}",
           report.criterion_met("the most accurate γ of the grid is 1/K for every K, and some γ diverges (final test "
                                "loss non-finite or > 10x the first; partly: one of the two)", gamma_inv_k and bool(fig7["diverged"].any()),
                                partly=gamma_inv_k or bool(fig7["diverged"].any()),
                                evidence=f"γ grid {gamma_grid} + 1/K, K in {gamma_steps}, seeds {extra_seeds}"))
gain6 = fig6[["literal", "factor"]].max(axis=1) - fig6["original"]
claims.add("C9 tailored α improves FedProx and SCAFFOLD (Fig. 6)", "gains on SVHN (FedProx), CIFAR-10 (Scaffold)",
           ", ".join(f"{m}: best form {gain6[m]:+.2f} points" for m in gain6.index),
           report.criterion_met(f"the better tailored form gains more than {margin_pts:g} points for both methods "
                                "(partly: for one)", bool((gain6 > margin_pts).all()), partly=bool((gain6 > margin_pts).any()),
                                evidence=f"seeds {extra_seeds}"))
t7 = table7["mean"]
claims.add("C2' TACO best with 100 clients (Table VII)", "FEMNIST: TACO 92.86 vs Scaffold 92.26, FedAvg 88.14",
           ", ".join(f"{a} {v:.2f}" for a, v in t7.items()),
           report.criterion_met(f"TACO the most accurate and above FedAvg by more than {margin_pts:g} points (partly: "
                                f"within {margin_pts:g} points of the best)",
                                t7.idxmax() == "TACO" and t7["TACO"] > t7.get("FedAvg", -np.inf) + margin_pts,
                                partly=t7["TACO"] >= t7.max() - margin_pts,
                                evidence=f"{scal_clients} clients, Dirichlet({scal_dirichlet}), T = {scal_rounds}, seeds {extra_seeds}"))
u, tc = oc_summary.iloc[0], oc_summary.iloc[1]
claims.add("Over-correction: a uniform correction diverges where the tailored one does not (Fig. 1 mechanism)",
           "uniform coefficients over-correct (illustration; SCAFFOLD/FedProx × on SVHN)",
           f"γ={overcorrection_gamma}: uniform diverged={bool(u['diverged'])} (loss {u['final_test_loss']:.3g}), "
           f"TACO diverged={bool(tc['diverged'])} (acc {tc['final_acc']:.3f}, mean α {tc['mean_alpha_last']:.2f})",
           report.criterion_met("the uniform-correction run diverges (final test loss non-finite or > 10x the first) and "
                                "the TACO run does not", bool(u["diverged"]) and not bool(tc["diverged"])))
agree = int(boundary["agree"].sum())
claims.add("Theory: exact over-correction boundary on quadratics (ours; the paper gives none)",
           "no explicit threshold in the paper", f"{agree}/{len(boundary)} runs on the "
           f"predicted side (2 settings × TACO-uniform, SCAFFOLD × both sides)",
           report.criterion_met("every run on the side of the boundary the formula predicts (partly: most runs)",
                                agree == len(boundary), partly=agree > len(boundary) / 2))
fp = fixed_points.set_index("method")
fixed_kept = fp.iloc[1]["prediction_error"] < 1e-4
alpha_moves = fp.iloc[3]["excess_loss"] > fp.iloc[0]["excess_loss"]
claims.add("Ours: the correction never moves the fixed point; tailored α-weighting does (quadratic)",
           "not in the paper (specs/taco.md 6.7 E1)",
           f"prediction error FedAvg {fp.iloc[0]['prediction_error']:.1e}, constant correction "
           f"{fp.iloc[1]['prediction_error']:.1e}; excess loss FedAvg {fp.iloc[0]['excess_loss']:.3g} vs TACO "
           f"{fp.iloc[3]['excess_loss']:.3g} (settled: {bool(fp.iloc[3]['settled'])})",
           report.criterion_met("constant correction lands on the predicted fixed point (error < 1e-4) and TACO's "
                                "excess loss exceeds FedAvg's (partly: one of the two)", fixed_kept and alpha_moves,
                                partly=fixed_kept or alpha_moves))
claims.add("Eq. 15: the output model z_T is at least as accurate as w_T", "Algorithm 2 outputs z_T (tables: w_t or z_t unstated)",
           f"final accuracy z_T {np.mean(taco_final['z']):.2f} vs w_T {np.mean(taco_final['w']):.2f}",
           report.criterion_met(f"mean final accuracy of z_T over seeds >= that of w_T - {margin_pts:g} points",
                                np.mean(taco_final["z"]) >= np.mean(taco_final["w"]) - margin_pts, evidence=f"seeds {seeds}"))
claims.add("Lemma 2: z_{t+1} = z_t − η_g Δ̃_t for z_t = w_t + (1−α_t)(w_t − w_{t−1})", "stated as exact",
           f"residual on runs: printed {lemma_runs['lemma2_printed_residual'].mean():.2f}, corrected z "
           f"{lemma_runs['lemma2_corrected_residual'].max():.1e} (relative)",
           report.criterion_met("the printed z_t satisfies the identity on some round of the runs (relative residual <= 0.1)",
                                lemma_runs["lemma2_printed_residual"].min() <= 0.1, evidence=f"{len(lemma_runs)} rounds"))
claims.add("Corollary 2: (1−α_i) ∝ μ_i/c_i minimises the over-correction term Y_t", "derived by Cauchy–Schwarz",
           f"dY/dα_i identical for all i: {yt['all_equal']} (Y depends only on Σ(1−α_i))",
           report.criterion_met("sympy: dY_t/dα_i differs between clients (otherwise no allocation of α minimises Y_t)",
                                not yt["all_equal"]))
claims_table = claims.table()
claims.save(out_dir)
print(f"total {time.perf_counter() - t_start:.0f} s")
claims_table
