#!/usr/bin/env python3
"""Checks whether a non-linear model of the graph lane's features ranks better than the current
weights (fit.py's `STATED`) on projects it was not fitted on.

`fit.py` fits a logistic model (a weighted sum, like the current weights). This script fits a
gradient-boosted tree model, which can use interactions and thresholds a weighted sum cannot,
leaving one project of the trace out at a time, and compares Recall@10 of the graph lane's
candidate ranking on the project left out: current weights against the model.

    python3 -m venv /tmp/gbm-venv && /tmp/gbm-venv/bin/pip install scikit-learn numpy
    /tmp/gbm-venv/bin/python gbm.py TRACE

A measuring tool, not part of fresco (scikit-learn lives in a throw-away venv).
"""
import sys

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

import fit


def recall_at(task, scores, k=10):
    order = np.argsort(-scores, kind="stable")
    top = {task["ids"][i] for i in order[:k]}
    return len(top & task["needed"]) / len(task["needed"])


def main():
    tasks = [t for t in fit.load(sys.argv[1]) if len(t["ids"]) and t["needed"]]
    stated = np.array([fit.STATED[f] for f in fit.FEATURES])
    totals = []
    for held in sorted({t["project"] for t in tasks}):
        train = [t for t in tasks if t["project"] != held]
        x = np.vstack([t["x"] for t in train])
        y = np.concatenate([t["y"] for t in train])
        # Each task weighs the same, however many candidates it has.
        w = np.concatenate([np.full(len(t["ids"]), 1.0 / len(t["ids"])) for t in train])
        model = HistGradientBoostingClassifier(
            max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=40, l2_regularization=1.0,
            early_stopping=False, random_state=0,
        )
        model.fit(x, y, sample_weight=w)
        test = [t for t in tasks if t["project"] == held]
        r_stated = np.mean([recall_at(t, t["x"] @ stated) for t in test])
        r_model = np.mean([recall_at(t, model.predict_proba(t["x"])[:, 1]) for t in test])
        totals.append((r_stated, r_model, len(test)))
        print(f"{held:20s} R@10 current {r_stated:.3f}  model {r_model:.3f}  ({len(test)} tasks)")
    n = sum(t[2] for t in totals)
    print(
        f"{'all, held out':20s} R@10 current {sum(a * c for a, _, c in totals) / n:.3f}  "
        f"model {sum(b * c for _, b, c in totals) / n:.3f}"
    )


if __name__ == "__main__":
    main()
