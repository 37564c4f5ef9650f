"""Calibration benchmark: vectorised bootstrap and sweeps against a naive loop.

Run with ``.venv/bin/python benchmarks/bench_calibration.py``. Both versions run
side by side in one process; the ratio is the number to read. Nothing is asserted.

- 200 queries: 10,000 stratified AUC resamples plus the full sweep, against a
  loop that calls sklearn's roc_auc_score on each resample.
- 100,000 queries: the calibration of one signal (group stats, AUC with 2,000
  resamples, full sweep over every distinct score, all four threshold rules).
"""

import time

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from ragcal.calibration import fit_threshold
from ragcal.metrics import auc_table, group_stats, sweep
from ragcal.metrics.auc import auc_bootstrap


def synthetic_table(n, random_state=0):
    rng = np.random.default_rng(random_state)
    slices = rng.choice(["answerable", "near-domain", "unrelated"], size=n, p=[0.5, 0.25, 0.25])
    centre = np.select([slices == "answerable", slices == "near-domain"], [0.65, 0.42], 0.22)
    return pd.DataFrame(
        {
            "id": np.arange(n).astype(str),
            "answerable": slices == "answerable",
            "slice": slices,
            "dense_top1": np.round(rng.normal(centre, 0.08), 6),
        }
    )


def naive_auc_bootstrap(y_true, y_score, n_resamples, random_state=0):
    rng = np.random.default_rng(random_state)
    positives, negatives = np.nonzero(y_true)[0], np.nonzero(~y_true)[0]
    values = np.empty(n_resamples)
    for b in range(n_resamples):
        chosen = np.concatenate([rng.choice(positives, positives.size), rng.choice(negatives, negatives.size)])
        values[b] = roc_auc_score(y_true[chosen], y_score[chosen])
    return values


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def main():
    table = synthetic_table(200)
    labels, scores = table["answerable"].to_numpy(), table["dense_top1"].to_numpy()
    ours, fast = timed(lambda: (auc_bootstrap(labels, scores, n_resamples=10_000), sweep(table, "dense_top1")))
    naive, slow = timed(lambda: naive_auc_bootstrap(labels, scores, 10_000))
    print("200 queries, 10,000 AUC resamples + full sweep")
    print(f"  ragcal (vectorised):          {ours:7.3f} s  (goal: <= 1 s)")
    print(f"  naive sklearn loop (AUC only): {naive:7.3f} s")
    print(
        f"  speed-up: {naive / ours:.0f}x; 95% intervals agree: ragcal "
        f"[{np.quantile(fast[0], 0.025):.3f}, {np.quantile(fast[0], 0.975):.3f}] vs naive "
        f"[{np.quantile(slow, 0.025):.3f}, {np.quantile(slow, 0.975):.3f}]"
    )

    big = synthetic_table(100_000, random_state=1)

    def calibrate_big():
        group_stats(big, ["dense_top1"])
        auc_table(big, ["dense_top1"], n_resamples=2000)
        sweep(big, "dense_top1")
        return [
            fit_threshold(rule, big["dense_top1"], big["answerable"])
            for rule in ("keep@0.95", "recall_guarantee@0.95", "false_answer_guarantee@0.1", "min_cost@5")
        ]

    seconds, thresholds = timed(calibrate_big)
    print("100,000 queries, one signal: group stats, AUC (2,000 resamples, 3 comparisons), full sweep, 4 rules")
    print(f"  ragcal: {seconds:7.2f} s  (goal: <= 10 s); thresholds {np.round(thresholds, 3).tolist()}")


if __name__ == "__main__":
    main()
