#!/usr/bin/env python3
"""How sure a retrieval report's Recall@k is: intervals from a trace of the `retrieval` bench.

Recall@k of the fused ranking (the order `context` returns, `fused` in the trace) is a mean of
per-task values. Two 95 % intervals are printed for k = 10 and 50:

- over tasks: the mean plus or minus 1.96 standard errors, as if the tasks were a sample of one
  population;
- over projects and tasks: a two-level bootstrap (resample the projects, then each chosen
  project's tasks), since projects differ more from each other than tasks of one project do;
- over projects: the cluster bootstrap (resample the projects, each with all its tasks). The
  two-level one counts the spread within projects twice (once in the projects' means, once
  again in the tasks drawn) and is the wider, cautious one; this one is the usual estimate.

    python3 interval.py TRACE [--half tuning|held-out]

`--half` keeps the projects of one half of DevEval's split (bench/README.md): the first hex digit
of the SHA-256 of the project's name is 0-7 for the tuning half, 8-f for the held-out half.

Standard library only; a measuring tool, not part of fresco.
"""
import collections
import hashlib
import json
import random
import statistics
import sys

RESAMPLES = 2000


def in_half(project, half):
    if half is None:
        return True
    tuning = hashlib.sha256(project.encode()).hexdigest()[0] in "01234567"
    return tuning == (half == "tuning")


def per_task_recall(path, k, half=None):
    """Project -> the Recall@k of each of its tasks with at least one needed unit."""
    by_project = collections.defaultdict(list)
    with open(path) as trace:
        for line in trace:
            try:
                task = json.loads(line)
            except json.JSONDecodeError:
                continue
            needed = {n["id"] for n in task.get("needed", [])}
            if "fused" not in task or not needed or not in_half(task["project"], half):
                continue
            top = {hit["id"] for hit in task["fused"][:k]}
            by_project[task["project"]].append(len(needed & top) / len(needed))
    return by_project


def bootstrap(by_project, rng, resample_tasks):
    """95 % interval of the mean over resampled projects; each chosen project's tasks are
    resampled too (two-level) or kept whole (the cluster bootstrap)."""
    projects = sorted(by_project)
    means = []
    for _ in range(RESAMPLES):
        values = []
        for project in rng.choices(projects, k=len(projects)):
            tasks = by_project[project]
            values.extend(rng.choices(tasks, k=len(tasks)) if resample_tasks else tasks)
        means.append(statistics.mean(values))
    means.sort()
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def main():
    args = sys.argv[1:]
    half = None
    if len(args) == 3 and args[1] == "--half" and args[2] in ("tuning", "held-out"):
        half = args[2]
    elif len(args) != 1:
        sys.exit(__doc__)
    for k in (10, 50):
        by_project = per_task_recall(args[0], k, half)
        values = [v for tasks in by_project.values() for v in tasks]
        if len(values) < 2:
            sys.exit(f"{args[0]}: fewer than two tasks with needed units")
        mean = statistics.mean(values)
        error = statistics.stdev(values) / len(values) ** 0.5
        low, high = bootstrap(by_project, random.Random(1), resample_tasks=True)
        cluster_low, cluster_high = bootstrap(by_project, random.Random(1), resample_tasks=False)
        print(
            f"R@{k}: {mean:.3f} over {len(values)} tasks of {len(by_project)} projects; "
            f"over tasks {mean - 1.96 * error:.3f}-{mean + 1.96 * error:.3f} (standard error {error:.4f}); "
            f"over projects and tasks {low:.3f}-{high:.3f}; over projects {cluster_low:.3f}-{cluster_high:.3f}"
        )
        for project in sorted(by_project):
            print(f"  {project:24} {statistics.mean(by_project[project]):.3f} ({len(by_project[project])} tasks)")


if __name__ == "__main__":
    main()
