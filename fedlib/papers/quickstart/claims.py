"""The quickstart's two claims, SCAFFOLD vs FedAvg and FedProx vs FedAvg, each paired by seed on final accuracy."""
from __future__ import annotations

import pandas as pd

from fedlib.claims.judge import Contrast, judge
from fedlib.notebook_params import NOTEBOOKS
from fedlib.paper import Paper, declare
from fedlib.paper.bundle import Bundle
from fedlib.paper.claim import Claim
from fedlib.paper.scale import Scale
from fedlib.papers.quickstart import HEADLINE_RUNS, QuickstartParams, experiments
from fedlib.report import Claims
from fedlib.runs.store import Records

PAPER_SCALE = None  # textbook claims about the algorithms, made in no single setting


def scale(p: QuickstartParams) -> Scale:
    return Scale(p.dataset, p.model, p.clients_per_round, p.rounds, len(p.seeds))


CLAIMS = (
    # a non-inferiority reading of the paper's "SCAFFOLD > FedAvg": its words say so
    Claim("Q1", "SCAFFOLD is non-inferior to FedAvg under label skew: no more than 1 point less accurate "
                "(Karimireddy et al. 2020: more accurate)",
          "SCAFFOLD > FedAvg (tested: SCAFFOLD - FedAvg > -0.01)",
          Contrast({"algorithm": "SCAFFOLD"}, {"algorithm": "FedAvg"}, "gain", floor=-0.01)),
    Claim("Q2", lambda p: f"FedProx with small mu (={p.mu}) stays close to FedAvg (Li et al. 2020)", "|gap| small",
          Contrast({"algorithm": "FedProx"}, {"algorithm": "FedAvg"}, "equivalent", margin=0.02)),
)


def bundle(record: pd.DataFrame, params: QuickstartParams, num_classes: int) -> Bundle:
    """The evidence: `record` (one row per algorithm, seed and round) as the one run table."""
    return Bundle(params, {"runs": record}, num_classes)


def bundle_from_runs(params: QuickstartParams, records: Records, num_classes: int) -> Bundle:
    """The same evidence from the run records alone (`fedlib.claims.ledger_verdicts`): the notebook derives nothing
    else."""
    return bundle(records["rounds"], params, num_classes)


def claims(evidence: Bundle) -> Claims:
    """Both claims judged."""
    return judge(CLAIMS, evidence)


PAPER = declare(Paper(
    name="quickstart", notebooks=NOTEBOOKS, params=QuickstartParams, experiments=experiments, headlines=HEADLINE_RUNS,
    claims=CLAIMS, judge=claims, bundle_from_runs=bundle_from_runs, on_profile=None, scale=scale,
    paper_scale=PAPER_SCALE, noise_rules={}, notes=None, theory=None))
