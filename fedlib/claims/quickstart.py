"""The quickstart's two claims: SCAFFOLD vs FedAvg and FedProx vs FedAvg, paired by seed."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fedlib import report
from fedlib.report import Claims


def claims(record: pd.DataFrame, params: Mapping[str, Any], num_classes: int) -> Claims:
    """Judge both claims on the final round of `record` (one row per algorithm, seed and round)."""
    last = record[record["round"] == params["rounds"]]
    # Paired by seed: each method's final accuracy minus FedAvg's on the same split, sampling and init.
    final = last.pivot(index="seed", columns="algorithm", values="test_acc")
    evidence = f"{len(final)} seed(s), final round {params['rounds']}"
    table = Claims()
    for name, statement, paper, rule in (
        ("SCAFFOLD", "SCAFFOLD is at least as accurate as FedAvg under label skew (Karimireddy et al. 2020)",
         "SCAFFOLD > FedAvg", lambda gap: report.paired_gain(gap, threshold=-0.01, test="t", evidence=evidence)),
        ("FedProx", f"FedProx with small mu (={params['mu']}) stays close to FedAvg (Li et al. 2020)", "|gap| small",
         lambda gap: report.paired_equivalence(gap, margin=0.02, evidence=evidence)),
    ):
        gap = final[name] - final["FedAvg"]
        judgement = rule(gap).unless_diverged(record[record["algorithm"].isin([name, "FedAvg"])],
                                              by=["algorithm", "seed"], num_classes=num_classes)
        table.add(statement, paper, f"{final[name].mean():.3f} vs {final['FedAvg'].mean():.3f} ({gap.mean():+.3f})",
                  judgement)
    return table
