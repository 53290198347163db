"""TACO and its baselines: formulas on hand-computed cases, the client/server alpha agreement, freeloaders."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedlib import FederatedData, LocalTraining, build_model, load_dataset, make_algorithm, run_federation
from fedlib.algorithms.fedacg import FedACG
from fedlib.algorithms.foolsgold import FoolsGold, foolsgold_weights, taco_paper_weights
from fedlib.algorithms.scaffold import Scaffold
from fedlib.algorithms.stem import Stem
from fedlib.algorithms.taco import Taco, TacoFedProx, TacoScaffold, output_model, tailored_alpha
from fedlib.core.contracts import ClientResult, LocalRun, RoundContext
from fedlib.papers.taco import Freeloaders, client_groups, detection_rates, offline_expulsion, plant_freeloaders
from fedlib.targets import NEVER, cost_to_target, rounds_to_target
from theory.quadratic import quadratic_federation

SQ5 = math.sqrt(5.0)
# Hand case: Delta_1 = (3, 0), Delta_2 = (0, 4), Delta_3 = (-1, 0). Norms 3, 4, 1 (sum 8); mean (2/3, 4/3),
# cos = 1/sqrt5, 2/sqrt5, negative. alpha = (1 - 3/8)/sqrt5, (1 - 4/8) 2/sqrt5, 0.
DELTAS = torch.tensor([[3.0, 0.0], [0.0, 4.0], [-1.0, 0.0]])
ALPHA = torch.tensor([0.625 / SQ5, 1.0 / SQ5, 0.0], dtype=torch.float64)


def _p(x) -> dict[str, torch.Tensor]:
    return {"w": torch.as_tensor(x, dtype=torch.float32)}


def _results(deltas: torch.Tensor, lr_sum: float = 0.5, clients=None) -> list[ClientResult]:
    clients = range(len(deltas)) if clients is None else clients
    return [ClientResult(client=c, n_samples=10, steps=5, update=_p(-d), loss=0.0, extras={"lr_sum": lr_sum})
            for c, d in zip(clients, deltas)]


def _ctx(round_: int = 0, client: int | None = None, n: int = 3) -> RoundContext:
    return RoundContext(round_, n, client)


def _started(algo, state, client: int, round_: int = 1, n: int = 3) -> dict:
    """A client state after start_client (what the correction reads)."""
    cs = algo.init_client_state(state.get("global_grad", {}))
    algo.start_client(cs, state, _ctx(round_, client, n))
    return cs


def _uniform(n: int) -> torch.Tensor:
    return torch.full((n,), 1.0 / n, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------- alpha
def test_alpha_hand_case():
    torch.testing.assert_close(tailored_alpha(DELTAS), ALPHA)


def test_alpha_properties():
    gen = torch.Generator().manual_seed(0)
    d = torch.randn(20, 7, generator=gen, dtype=torch.float64)
    a = tailored_alpha(d)
    norms = d.norm(dim=1)
    assert torch.all(a >= 0) and torch.all(a <= 1 - norms / norms.sum() + 1e-12)  # alpha = 1 is unreachable
    torch.testing.assert_close(tailored_alpha(3.7 * d), a)  # invariant to a common rescaling
    assert float(a.sum()) > 0  # some client has a positive cosine with the mean
    zero = tailored_alpha(torch.cat([d[:3], torch.zeros(1, 7, dtype=torch.float64)]))
    assert float(zero[-1]) == 0.0  # a zero upload (freeloader in round 0) gets alpha 0, not NaN
    with pytest.raises(ValueError, match="N x d"):
        tailored_alpha(torch.zeros(5))


# ---------------------------------------------------------------------------------------------- TACO round
def test_taco_aggregation_correction_and_output_by_hand():
    algo = Taco(gamma=0.5, output="z")
    params = _p([1.0, 1.0])
    state = algo.init_server_state(params, 3)
    cs = algo.init_client_state(params)
    algo.start_client(cs, state, _ctx(0, 0))
    assert algo.finish_client(params, _p(params["w"] - DELTAS[0]), cs, state, LocalRun(5, 0.5, 10, 1.0),
                              _ctx(0, 0)) == {"lr_sum": 0.5}
    new = algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx())
    a1, a2 = 0.625 / SQ5, 1.0 / SQ5
    moved = torch.tensor([3 * a1, 4 * a2], dtype=torch.float64) / (a1 + a2)  # sum_i p_i Delta_i, Eq. (9)
    torch.testing.assert_close(new["w"], (torch.tensor([1.0, 1.0], dtype=torch.float64) - moved).float())
    torch.testing.assert_close(state["global_grad"]["w"], (moved / 0.5).float())  # Delta_{t+1} = . / (K eta_l)
    # round 1: each client uses alpha_i^1 as the server computed it
    for i in range(3):
        assert algo.client_alpha(state, i) == pytest.approx(float(ALPHA[i]), abs=1e-6)
    corr = algo.correction(new, new, _started(algo, state, 1), state)  # gamma (1 - alpha_2) Delta_1
    torch.testing.assert_close(corr["w"], (0.5 * (1 - a2) * moved / 0.5).float())
    z = algo.eval_params(new, state)  # Eq. (15) with alpha_t = mean of (a1, a2, 0)
    torch.testing.assert_close(z["w"], new["w"] + (1 - (a1 + a2) / 3) * (new["w"] - params["w"]))
    torch.testing.assert_close(output_model(new, params, 1.0)["w"], new["w"])


def test_taco_round_zero_has_no_correction_and_gamma_one_over_k():
    algo = Taco()  # gamma = 1/K
    params = _p([0.0, 0.0])
    state = algo.init_server_state(params, 3)
    assert algo.client_alpha(state, 0) == pytest.approx(0.1)  # before its first upload: alpha0
    corr = algo.correction(params, params, _started(algo, state, 0, round_=0), state)
    assert torch.equal(corr["w"], torch.zeros(2))  # Delta_0 = 0 and K unknown (gamma 0)
    algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx())
    assert algo.gamma_value(state) == pytest.approx(1 / 5)


def test_taco_uniform_aggregation_and_uniform_correction():
    algo = Taco(gamma=0.4, aggregation="uniform", correction="uniform", uniform_alpha=0.25)
    params = _p([0.0, 0.0])
    state = algo.init_server_state(params, 3)
    new = algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx())
    torch.testing.assert_close(new["w"], -DELTAS.mean(0))
    corr = algo.correction(new, new, _started(algo, state, 0), state)
    torch.testing.assert_close(corr["w"], 0.4 * 0.75 * DELTAS.mean(0) / 0.5)


def test_taco_freeloader_expulsion_and_full_participation():
    algo = Taco(gamma=0.1, kappa=0.3, expel_after=2)  # alpha_2 = 0.447 >= 0.3, alpha_1 = 0.280 < 0.3
    params = _p([0.0, 0.0])
    state = algo.init_server_state(params, 3)
    for r in range(2):
        algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx(r))
    assert state["expelled"].tolist() == [False, True, False]
    assert state["flags"].tolist() == [0, 2, 0]
    assert state["expelled_round"] == {1: 1}
    # the expelled client's upload is ignored: alphas are recomputed over clients 0 and 2 only
    algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx(2))
    expected = tailored_alpha(DELTAS[[0, 2]])
    torch.testing.assert_close(state["alpha"][[0, 2]], expected)
    with pytest.raises(ValueError, match="full participation"):
        algo.aggregate(params, _results(DELTAS[:1]), _uniform(1), state, _ctx(3))


def test_taco_weights_from_the_previous_round():
    """weights="previous": round t's uploads are averaged with alpha_i^t (alpha0 in round 0: uniform), while
    alpha^{t+1} is still computed from them (for the next round's correction and weights)."""
    algo = Taco(gamma=0.0, weights="previous")
    params = _p([0.0, 0.0])
    state = algo.init_server_state(params, 3)
    new = algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx(0))
    torch.testing.assert_close(new["w"], -DELTAS.mean(0))
    torch.testing.assert_close(state["alpha"], ALPHA)
    again = algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx(1))  # weights ALPHA / sum ALPHA
    torch.testing.assert_close(again["w"], (-(ALPHA[:, None] * DELTAS.double()).sum(0) / ALPHA.sum()).float())
    assert algo.diagnostics(state)["zero_weight_clients"] == 1.0


