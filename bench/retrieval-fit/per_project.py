#!/usr/bin/env python3
"""Would weights adapted to each repository rank better? A check with the repository's own code.

Every repository carries its own training data: each of its functions, blanked, is a task whose
truth is what the original body's graph edges reach (the proxy tasks of `retrieval --tasks N`).
This script adapts the current weights to one project at a time with those tasks and scores the
result on DevEval's human-annotated tasks of the same project:

- the current weights (`STATED` in fit.py), scaled to logit units by a one-parameter logistic fit
  on the pooled proxy tasks: `base`;
- what the proxy's truth wants everywhere, a deviation `global` from `base` fitted on the pooled
  proxy tasks (the proxy and people annotate differently, see blend.py);
- per project, a deviation `d` from `base + global` fitted on that project's proxy tasks, with a
  ridge penalty `lam`; DevEval's tasks of the project are ranked by `base + d` ("relative": only
  what sets this project apart from the others) or by `base + global + d` ("absolute").

    python3 per_project.py DEVEVAL_TRACE PROXY_TRACE [--half tuning|held-out]

PROXY_TRACE: `retrieval --tasks 40 --trace PROXY_TRACE $(DevEval's project roots)`. numpy only;
a measuring tool, not part of fresco.
"""
import argparse
import collections

import numpy as np

import fit as F
from interval import in_half

RANK_FIRST = F.FEATURES.index("unused_import")
LAMS = (3, 10, 30, 100, 300, 1000, 3000)


def pack(tasks):
    """Stacked features, truth and per-task weights (each task weighs the same, as in fit.py)."""
    xs, ys, ws = [], [], []
    for t in tasks:
        if t["y"].sum() == 0:
            continue
        pos = t["y"].sum()
        neg = len(t["y"]) - pos
        xs.append(t["x"]); ys.append(t["y"]); ws.append(np.where(t["y"] > 0, 0.5 / pos, 0.5 / max(neg, 1)))
    w = np.concatenate(ws)
    return np.vstack(xs), np.concatenate(ys), w / w.sum(), len(xs)


def deviation(x, y, w, base, lam, n, steps=800, lr=0.5):
    """Logistic fit of logit = x @ (base + d) + b, penalty lam * |d|^2 / n on standardised
    features; returns d on the raw features. The rank-first feature is left out."""
    x = x.copy()
    x[:, RANK_FIRST] = 0
    sd = x.std(0) + 1e-9
    z = x / sd
    d = np.zeros(x.shape[1])
    b = 0.0
    offset = x @ base
    step = lr / (1 + lam / n)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(offset + z @ d + b, -30, 30)))
        d -= step * (z.T @ (w * (p - y)) + lam * d / n)
        b -= lr * float((w * (p - y)).sum())
    return d / sd


def scale_to_logits(x, y, w, weights):
    """The factor s that makes s * (x @ weights) + b the best logistic model (grid search)."""
    best = (float("inf"), 1.0)
    for s in np.linspace(0.05, 2, 40):
        z = x @ (s * weights)
        b = 0.0
        for _ in range(200):
            p = 1 / (1 + np.exp(-np.clip(z + b, -30, 30)))
            b -= float((w * (p - y)).sum())
        p = 1 / (1 + np.exp(-np.clip(z + b, -30, 30)))
        loss = -float((w * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).sum())
        best = min(best, (loss, s))
    return best[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deveval_trace")
    ap.add_argument("proxy_trace")
    ap.add_argument("--half", default="tuning", choices=("tuning", "held-out"))
    args = ap.parse_args()
    current = np.array([F.STATED[f] for f in F.FEATURES])
    dev = [t for t in F.load(args.deveval_trace) if t["needed"] and in_half(t["project"], args.half)]
    proxy = [t for t in F.load(args.proxy_trace) if t["needed"] and len(t["ids"]) > 0]
    no_rank_first = current.copy()
    no_rank_first[RANK_FIRST] = 0
    x, y, w, n = pack(proxy)
    base = scale_to_logits(x, y, w, no_rank_first) * no_rank_first
    everywhere = deviation(x, y, w, base, 1.0, n)
    proxy_of = collections.defaultdict(list)
    for t in proxy:
        proxy_of[t["project"]].append(t)
    dev_of = collections.defaultdict(list)
    for t in dev:
        dev_of[t["project"]].append(t)
    print(f"{args.half} half: {len(dev)} DevEval tasks in {len(dev_of)} projects, "
          f"{sum(1 for p in dev_of if p in proxy_of)} with proxy tasks ({len(proxy)} in all)")
    sums = collections.defaultdict(lambda: np.zeros(2))
    for project, tasks in dev_of.items():
        def add(label, weights):
            r = F.recall(tasks, weights)
            sums[label] += np.array([r[10], r[50]]) * len(tasks)
        add("current weights", current)
        own = proxy_of.get(project, [])
        packed = pack(own) if own else None
        for lam in LAMS:
            d = deviation(*packed[:3], base + everywhere, lam, packed[3]) if packed else np.zeros(len(current))
            for label, weights in ((f"relative, lam {lam}", base + d), (f"absolute, lam {lam}", base + everywhere + d)):
                weights = weights.copy()
                weights[RANK_FIRST] = 1000.0
                add(label, weights)
    print("Recall@10 / @50 (mean over tasks):")
    for label, s in sums.items():
        print(f"  {label:22} {s[0] / len(dev):.4f} / {s[1] / len(dev):.4f}")


if __name__ == "__main__":
    main()
