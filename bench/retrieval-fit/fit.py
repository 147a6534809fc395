#!/usr/bin/env python3
"""Fits the graph lane's feature weights on some projects of a retrieval trace and checks them
on the others.

The retrieval benchmark's trace (`retrieval --trace FILE`) records, per task, the graph lane's
candidates with their features (`graph_features`) and the units the task needed. This script
fits a logistic model of "needed" on the training projects, then compares, on every project,
the graph lane ranked by the current weights (`STATED` below, the copy of
`CandidateFeatures::score` in query/src/retrieve/graph_lane.rs: the priors blended with a fit, see
blend.py) with the fitted ones: Recall@k (mean over tasks) of the candidate ranking.

    python3 fit.py TRACE --train requests-2.32.3,flask-3.0.3,click-8.1.7

numpy only; a measuring tool, not part of fresco.
"""
import argparse
import collections
import json

import numpy as np

FEATURES = [
    "own_class", "base_class", "mentioned_class", "class_neighbourhood", "file", "file_neighbourhood", "imported_name",
    "imported_module", "imported", "class_users", "file_users", "unused_import", "unused_private", "unread_variable", "word_affinity", "dense_affinity", "analogue_users",
    "named_in_text", "adjacent_users", "analogue_role_users", "same_name", "collaborator_namesake", "family_users",
    "sibling_users", "nested_name", "return_constructor", "type_users", "analogue_only", "caller_of_target",
    "local_elsewhere", "shadowed", "private_of_another_class", "instance_out_of_reach", "initialiser_already_run",
    "itself", "recursive_neighbours", "receiver_words", "receiver_dense",
]
# The current weights, a copy of `CandidateFeatures::score` (a test in
# query/src/retrieve/graph_lane.rs reads this table: one `"name": number` per entry, no comments
# inside it).
STATED = {
    "own_class": 3.0, "base_class": 3.0, "mentioned_class": 2.25, "class_neighbourhood": 1.75, "file": 1.75,
    "file_neighbourhood": 0.75, "imported_name": 2.0, "imported_module": 1.5, "imported": -0.25, "class_users": 1.25,
    "file_users": 0.5, "unused_import": 100.0, "unused_private": 3.75, "unread_variable": 3.5, "word_affinity": 2.25,
    "dense_affinity": 0.75, "analogue_users": 2.25, "named_in_text": 1.5, "adjacent_users": 2.0,
    "analogue_role_users": 3.25, "same_name": 1.5, "collaborator_namesake": 2.5, "family_users": 4.5,
    "sibling_users": 2.0, "return_constructor": 3.0, "type_users": 2.5, "analogue_only": -2.75,
    "caller_of_target": -5.75, "local_elsewhere": -5.0, "shadowed": -4.25,
    "private_of_another_class": -100.0, "instance_out_of_reach": -100.0,
    "initialiser_already_run": -100.0, "itself": 3.0,
    "recursive_neighbours": 4.0, "receiver_words": 0.5, "receiver_dense": 1.0, "nested_name": 1.0,
}
# The tools rank with FEATURES; the test in query/src/retrieve/graph_lane.rs checks STATED against
# the score.
assert set(FEATURES) == set(STATED), "FEATURES and STATED must name the same features"
KS = [1, 3, 5, 10, 20, 50]


def load(path):
    tasks = []
    for line in open(path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by an interrupted run
        if "graph_features" not in row:
            continue
        ids = [c["id"] for c in row["graph_features"]]
        x = np.array([[c["f"].get(f, 0.0) for f in FEATURES] for c in row["graph_features"]], dtype=float)
        needed = {n["id"] for n in row["needed"]}
        y = np.array([1.0 if i in needed else 0.0 for i in ids])
        tasks.append({"project": row["project"], "ids": ids, "x": x, "y": y, "needed": needed})
    return tasks


def fit(tasks, l2=1.0, steps=3000, lr=0.5):
    """Logistic regression by gradient descent; each task weighs the same (positives and
    negatives reweighted per task so big classes do not dominate)."""
    xs, ys, ws = [], [], []
    for t in tasks:
        if len(t["ids"]) == 0 or t["y"].sum() == 0:
            continue
        pos = t["y"].sum()
        neg = len(t["y"]) - pos
        w = np.where(t["y"] > 0, 0.5 / pos, 0.5 / max(neg, 1))
        xs.append(t["x"]); ys.append(t["y"]); ws.append(w)
    x = np.vstack(xs); y = np.concatenate(ys); w = np.concatenate(ws)
    w = w / w.sum()
    mu = x.mean(0); sd = x.std(0) + 1e-9
    z = (x - mu) / sd
    beta = np.zeros(x.shape[1]); b0 = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ beta + b0)))
        g = z.T @ (w * (p - y)) + l2 * beta / len(tasks)
        beta -= lr * g
        b0 -= lr * float((w * (p - y)).sum())
    return beta / sd  # weights on the raw features (the intercept does not change a ranking)


def recall(tasks, weights):
    out = collections.defaultdict(list)
    for t in tasks:
        if not t["needed"]:
            continue
        order = np.argsort(-(t["x"] @ weights), kind="stable")
        ranked = [t["ids"][i] for i in order]
        for k in KS:
            out[k].append(len(t["needed"] & set(ranked[:k])) / len(t["needed"]))
    return {k: (sum(v) / len(v) if v else float("nan")) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--train", required=True, help="comma-separated project names to fit on")
    args = ap.parse_args()
    tasks = load(args.trace)
    train = set(args.train.split(","))
    fitted = fit([t for t in tasks if t["project"] in train])
    stated = np.array([STATED[f] for f in FEATURES])
    # Scale the fitted weights so the largest tier weight reads like the current ones.
    print("weights (current | fitted, scaled so own_class = 3):")
    scale = 3.0 / fitted[FEATURES.index("own_class")] if fitted[FEATURES.index("own_class")] > 0 else 1.0
    for f, s, v in zip(FEATURES, stated, fitted):
        print(f"  {f:20} {s:6.2f} | {v * scale:6.2f}")
    print()
    print("graph-lane candidate ranking, Recall@k (mean over tasks):")
    print("project            set    weights  " + " ".join(f"R@{k:<4}" for k in KS))
    projects = sorted({t["project"] for t in tasks}, key=lambda p: (p not in train, p))
    for group in projects + ["held-out", "train"]:
        if group == "held-out":
            sel = [t for t in tasks if t["project"] not in train]
        elif group == "train":
            sel = [t for t in tasks if t["project"] in train]
        else:
            sel = [t for t in tasks if t["project"] == group]
        if not sel:
            continue
        role = "train" if group == "train" or group in train else "test"
        for name, w in (("current", stated), ("fitted", fitted)):
            r = recall(sel, w)
            print(f"{group:18} {role:6} {name:8} " + " ".join(f"{r[k]:.3f}" for k in KS))


if __name__ == "__main__":
    main()