@pytest.mark.parametrize("kwargs", [dict(gamma=-1.0), dict(weights="next"), dict(gamma="1/N"), dict(correction="both"),
                                    dict(aggregation="median"), dict(output="y"), dict(expel_after=0),
                                    dict(correction_units="epochs")])
def test_taco_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        Taco(**kwargs)


def test_correction_units_model_delta():
    algo = Taco(gamma=1.0, correction_units="model_delta", server_lr=0.5)
    params = _p([0.0, 0.0])
    state = algo.init_server_state(params, 3)
    new = algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx())
    torch.testing.assert_close(state["global_grad"]["w"], params["w"] - new["w"])


# ---------------------------------------------------------------------------------------------- Fig. 6 variants
def test_taco_fedprox_coefficients():
    params = _p([1.0, -2.0])
    p = _p([2.0, 0.0])
    for form, expected in (("literal", 0.1), ("factor", 0.3 * (1 - 0.1))):  # alpha0 = 0.1 before any upload
        algo = TacoFedProx(form=form, zeta=0.3)
        state = algo.init_server_state(params, 2)
        corr = algo.correction(p, params, _started(algo, state, 0, n=2), state)
        torch.testing.assert_close(corr["w"], expected * (p["w"] - params["w"]))


def test_scaffold_single_step_by_hand():
    c, c_i = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0])
    anchor, trained = _p([0.0, 0.0]), _p([-1.0, 2.0])
    for algo, coef in ((Scaffold(), 1.0), (TacoScaffold(form="fixed", coefficient=2.0), 2.0)):
        state = algo.init_server_state(anchor, 2)
        state["c"] = {"w": c.clone()}
        cs = {"c_i": {"w": c_i.clone()}}
        algo.start_client(cs, state, _ctx(0, 0, 2))
        torch.testing.assert_close(algo.correction(anchor, anchor, cs, state)["w"], coef * torch.tensor([0.5, 3.0]))
        extras = algo.finish_client(anchor, trained, cs, state, LocalRun(steps=5, lr_sum=0.5, n_samples=10, epochs=1.0),
                                    _ctx(0, 0, 2))
        # c_i+ = c_i - c + (x - y_i) / (K eta) = (0.5 - 1 + 2, -1 - 2 - 4)
        torch.testing.assert_close(cs["c_i"]["w"], torch.tensor([1.5, -7.0]))
        torch.testing.assert_close(extras["delta_c"]["w"], torch.tensor([1.0, -6.0]))


