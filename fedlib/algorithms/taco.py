"""TACO (Liu et al., "Tackling Over-correction in Federated Learning with Tailored Adaptive Correction").

Per round t (Algorithm 2 of the paper; docs/taco.md, "The algorithm as implemented"):
    client i:  w <- w - eta_l * (g + gamma * (1 - alpha_i^t) * Delta_t)      for K steps         (Eq. 8)
               uploads Delta_i^t = w_t - w_{i,K}^t                                               (Eq. 5)
    server:    alpha_i^{t+1} = (1 - |Delta_i| / sum_j |Delta_j|) * max(cos(Delta_i, mean_j Delta_j), 0)  (Eq. 7)
               Delta_{t+1} = sum_i alpha_i Delta_i / (K eta_l sum_i alpha_i)                             (Eq. 9)
               w_{t+1} = w_t - eta_g Delta_{t+1}
               a client with alpha_i >= kappa in `expel_after` rounds (cumulative) is expelled         (Eq. 10)
    output:    z_t = w_t + (1 - mean_i alpha_i^t) (w_t - w_{t-1})                                 (Eq. 15)
with eta_g = K eta_l by default (`server_lr=1`), so w_{t+1} is the alpha-weighted average of the local models.

The server computes alpha_i^{t+1} from the decoded uploads and sends each client its own (one scalar); a
client starts its round with the latest alpha the server holds for it (alpha0 before its first upload).
`start_client` stores the client's correction factor as a tensor in its state, so the batched executor
runs TACO like any other method. The paper runs full participation and so must `Taco` (the server raises
otherwise).

`TacoFedProx` and `TacoScaffold` plug the same alpha_i^t into FedProx's zeta and SCAFFOLD's coefficient
(the paper's Fig. 6; the formula is not given, so both readings of docs/taco.md A10 are offered).
`TacoScaffold(form="fixed", coefficient=a)` is SCAFFOLD with a uniform coefficient a (a = 1 is SCAFFOLD).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fedlib.algorithms.base import Algorithm, view_bits
from fedlib.algorithms.fedprox import FedProx
from fedlib.algorithms.scaffold import Scaffold
from fedlib.core import params as P
from fedlib.core.contracts import ClientResult, LocalRun, RoundContext
from fedlib.core.params import Params
from fedlib.registry import ALGORITHMS
from fedlib.validate import count, real


def _alpha(norm_i: torch.Tensor, dot_i: torch.Tensor, mean_norm: torch.Tensor, norm_sum: torch.Tensor) -> torch.Tensor:
    """Eq. (7) from the pieces: (1 - |D_i|/sum_j |D_j|) * max(cos(D_i, mean), 0), cos := 0 for a zero vector."""
    denom = norm_i * mean_norm
    cos = torch.where(denom > 0, dot_i / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.zeros_like(denom))
    share = torch.where(norm_sum > 0, norm_i / torch.where(norm_sum > 0, norm_sum, torch.ones_like(norm_sum)),
                        torch.zeros_like(norm_i))
    return (1.0 - share) * cos.clamp_min(0.0)


def tailored_alpha(deltas: torch.Tensor) -> torch.Tensor:
    """Eq. (7) for every client at once. `deltas` is N x d (rows: flattened model deltas w_t - w_{i,K})."""
    if deltas.dim() != 2 or deltas.shape[0] < 1:
        raise ValueError(f"deltas must be an N x d matrix with N >= 1, got shape {tuple(deltas.shape)}")
    deltas = deltas.double()
    norms = deltas.norm(dim=1)
    mean = deltas.mean(dim=0)
    return _alpha(norms, deltas @ mean, mean.norm(), norms.sum())


class TailoredAlpha:
    """Mixin: the server computes alpha_i^{t+1} (Eq. 7) from each round's uploads; each client reads its own.

    Server state: "alpha" (per client, initial `alpha0`, on the CPU) and "alpha_history" (one array per
    round). `client_alpha` is what client i uses in the coming round.
    """

    alpha0: float = 0.1

    def _init_alpha_state(self, state: dict[str, Any], params: Params, num_clients: int) -> dict[str, Any]:
        state.update(alpha=torch.full((num_clients,), float(self.alpha0), dtype=torch.float64), alpha_history=[])
        return state

    def client_view(self, server_state: dict[str, Any], ctx: RoundContext) -> dict[str, Any]:
        return {**super().client_view(server_state, ctx), "alpha": server_state["alpha"]}  # type: ignore[misc]

    def client_alpha(self, server_state: dict[str, Any], client: int) -> float:
        return float(server_state["alpha"][client])

    def _client_scalar(self, value: float, ctx: RoundContext) -> torch.Tensor:
        """A per-client factor as a 0-d tensor on the training device (stackable by the batched executor)."""
        return torch.tensor(value, dtype=torch.float32, device=ctx.device)

    def _update_alpha(self, results: Sequence[ClientResult], server_state: dict[str, Any]) -> torch.Tensor:
        """Eq. (7) over `results` (the clients still in the federation); stores and returns their alphas."""
        deltas = torch.stack([-P.flatten(r.update).double() for r in results])
        alpha = tailored_alpha(deltas).cpu()  # bookkeeping on the CPU, whatever device trains
        ids = torch.tensor([r.client for r in results])
        server_state["alpha"][ids] = alpha
        server_state["alpha_history"].append(server_state["alpha"].clone())
        return alpha


@ALGORITHMS.register("taco")
class Taco(TailoredAlpha, Algorithm):
    """TACO with every switch the paper's ablation and our over-correction study need.

    gamma: maximum correction factor (float, or "1/K" using the local step count of the previous round).
    correction: "tailored" (gamma (1 - alpha_i)), "uniform" (gamma (1 - uniform_alpha) for everyone), "none".
    aggregation: "tailored" (weights alpha_i / sum alpha, Eq. 9) or "uniform" (the round loop's weights).
    weights: which alpha the tailored aggregation of round t's uploads uses: "current" (alpha_i^{t+1}, computed
        from these uploads: Algorithm 2 lines 11-13 and Eq. 9 as printed) or "previous" (alpha_i^t, the
        coefficient each client corrected with this round, computed from round t-1's uploads; alpha0 in round 0).
    correction_units: "per_step" (Delta_t of Eq. 9, divided by K eta_l) or "model_delta" (w_{t-1} - w_t);
        docs/taco.md A7.
    kappa, expel_after: freeloader threshold (Eq. 10) and the count that expels (lambda; None = never expel).
    output: "z" evaluates z_t of Eq. (15) (the paper's output model), "w" evaluates w_t.
    server_lr: eta_g / (K eta_l) (the paper: 1).
    """

    name = "taco"

    def __init__(self, gamma: float | str = "1/K", kappa: float = 0.6, expel_after: int | None = None,
                 alpha0: float = 0.1, correction: str = "tailored", uniform_alpha: float = 0.0,
                 aggregation: str = "tailored", correction_units: str = "per_step", output: str = "z",
                 server_lr: float = 1.0, weights: str = "current") -> None:
        if isinstance(gamma, str):
            if gamma != "1/K":
                raise ValueError(f"gamma must be a number >= 0 or '1/K', got {gamma!r}")
        else:
            gamma = real("TACO gamma", gamma, low=0)
        for name, value, allowed in (("correction", correction, ("tailored", "uniform", "none")),
                                     ("aggregation", aggregation, ("tailored", "uniform")),
                                     ("correction_units", correction_units, ("per_step", "model_delta")),
                                     ("output", output, ("z", "w")), ("weights", weights, ("current", "previous"))):
            if value not in allowed:
                raise ValueError(f"TACO {name} must be one of {allowed}, got {value!r}")
        self.expel_after = None if expel_after is None else count("expel_after (a count, or None)", expel_after)
        self.alpha0 = real("alpha0", alpha0, low=0, high=1, high_inclusive=True)
        self.uniform_alpha = real("uniform_alpha", uniform_alpha, low=0, high=1, high_inclusive=True)
        server_lr = real("server_lr", server_lr, low=0, low_inclusive=False)
        self.gamma = gamma
        self.kappa = real("kappa", kappa)
        self.correction_mode = correction
        self.aggregation = aggregation
        self.correction_units = correction_units
        self.output = output
        self.server_lr = server_lr
        self.weights = weights

    # ---- state ---------------------------------------------------------------------------------
    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        state = {"global_grad": P.zeros_like(params), "prev": None, "steps": None, "weights": None,
                 "flags": torch.zeros(num_clients, dtype=torch.int64),
                 "expelled": torch.zeros(num_clients, dtype=torch.bool), "expelled_round": {}}
        return self._init_alpha_state(state, params, num_clients)

    def client_view(self, server_state: dict[str, Any], ctx: RoundContext) -> dict[str, Any]:
        return {**super().client_view(server_state, ctx), "global_grad": server_state["global_grad"],
                "steps": server_state["steps"]}

    def client_view_bits(self, view: dict[str, Any]) -> int:
        """The alphas and K are sent; Delta_t is not: under the paper's full participation every client
        received w_{t-1} and w_t and derives Delta_t from them (with the common local lr sum for
        "per_step" units), so only the scalars cost downlink bits."""
        return view_bits({k: v for k, v in view.items() if k != "global_grad"})

    def gamma_value(self, server_state: dict[str, Any]) -> float:
        if self.gamma != "1/K":
            return float(self.gamma)
        steps = server_state["steps"]
        return 0.0 if steps is None else 1.0 / steps  # round 0 has Delta_0 = 0, so gamma does not matter yet

    def correction_factor(self, server_state: dict[str, Any], client: int) -> float:
        """gamma (1 - alpha_i^t): the multiple of Delta_t added to every local gradient (Eq. 8)."""
        if self.correction_mode == "none":
            return 0.0
        alpha = self.uniform_alpha if self.correction_mode == "uniform" else self.client_alpha(server_state, client)
        return self.gamma_value(server_state) * (1.0 - alpha)

    # ---- client --------------------------------------------------------------------------------
    def start_client(self, client_state: dict[str, Any], server_state: dict[str, Any], ctx: RoundContext) -> None:
        assert ctx.client is not None
        client_state["factor"] = self._client_scalar(self.correction_factor(server_state, ctx.client), ctx)

    def correction(self, p: Params, anchor: Params, client_state: dict[str, Any],
                   server_state: dict[str, Any]) -> Params | None:
        if self.correction_mode == "none":
            return None
        return P.scale(server_state["global_grad"], client_state["factor"])

    def finish_client(self, anchor: Params, trained: Params, client_state: dict[str, Any],
                      server_state: dict[str, Any], run: LocalRun, ctx: RoundContext) -> dict[str, Any]:
        return {"lr_sum": run.lr_sum}

    # ---- server --------------------------------------------------------------------------------
    def aggregate(self, params: Params, results: Sequence[ClientResult], weights: torch.Tensor,
                  server_state: dict[str, Any], ctx: RoundContext) -> Params:
        expelled = server_state["expelled"]
        keep = [j for j, r in enumerate(results) if not expelled[r.client]]
        active = [results[j] for j in keep]
        if len(active) != int((~expelled).sum()):
            raise ValueError("TACO needs every non-expelled client every round (full participation, as in the "
                             f"paper); got {len(active)} of {int((~expelled).sum())}. Use sampler=1.0.")
        ids = torch.tensor([r.client for r in active])
        previous = server_state["alpha"][ids].clone()
        alpha = self._update_alpha(active, server_state)
        score = alpha if self.weights == "current" else previous
        if self.aggregation == "tailored" and float(score.sum()) > 0:
            p = score / score.sum()
        elif self.aggregation == "tailored":
            p = torch.full((len(active),), 1.0 / len(active), dtype=torch.float64)  # all alphas 0: uniform
        else:
            p = weights[keep].double() / weights[keep].double().sum()
        server_state["weights"] = p
        step = P.weighted_sum([r.update for r in active], p.tolist())
        new = P.add(params, step, alpha=self.server_lr)
        if self.correction_units == "per_step":
            server_state["global_grad"] = P.weighted_sum(
                [r.update for r in active], [-float(pi) / r.extras["lr_sum"] for pi, r in zip(p, active)])
        else:
            server_state["global_grad"] = P.sub(params, new)
        server_state["steps"] = sum(r.steps for r in active) / len(active)
        server_state["flags"][ids] += (alpha >= self.kappa).long()
        if self.expel_after is not None:
            newly = ids[server_state["flags"][ids] >= self.expel_after]
            for c in newly.tolist():
                server_state["expelled_round"][c] = ctx.round
            expelled[newly] = True
        server_state["prev"] = params
        return new

    def eval_params(self, params: Params, server_state: dict[str, Any]) -> Params:
        if self.output == "w" or server_state["prev"] is None:
            return params
        return output_model(params, server_state["prev"], self.mean_alpha(server_state))

    def mean_alpha(self, server_state: dict[str, Any]) -> float:
        """alpha_t of Eq. (14): the mean of the latest alpha_i over the clients still in the federation."""
        return float(server_state["alpha"][~server_state["expelled"]].mean())

    def diagnostics(self, server_state: dict[str, Any]) -> dict[str, float]:
        p = server_state["weights"]
        return {"alpha_mean": self.mean_alpha(server_state), "expelled": float(server_state["expelled"].sum()),
                "global_grad_norm": P.sq_norm(server_state["global_grad"]) ** 0.5,
                "weight_max": float(p.max()), "zero_weight_clients": float((p == 0).sum())}


def output_model(w: Params, w_prev: Params, mean_alpha: float) -> Params:
    """Eq. (15): z_t = w_t + (1 - alpha_t)(w_t - w_{t-1})."""
    return {k: w[k] + (1.0 - mean_alpha) * (w[k] - w_prev[k]) for k in w}


_FORMS = ("literal", "factor")


class TailoredPlugIn(TailoredAlpha):
    """Mixin for a base algorithm whose correction is scaled per client by `correction_scale` (Fig. 6):
    alpha bookkeeping on top of the base algorithm's own state, client uploads and aggregation."""

    def correction_scale(self, alpha: float) -> float:
        raise NotImplementedError

    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return self._init_alpha_state(super().init_server_state(params, num_clients), params, num_clients)  # type: ignore[misc]

    def start_client(self, client_state: dict[str, Any], server_state: dict[str, Any], ctx: RoundContext) -> None:
        assert ctx.client is not None
        scale = self.correction_scale(self.client_alpha(server_state, ctx.client))
        client_state["scale"] = self._client_scalar(scale, ctx)

    def correction(self, p: Params, anchor: Params, client_state: dict[str, Any],
                   server_state: dict[str, Any]) -> Params:
        base = super().correction(p, anchor, client_state, server_state)  # type: ignore[misc]
        return P.scale(base, client_state["scale"])

    def aggregate(self, params: Params, results: Sequence[ClientResult], weights: torch.Tensor,
                  server_state: dict[str, Any], ctx: RoundContext) -> Params:
        self._update_alpha(results, server_state)
        return super().aggregate(params, results, weights, server_state, ctx)  # type: ignore[misc]


@ALGORITHMS.register("taco_fedprox")
class TacoFedProx(TailoredPlugIn, FedProx):
    """FedProx with a per-client zeta_i^t from Eq. (7).

    "literal": zeta_i = alpha_i; "factor": zeta_i = zeta (1 - alpha_i).
    """

    name = "taco_fedprox"

    def __init__(self, form: str = "literal", zeta: float = 0.1, alpha0: float = 0.1) -> None:
        if form not in _FORMS:
            raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
        super().__init__(mu=1.0)  # unit proximal pull, scaled per client below
        self.form, self.zeta = form, real("zeta", zeta, low=0)
        self.alpha0 = real("alpha0", alpha0, low=0, high=1, high_inclusive=True)

    def correction_scale(self, alpha: float) -> float:
        return alpha if self.form == "literal" else self.zeta * (1.0 - alpha)


@ALGORITHMS.register("taco_scaffold")
class TacoScaffold(TailoredPlugIn, Scaffold):
    """SCAFFOLD whose correction c - c_i is scaled per client: "literal" alpha_i, "factor" (1 - alpha_i),
    or "fixed" a uniform `coefficient` (1.0 = plain SCAFFOLD; > 1 over-corrects, see theory/taco.py E2)."""

    name = "taco_scaffold"

    def __init__(self, form: str = "literal", coefficient: float = 1.0, alpha0: float = 0.1,
                 server_lr: float = 1.0) -> None:
        if form not in (*_FORMS, "fixed"):
            raise ValueError(f"form must be one of {(*_FORMS, 'fixed')}, got {form!r}")
        super().__init__(server_lr=server_lr)
        self.form, self.coefficient = form, real("coefficient", coefficient)
        self.alpha0 = real("alpha0", alpha0, low=0, high=1, high_inclusive=True)

    def correction_scale(self, alpha: float) -> float:
        if self.form == "fixed":
            return self.coefficient
        return alpha if self.form == "literal" else 1.0 - alpha
