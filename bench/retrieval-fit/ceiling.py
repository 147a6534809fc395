#!/usr/bin/env python3
"""How far re-weighting the graph lane's features can go, and whether it carries over.

For each trace given, coordinate ascent on Recall@10 itself, in sample, from the current weights
(`fit.STATED`): each feature's weight is moved by -2 ... +2 while that raises the trace's mean
Recall@10 over its tasks, until no move does. The result is a ceiling for a weighted sum of these
features on that trace (a local one: ascent may stop short of the global best), not weights to
ship. Then every trace is scored with every trace's ascended weights: weights that raise one half
of DevEval and lower the other have learned that half's projects, not dependencies.

    python3 ceiling.py TUNING_TRACE HELD_OUT_TRACE

Reading the held-out half this way spends it: say so wherever the figures are quoted, and never
take weights from it. numpy only; a measuring tool, not part of fresco.
"""
import argparse

import numpy as np

import fit as F

STEPS = (-2, -1, -0.5, -0.25, 0.25, 0.5, 1, 2)
RANK_FIRST = F.FEATURES.index("unused_import")


def recall_at(tasks, w, k=10):
    """Mean over tasks of the share of the task's needed units (all of them, candidates or not)
    among the k best-scored candidates."""
    total = 0.0
    for t in tasks:
        if len(t["ids"]) == 0 or not t["needed"]:
            continue
        s = t["x"] @ w
        top = np.argpartition(-s, k)[:k] if len(s) > k else np.arange(len(s))
        total += t["y"][top].sum() / len(t["needed"])
    return total / len(tasks)


def ascend(tasks, w0, max_rounds=8):
    w, best = w0.copy(), recall_at(tasks, w0)
    for _ in range(max_rounds):
        improved = False
        for j in range(len(w)):
            if j == RANK_FIRST:
                continue  # rank-first evidence, not a weight to trade
            for step in STEPS:
                trial = w.copy()
                trial[j] += step
                value = recall_at(tasks, trial)
                if value > best + 1e-9:
                    w, best, improved = trial, value, True
        if not improved:
            break
    return w, best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    args = parser.parse_args()
    traces = {path: F.load(path) for path in args.traces}
    stated = np.array([F.STATED[f] for f in F.FEATURES])
    weights = {"current": stated}
    for path, tasks in traces.items():
        w, best = ascend(tasks, stated)
        weights[f"ascended on {path}"] = w
        print(f"{path}: {len(tasks)} tasks, current {recall_at(tasks, stated):.4f}, ascended {best:.4f}")
        for name, before, after in zip(F.FEATURES, stated, w):
            if before != after:
                print(f"    {name}: {before} -> {after}")
    print("\nRecall@10 of each trace (columns) under each set of weights (rows):")
    for label, w in weights.items():
        cells = "  ".join(f"{recall_at(tasks, w):.4f}" for tasks in traces.values())
        print(f"  {cells}   {label}")


if __name__ == "__main__":
    main()