# ---------------------------------------------------------------------------------------------- FoolsGold
def test_foolsgold_taco_paper_weights_hand_case():
    torch.testing.assert_close(taco_paper_weights(DELTAS), torch.tensor([1 / SQ5, 2 / SQ5, 0.0], dtype=torch.float64))


def test_foolsgold_original_hand_case():
    phi = math.radians(50)
    c, s = math.cos(phi), math.sin(phi)
    hist = torch.tensor([[1.0, 0.0], [c, s], [0.0, 1.0]], dtype=torch.float64)
    # cs12 = c, cs13 = 0, cs23 = s (> c); v = (c, s, s). Pardon row 1: cs12 *= c/s. Rows 2, 3 unchanged.
    wv = torch.tensor([1 - c * c / s, 1 - s, 1 - s], dtype=torch.float64)
    wv = wv / wv.max()
    wv[0] = 0.99
    logit = (torch.log(wv / (1 - wv)) + 0.5).clamp(0, 1)
    torch.testing.assert_close(foolsgold_weights(hist), logit)
    assert 0 < float(logit[1]) < 1  # the hand case exercises the interior of the logit
    # identical sybils get weight 0, the honest client 1
    sybil = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(foolsgold_weights(sybil), torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))


def test_foolsgold_aggregate_uses_weights():
    algo = FoolsGold()
    params = _p([0.0, 0.0])
    state = algo.init_server_state(params, 3)
    new = algo.aggregate(params, _results(DELTAS), _uniform(3), state, _ctx())
    rho = torch.tensor([1 / SQ5, 2 / SQ5, 0.0])
    torch.testing.assert_close(new["w"], -(rho[:, None] * DELTAS).sum(0) / rho.sum())
    with pytest.raises(ValueError):
        FoolsGold(variant="paper")


