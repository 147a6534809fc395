#!/usr/bin/env python3
"""Checks whether fitting the graph lane's weights to the ranking itself (pairwise) ranks better
than the current weights on projects the fit did not see.

`fit.py` fits a logistic model of "needed" per candidate (pointwise): it spends its effort on
telling a needed unit from the hundreds of candidates no ranking would put near the top. Recall@10
only asks that each needed unit outrank the candidates that would otherwise take its place. This
script fits the same weighted sum by a pairwise logistic loss (RankNet with a linear scorer) over
pairs of a needed candidate and an unneeded one, the unneeded ones drawn from the top of the
current ranking (the ones that compete) and at random, each task weighing the same, with an L2
pull toward the current weights. Cross-validated over whole projects of DevEval's tuning half, as
blend.py does.

    python3 pairwise.py TRACE [--held-out]

`--held-out` also prints the held-out half's figures (read them once, after choosing). numpy only;
a measuring tool, not part of fresco.
"""
import argparse
import random

import numpy as np

import fit as F
from interval import in_half

FOLDS = 5
RANK_FIRST = F.FEATURES.index("unused_import")
# Unneeded candidates per task: the best-ranked ones by the current weights, and some at random.
HARD_NEGATIVES = 30
RANDOM_NEGATIVES = 20


def pairs(tasks, stated, seed=0):
    """Per task, differences x_needed - x_unneeded and a weight per pair (each task sums to 1)."""
    rng = np.random.default_rng(seed)
    diffs, weights = [], []
    for t in tasks:
        x, y = t["x"], t["y"]
        # The import made for the target ranks first whatever the rest says: not for the fit.
        keep = x[:, RANK_FIRST] == 0
        pos = np.flatnonzero((y > 0) & keep)
        neg = np.flatnonzero((y == 0) & keep)
        if len(pos) == 0 or len(neg) == 0:
            continue
        order = neg[np.argsort(-(x[neg] @ stated), kind="stable")]
        hard = order[:HARD_NEGATIVES]
        rest = order[HARD_NEGATIVES:]
        easy = rng.choice(rest, size=min(RANDOM_NEGATIVES, len(rest)), replace=False) if len(rest) else rest
        chosen = np.concatenate([hard, easy]).astype(int)
        d = (x[pos][:, None, :] - x[chosen][None, :, :]).reshape(-1, x.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    d = np.vstack(diffs)
    w = np.concatenate(weights)
    return d, w / w.sum()


def fit_pairwise(tasks, stated, l2=0.05, steps=2000, lr=0.5):
    """Weights on the raw features minimising the weighted pairwise logistic loss, pulled toward
    `stated` (scaled to the fit's scale) by `l2`."""
    d, w = pairs(tasks, stated)
    cols = [i for i in range(d.shape[1]) if i != RANK_FIRST]
    z = d[:, cols]
    sd = np.sqrt((w[:, None] * z * z).sum(0)) + 1e-9
    z = z / sd
    prior = stated[cols] * sd
    prior = prior / np.abs(prior).sum()
    beta = np.zeros(len(cols))
    scale = 1.0
    for _ in range(steps):
        m = z @ beta
        g = -(z.T @ (w / (1 + np.exp(m))))
        # The pull toward the priors, at the fit's own scale (a ranking ignores scale).
        scale = max(np.abs(beta).sum(), 1e-6)
        g += l2 * (beta - scale * prior)
        beta -= lr * g
    out = np.zeros(d.shape[1])
    out[cols] = beta / sd
    out *= 3.0 / out[F.FEATURES.index("own_class")] if out[F.FEATURES.index("own_class")] > 0 else 1.0
    out[RANK_FIRST] = stated[RANK_FIRST]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--held-out", action="store_true")
    args = ap.parse_args()
    tasks = [t for t in F.load(args.trace) if t["needed"]]
    tuning = [t for t in tasks if in_half(t["project"], "tuning")]
    stated = np.array([F.STATED[f] for f in F.FEATURES])
    projects = sorted({t["project"] for t in tuning})
    random.Random(0).shuffle(projects)
    folds = [projects[i::FOLDS] for i in range(FOLDS)]
    print(f"{len(tuning)} tuning tasks, {len(projects)} projects, {FOLDS} folds of whole projects")
    print("Recall@10 / @50 on the folds left out: current weights | pairwise fit")
    for l2 in (0.01, 0.05, 0.2, 1.0):
        s = np.zeros(4)
        for fold in folds:
            train = [t for t in tuning if t["project"] not in fold]
            test = [t for t in tuning if t["project"] in fold]
            w = fit_pairwise(train, stated, l2=l2)
            rs, rw = F.recall(test, stated), F.recall(test, w)
            s += np.array([rs[10], rs[50], rw[10], rw[50]]) * len(test)
        s /= len(tuning)
        print(f"  l2 {l2:5}: {s[0]:.4f} / {s[1]:.4f} | {s[2]:.4f} / {s[3]:.4f}")
    w = fit_pairwise(tuning, stated)
    print("\nweights fitted on the whole tuning half (l2 0.05): feature current fitted")
    for f, a, b in zip(F.FEATURES, stated, w):
        print(f"  {f:22} {a:7.2f} {b:7.2f}")
    if args.held_out:
        held = [t for t in tasks if in_half(t["project"], "held-out")]
        rs, rw = F.recall(held, stated), F.recall(held, w)
        print(f"\nheld-out half: {rs[10]:.4f} / {rs[50]:.4f} | {rw[10]:.4f} / {rw[50]:.4f}")


if __name__ == "__main__":
    main()
