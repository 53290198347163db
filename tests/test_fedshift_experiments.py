"""FedShift's runs as data: the grid `experiments(params)` builds, one tiny spec of each kind run through
`fedlib.runs.execute`, and the Theorem 1 probe's estimates against independent routes."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from fedlib.grids import notebook_parameters
from fedlib.papers import fedshift as fs
from fedlib.runs import Keys, RunSpec, RunStore, execute
from theory import fedshift as th

TINY = fs.FedShiftParams(seeds=[0, 1], algorithms=["fedavg", "fedef"], quantizers=["kmeans", "uniform"],
                         bits_list=[2, 4], table2_alphas=[0.5], table2_bits=[2], table2_quantizers=["uniform"],
                         num_clients=10, rounds=2, theorem1_rounds=2, theorem1_local_steps=2)


def test_grid_counts_labels_and_keys() -> None:
    specs = fs.experiments(TINY)
    n_seeds = 2
    table1 = 2 * 2 * 2 * 2 * n_seeds + 2 * n_seeds  # methods x quantizers x bits x shift x seeds + fp32 FedAvg
    table2 = 1 * 1 * 1 * 2 * n_seeds
    ablations = 3 * n_seeds  # whole-model mean + random selection x 2; the baseline pair is in Table I
    kmeans_grid = 2 * 1 * 2 * n_seeds  # methods x reference x shift (the converged ones are Table I's at 4 bits)
    theorem1 = 2  # with and without the shift, first seed
    assert len(specs) == table1 + table2 + ablations + kmeans_grid + theorem1
    assert len({s.key() for s in specs}) == len(specs)
    for spec in specs:
        assert RunSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
        labels = spec.get("labels")
        assert labels["method"] in (*fs.ALGORITHMS, "theorem1") and isinstance(labels["shift"], bool)
        if labels["method"] != "theorem1":
            assert set(labels) == set(fs.LABELS)
    reference = [s for s in specs if s.get("labels").get("kmeans") == "reference"]
    codec_args = [s.uplink.args["codec_args"] for s in reference]
    assert {a["tol"] for a in codec_args} == {1e-4} and {a["init"] for a in codec_args} == {"replacement"}
    fedef = [s for s in specs if s.get("labels")["method"] == "fedef"]
    assert all(s.algorithm.name == "fedavg" and s.uplink.args["error_feedback"] for s in fedef)


def test_switches_remove_their_grids() -> None:
    off = replace(TINY, ablations=False, kmeans_reference_bits=None, theorem1_rounds=0, table2_alphas=[])
    assert len(fs.experiments(off)) == 2 * 2 * 2 * 2 * 2 + 2 * 2


@pytest.mark.parametrize("profile", ["quick", "cpu", "gpu", "full"])
def test_every_profile_builds_its_grid(profile: str) -> None:
    """What scripts/reproduce.py --select does: the notebook's defaults + the profile, then experiments(params)."""
    specs = fs.experiments(notebook_parameters("fedshift", profile))
    assert specs and all(s.matches({"seed": [str(s.seed)]}) for s in specs)
    if profile == "gpu":
        table = [s for s in specs if s.get("labels")["method"] != "theorem1"]
        assert {s.dataset for s in table} == {"fashion_mnist"} and {s.model.name for s in table} == {"fedshift_cnn2"}
        assert len({s.seed for s in specs}) >= 3


def test_specs_run_and_give_the_columns_the_notebook_reads(tmp_path) -> None:
    specs = fs.experiments(TINY)
    store, keyed = RunStore(tmp_path), Keys()
    picked = [next(s for s in specs if s.get("labels")["kmeans"] == "reference" and s.get("labels")["shift"]),
              next(s for s in specs if s.get("labels")["split"] == "dirichlet" and not s.get("labels")["shift"])]
    records = {}
    for spec in picked:
        records[spec] = execute(keyed(spec), store)
    shifted = records[picked[0]]
    assert len(shifted["rounds"]) == 2 and shifted["rounds"]["pre_shift_acc"].notna().all()
    assert (shifted["rounds"]["shift/coef"] == 0.5).all()
    keys = shifted["layers"].groupby("key")["layer"].nunique()
    assert keys["div/global"] == keys["shift/dfa2"] == keys["lloyd_iters"] > 1  # every weight tensor, per layer
    assert np.isclose(shifted["predictions"]["fraction"].sum(), 1.0)
    from fedlib.runs import tidy

    table = fs.run_table(tidy([keyed(spec) for spec in picked], store))
    assert len(table) == 2 and table["acc"].between(0, 100).all() and table["bits"].dtype == int
    assert table.set_index("split").loc["parity", "lloyd_iters"] > 0