# ---------------------------------------------------------------------------------------------- STEM
def test_stem_steps_by_hand():
    """Batch k's gradient is g_k(w) = h_k w + e_k; alpha = 0.2, lr 0.1 (hand numbers in the comments)."""
    algo = Stem(alpha=0.2)
    state = algo.init_server_state(_p([0.0]), 1)
    cs = algo.init_client_state(_p([0.0]))
    batches = [(1.0, 0.0), (2.0, 1.0)]

    def grad_at_for(k):
        hk, ek = batches[k]
        return lambda q: {"w": hk * q["w"] + ek}

    w0 = _p([1.0])
    algo.start_client(cs, state, _ctx(0, 0, 1))
    v0 = algo.local_direction(w0, grad_at_for(0)(w0), w0, cs, state, grad_at_for(0))
    torch.testing.assert_close(v0["w"], torch.tensor([1.0]))  # round 0, k = 0: v_0 = g_0(w_0)
    w1 = _p([0.9])  # w_0 - 0.1 v_0
    v1 = algo.local_direction(w1, grad_at_for(1)(w1), w0, cs, state, grad_at_for(1))
    torch.testing.assert_close(v1["w"], torch.tensor([1.2]))  # 2.8 + 0.8 (1 - 3)
    extras = algo.finish_client(w0, _p([0.78]), cs, state, LocalRun(2, 0.2, 10, 1.0), _ctx(0, 0, 1))
    torch.testing.assert_close(extras["v"]["w"], torch.tensor([1.2]))
    new = algo.aggregate(w0, [ClientResult(0, 10, 2, _p([-0.22]), 0.0, extras)], _uniform(1), state, _ctx())
    torch.testing.assert_close(new["w"], torch.tensor([0.78]))
    # round 1, k = 0 starts from v_bar = 1.2 and the client's last iterate 0.78: v = 3 + 0.8 (1.2 - (2*0.78 + 1))
    algo.start_client(cs, state, _ctx(1, 0, 1))
    v = algo.local_direction(w0, grad_at_for(1)(w0), w0, cs, state, grad_at_for(1))
    torch.testing.assert_close(v["w"], torch.tensor([3.0 + 0.8 * (1.2 - 2.56)]))


def test_stem_server_extra():
    for mode, expected in (("none", 0.78), ("eta_l", 0.78 - 0.1 * 1.2), ("literal", 0.78 - 1.2)):
        algo = Stem(server_extra=mode)
        state = algo.init_server_state(_p([0.0]), 1)
        extras = {"v": _p([1.2]), "lr": 0.1}
        new = algo.aggregate(_p([1.0]), [ClientResult(0, 10, 2, _p([-0.22]), 0.0, extras)], _uniform(1), state, _ctx())
        assert float(new["w"]) == pytest.approx(expected)


# ---------------------------------------------------------------------------------------------- FedACG
def test_fedacg_round_by_hand():
    algo = FedACG(beta=0.1, lam=0.5)
    theta = _p([1.0, 1.0])
    state = algo.init_server_state(theta, 2)
    state["m"] = _p([1.0, 1.0])
    sent = algo.broadcast(theta, state)
    torch.testing.assert_close(sent["w"], torch.tensor([1.5, 1.5]))  # theta + lam m
    p = _p([2.0, 0.5])
    torch.testing.assert_close(algo.correction(p, sent, {}, state)["w"], 0.2 * (p["w"] - sent["w"]))
    half = FedACG(beta=0.1, lam=0.5, prox_half=True)
    torch.testing.assert_close(half.correction(p, sent, {}, state)["w"], 0.1 * (p["w"] - sent["w"]))
    res = [ClientResult(0, 10, 5, _p([1.0, 0.0]), 0.0), ClientResult(1, 10, 5, _p([0.0, 2.0]), 0.0)]
    new = algo.aggregate(theta, res, _uniform(2), state, _ctx())
    torch.testing.assert_close(state["m"]["w"], torch.tensor([1.0, 1.5]))  # 0.5 m + mean update
    torch.testing.assert_close(new["w"], torch.tensor([2.0, 2.5]))  # = mean of the local models
    with pytest.raises(ValueError):
        FedACG(lam=1.0)


