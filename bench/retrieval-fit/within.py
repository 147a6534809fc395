#!/usr/bin/env python3
"""Checks whether weights fitted on a project's own tasks rank that project's other tasks better
than the current weights (fit.py's `STATED`).

`fit.py` and `gbm.py` fit on some projects and test on others: a project's style (rich reads its
own attributes, httpx delegates to transports) might not carry over. This script fits the
logistic model of `fit.py` within each project instead: its tasks in 5 folds (a fixed shuffle),
fitted on 4, ranked on the fifth. It reports Recall@10 of the graph lane's candidate ranking per
project, current weights against the weights fitted within the project.

    python3 within.py TRACE

numpy only; a measuring tool, not part of fresco.
"""
import random
import sys

import numpy as np

import fit

FOLDS = 5


def main():
    tasks = fit.load(sys.argv[1])
    stated = np.array([fit.STATED[f] for f in fit.FEATURES])
    total_stated = total_fitted = count = 0.0
    print("project            current fitted within the project (R@10, mean over tasks)")
    for project in sorted({t["project"] for t in tasks}):
        own = [t for t in tasks if t["project"] == project and t["needed"]]
        random.Random(1).shuffle(own)
        folds = [own[i::FOLDS] for i in range(FOLDS)]
        s = f = 0.0
        for i, held_out in enumerate(folds):
            train = [t for j, fold in enumerate(folds) if j != i for t in fold]
            weights = fit.fit(train)
            s += fit.recall(held_out, stated)[10] * len(held_out)
            f += fit.recall(held_out, weights)[10] * len(held_out)
        print(f"{project:18} {s / len(own):.3f}   {f / len(own):.3f}")
        total_stated += s
        total_fitted += f
        count += len(own)
    print(f"{'all':18} {total_stated / count:.3f}   {total_fitted / count:.3f}")


if __name__ == "__main__":
    main()