def test_theorem1_run_estimates(tmp_path) -> None:
    spec = next(s for s in fs.experiments(TINY) if s.get("labels")["method"] == "theorem1" and s.get("labels")["shift"])
    rounds = execute(Keys()(spec), RunStore(tmp_path))["rounds"]
    lam = TINY.theorem1_lam
    assert (rounds["t1/L"] <= rounds["t1/L_bound"]).all()  # a secant curvature never exceeds the certified L
    assert (rounds["t1/mu"] >= lam * (1 - 1e-9)).all()  # strong convexity: the L2 term alone gives lam
    assert abs(rounds["t1/mean_star"].iloc[0]) < 1e-8  # softmax + L2: the class-summed weights vanish at w*
    assert (rounds["t1/gap"] > 0).all() and (rounds["t1/Gamma"] >= -1e-9).all()
    consts = th.theorem1_constants(rounds, local_steps=TINY.theorem1_local_steps, mu_=lam, num_params=640)
    check = th.theorem1_against_run(rounds, consts)
    assert consts["alpha"] == pytest.approx(rounds["shift/coef"].max()) and np.isfinite(check["bound"]).all()
    assert check["tau"].tolist() == [3.0, 5.0]


def _objective(lam: float = 0.3):
    from fedlib import FederatedData, load_dataset
    from fedlib.models import build_model

    ds = load_dataset("digits")
    parts = fs.parity_shards(ds.y_train.numpy(), 10, 0)
    data = FederatedData(ds, parts)
    model = build_model("logistic", ds.input_shape, ds.num_classes, bias=False)
    return fs.RegularizedObjective(model, dict(model.named_parameters()), data, lam, torch.device("cpu")), data


def test_minibatch_variance_matches_monte_carlo() -> None:
    f, _ = _objective()
    w = torch.randn(640, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.1
    sigma2, g2 = f.minibatch_moments(w, 3, 16)
    x, y = f.clients[3]
    rng = np.random.default_rng(0)
    full = f.grad(w, 3)
    draws = []
    for _ in range(600):
        idx = torch.as_tensor(rng.choice(len(y), 16, replace=False))
        wr = w.clone().requires_grad_(True)
        out = torch.func.functional_call(f.model, f.unflatten(wr), (x[idx],))
        loss = torch.nn.functional.cross_entropy(out, y[idx]) + f.lam / 2 * (wr * wr).sum()
        draws.append(torch.autograd.grad(loss, wr)[0])
    dev = torch.stack(draws) - full
    sq = (dev ** 2).sum(1)
    mc, se = float(sq.mean()), float(sq.std()) / math.sqrt(len(sq))
    assert abs(mc - sigma2) < 4 * se  # Monte Carlo: within 4 standard errors
    assert g2 == pytest.approx(float((full ** 2).sum()) + sigma2, rel=1e-9)


def test_smoothness_bound_against_the_hessian_and_step_sizes() -> None:
    f, data = _objective()
    w = torch.zeros(640, dtype=torch.float64)
    top = max(float(torch.linalg.eigvalsh(torch.autograd.functional.hessian(lambda v: f.client_loss(v, k), w))[-1])
              for k in range(len(f.clients)))
    bound = fs.smoothness_bound(data, 0.3)
    assert top <= bound and top > 0.3  # w = 0: uniform softmax, the Hessian is (I - 11^T/C)/C (x) E[xx^T] + lam I
    lr, beta, gamma = fs.theorem1_step_sizes(L=2.0, mu=0.5, local_steps=5)
    assert (beta, gamma) == (4.0, 31.0) and lr(0, 0) == pytest.approx(1 / (4 * 2.0)) and lr(1, 2) == pytest.approx(4 / (8 + 31))


def test_label_bias_and_beside_paper_hand_cases() -> None:
    import pandas as pd

    # a run predicting only odd labels 1 and 3, half each: share 1, KL to uniform over 10 classes = log 5
    pred = pd.DataFrame({"shift": False, "seed": 0, "label": range(10), "fraction": [0, .5, 0, .5, 0, 0, 0, 0, 0, 0]})
    row = fs.label_bias(pred, 10).iloc[0]
    assert row["share_inferior_classes"] == 1.0 and row["kl_to_uniform"] == pytest.approx(math.log(5))
    summary = pd.DataFrame({"algorithm": ["fedavg"] * 2, "bits": [4, 4], "shift": [False, True], "mean": [60.0, 62.5],
                            "std": [1.0, float("nan")], "n": [3, 1], "paper_acc": [59.7, 62.5]})
    table = fs.beside_paper(summary, ["algorithm"])
    assert table.loc["fedavg", ("ours", "32+4 base")] == "60.0±1.0" and table.loc["fedavg", ("ours", "32+4 shift")] == "62.5"
    assert table.loc["fedavg", ("paper", "32+4 base")] == 59.7