# ---------------------------------------------------------------------------------------------- glue
def test_client_groups_labels():
    labels = np.repeat(np.arange(10), 30)
    parts, groups = client_groups(labels, (7, 7, 6), (0.1, 0.2, 0.5), rng=0)
    held = [len(np.unique(labels[p])) for p in parts]
    assert sorted(zip(groups, held)) == sorted([("A", 1)] * 7 + [("B", 2)] * 7 + [("C", 5)] * 6)
    assert len(np.unique(np.concatenate(parts))) == len(labels)  # disjoint and covering (every class held)
    with pytest.raises(ValueError):
        client_groups(labels, (7, 7), (0.1, 0.2, 0.5))


def test_freeloader_behaviour_uploads_previous_global_update():
    fl = Freeloaders([1])
    gen = torch.Generator()
    w0, w1 = _p([1.0, 1.0]), _p([0.5, 2.0])
    assert torch.equal(fl(_ctx(0, 1), w0, _p([9.0, 9.0]), gen)["w"], w0["w"])  # round 0: delta 0
    assert torch.equal(fl(_ctx(0, 0), w0, _p([9.0, 9.0]), gen)["w"], torch.tensor([9.0, 9.0]))  # honest client
    up = fl(_ctx(1, 1), w1, _p([9.0, 9.0]), gen)
    torch.testing.assert_close(w1["w"] - up["w"], w0["w"] - w1["w"])  # Delta_i = w_{t-1} - w_t
    # a new run starts afresh: round 0 again means no previous global update, whatever ran before
    assert torch.equal(fl(_ctx(0, 1), w1, _p([9.0, 9.0]), gen)["w"], w1["w"])
    assert torch.equal(Freeloaders([0], "global_model")(_ctx(0, 0), w1, _p([9.0, 9.0]), gen)["w"], w1["w"])
    with pytest.raises(ValueError):
        Freeloaders([0], "lazy")


def test_detection_rates_and_offline_replay():
    d = detection_rates([1, 2, 5], freeloaders=[1, 2, 3], num_clients=10)
    assert (d.tpr, d.fpr, d.caught, d.misjudged) == (pytest.approx(2 / 3), pytest.approx(1 / 7), 2, 1)
    mask = torch.tensor([False, True, True, False, False, True, False, False, False, False])
    assert detection_rates(mask, [1, 2, 3], 10) == d
    hist = [torch.tensor([0.7, 0.2]), torch.tensor([0.5, 0.9]), torch.tensor([0.65, 0.95])]
    assert offline_expulsion(hist, kappa=0.6, expel_after=2).tolist() == [0, 1]
    assert offline_expulsion(hist, kappa=0.9, expel_after=2).tolist() == [1]
    assert offline_expulsion(torch.stack(hist).numpy(), kappa=0.6, expel_after=2).tolist() == [0, 1]  # rows = rounds


def test_freeloader_tables_per_seed():
    """Tables II and VIII per seed on hand cases: 3 clients, 3 rounds (round 1 left out of the means)."""
    import pandas as pd

    from fedlib.papers.taco import alpha_by_seed, live_detection, replayed_detection

    groups = {0: ["A", "B", "Freeloaders"], 1: ["Freeloaders", "A", "C"]}
    traces = {0: [[0.1] * 3, [0.2, 0.4, 0.9], [0.4, 0.6, 0.7]], 1: [[0.1] * 3, [0.8, 0.1, 0.5], [1.0, 0.3, 0.5]]}
    alphas = pd.DataFrame([{"seed": s, "round": r + 1, "client": c, "group": groups[s][c], "alpha": a}
                           for s, rounds in traces.items() for r, row in enumerate(rounds) for c, a in enumerate(row)])
    means = alpha_by_seed(alphas)
    assert list(means.columns) == ["A", "B", "C", "Freeloaders"] and list(means.index) == [0, 1]
    np.testing.assert_allclose(means.to_numpy(), [[0.3, 0.5, np.nan, 0.8], [0.2, np.nan, 0.5, 0.9]])
    replay = replayed_detection(alphas, [0.5, 0.6], {"T*0.5": 2}).set_index(["seed", "kappa"])
    # kappa 0.6: only the freeloaders reach it twice; kappa 0.5: seed 1's C client (0.5, 0.5) is expelled too
    assert replay["TPR_%"].tolist() == [100.0] * 4
    assert replay["FPR_%"].tolist() == [0.0, 0.0, 50.0, 0.0]
    assert set(replay["lambda"]) == {"T*0.5"}
    expelled = pd.DataFrame({"seed": [0] * 3 + [1] * 3, "client": [0, 1, 2] * 2,
                             "freeloader": [False, False, True, True, False, False],
                             "expelled": [False, True, True, False, False, False]})
    live = live_detection(expelled)
    assert live[["tpr", "fpr", "caught", "misjudged", "normal"]].values.tolist() == [[1.0, 0.5, 1, 1, 2],
                                                                                     [0.0, 0.0, 0, 0, 2]]


def test_quadratic_federation_is_exact():
    h = np.array([[1.0, 2.0], [0.5, 0.25]])
    b = np.array([[1.0, -1.0], [2.0, 0.0]])
    data, model_fn = quadratic_federation(h, b)
    w = torch.tensor([0.3, 0.7])
    x, y = data.dataset.x_train.double(), data.dataset.y_train.double()
    for i, idx in enumerate(data.client_indices):
        loss = 0.5 * ((x[idx] @ w.double() - y[idx]) ** 2).mean()
        assert float(loss) == pytest.approx(0.5 * float((h[i] * (w.numpy() - b[i]) ** 2).sum()), rel=1e-6)
    assert float(model_fn().weight.detach().abs().sum()) == 0.0


def test_planted_freeloaders_detected_in_a_run():
    """TPR/FPR measured on a real run: 10 digits clients, 3 uploading the previous global update."""
    ds = load_dataset("digits")
    parts, _ = client_groups(ds.y_train.numpy(), (4, 3, 3), rng=1)
    free = plant_freeloaders(10, 3, rng=2)
    res = run_federation(lambda: build_model("mlp", ds.input_shape, 10, hidden=(32,)), FederatedData(ds, parts),
                         make_algorithm("taco", gamma=0.1, kappa=0.6, expel_after=3), 12,
                         local=LocalTraining(lr=0.05, batch_size=32, epochs=None, steps=10),
                         client_behavior=Freeloaders(free), aggregation_weights="uniform", progress=False)
    det = detection_rates(res.server_state["expelled"], free, 10)
    assert det.tpr == 1.0 and det.fpr == 0.0
    alpha = torch.stack(res.server_state["alpha_history"])[1:]
    honest = np.setdiff1d(np.arange(10), free)
    assert float(alpha[:, free].mean()) > float(alpha[:, honest].mean())
    assert rounds_to_target(res.rounds, 2.0) == NEVER


def test_run_record_helpers():
    import pandas as pd

    from fedlib.engine.federation import RunResult
    from fedlib.papers.taco import alpha_frame, time_per_100_updates

    rounds = pd.DataFrame({"round": [1, 2, 3], "test_acc": [0.5, 0.8, 0.9], "train_s": [9.0, 2.0, 4.0]})
    clients = pd.DataFrame({"round": [1, 1, 2, 2, 3, 3], "client": [0, 1] * 3, "steps": [10] * 6})
    assert time_per_100_updates(rounds, clients) == pytest.approx(100 * 15.0 / 60)  # train_s per 100 of 60 steps
    with pytest.raises(ValueError, match="no local steps"):
        time_per_100_updates(rounds, clients.assign(steps=0))
    assert rounds_to_target(rounds, 0.8) == 2 and cost_to_target(rounds, 0.8, "train_s") == pytest.approx(11.0)
    state = {"alpha_history": [torch.tensor([0.1, 0.2]), torch.tensor([0.3, 0.9])]}
    res = RunResult(rounds=rounds, clients=clients, params={}, server_state=state)
    table = alpha_frame(res, np.array(["A", "B"]), freeloaders=[1])
    assert table.loc[(table["round"] == 2) & (table["client"] == 1), ["group", "alpha"]].values.tolist() == \
        [["Freeloaders", pytest.approx(0.9)]]
