"""pytest_rlaudit.stats.runs against rliable 1.2.0 on fixed scores (not run by the suite).

rliable is not a dev dependency: it needs arch, statsmodels, pandas, seaborn and
matplotlib, and with the newest of each it does not import (arch 7.2.0 fails on pandas 3:
``deprecate_kwarg() missing 1 required positional argument``). So it runs once, in a
throwaway venv, and ``tests/stats/test_runs.py`` pins what it printed::

    python -m venv /tmp/rlvenv
    /tmp/rlvenv/bin/pip install numpy scipy rliable "pandas<3"
    PYTHONPATH=. /tmp/rlvenv/bin/python benchmarks/rliable_agreement.py

Printed with rliable 1.2.0, numpy 2.4, scipy 1.17, pandas 2.3.3 (ours / rliable):

- IQM (``metrics.aggregate_iqm``) of X, Y, X[:5], X[:4]: identical floats.
- probability of improvement (``metrics.probability_of_improvement``) of X over Y, Y over
  X, X with ties over X, X[:5] over Y[:5]: 0.7, 0.3, 0.55, 0.76, identical.
- performance profile (``library.create_performance_profile``) at 0, 0.1, ..., 1: equal.
- IQM interval (``library.get_interval_estimates``, 50,000 reps, percentile): rliable
  (0.748, 0.9167) at 5 runs, (0.7192, 0.862) at 10 (0.7203 in another run: its generator
  is not seeded); ours resampling the same way, read at
  the plain 95%: (0.748, 0.9167) and (0.7193, 0.862); shipped (Student-expanded level):
  (0.728, 0.949) and (0.7085, 0.8687).
- probability of improvement's interval of X over Y: rliable's bootstrap (0.4, 0.9429);
  ours resampling the same way (0.4, 0.9429); shipped (Newcombe's score interval, see
  ``improvement_ci``) (0.4177, 0.8773).
"""

from __future__ import annotations

import numpy as np
from rliable import library as rly
from rliable import metrics
from scipy import stats

from pytest_rlaudit.stats import runs as ours

rng = np.random.default_rng(7)
X = np.round(rng.beta(8, 2, size=10), 3)  # 10 runs of recipe X, one "task"
Y = np.round(rng.beta(6, 3, size=7), 3)  # 7 runs of recipe Y


def main() -> None:
    print("X", X.tolist())
    print("Y", Y.tolist())
    for name, x in (("X", X), ("Y", Y), ("X[:5]", X[:5]), ("X[:4]", X[:4])):
        theirs, mine = metrics.aggregate_iqm(x[:, None]), ours.iqm(x)
        print(f"IQM {name}: rliable {theirs!r} ours {mine!r} equal {theirs == mine}")
    ties = np.concatenate([X[:5], X[:3]])
    for a, b in ((X, Y), (Y, X), (ties, X), (X[:5], Y[:5])):
        theirs = metrics.probability_of_improvement(a[:, None], b[:, None])
        mine = ours.probability_of_improvement(a, b)
        print(f"P(improvement): rliable {theirs!r} ours {mine!r}")
    taus = np.linspace(0, 1, 11)
    theirs = rly.create_performance_profile({"x": X[:, None]}, taus)[0]["x"]
    print("profile equal", np.allclose(theirs, ours.performance_profile(X, taus)))
    for runs in (5, 10):
        x = X[:runs]
        _, ci = rly.get_interval_estimates(
            {"x": x[:, None]}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=50_000)
        resampled = stats.trim_mean(
            x[np.random.default_rng(0).integers(0, runs, (50_000, runs))], 0.25, axis=1)
        print(f"IQM interval, {runs} runs: rliable {ci['x'].ravel().round(4).tolist()} ours "
              f"at 95% {np.percentile(resampled, [2.5, 97.5]).round(4).tolist()} shipped "
              f"{np.round(ours.iqm_ci(x), 4).tolist()}")
    _, ci = rly.get_interval_estimates({"xy": (X[:, None], Y[:, None])},
                                       metrics.probability_of_improvement, reps=20_000)
    g = np.random.default_rng(0)
    xs, ys = X[g.integers(0, 10, (20_000, 10))], Y[g.integers(0, 7, (20_000, 7))]
    diff = xs[:, :, None] - ys[:, None, :]
    wins = (diff > 0).mean(axis=(1, 2)) + 0.5 * (diff == 0).mean(axis=(1, 2))
    print(f"P(improvement) interval: rliable {ci['xy'].ravel().round(4).tolist()} ours "
          f"resampled {np.percentile(wins, [2.5, 97.5]).round(4).tolist()} shipped "
          f"{np.round(ours.improvement_ci(X, Y), 4).tolist()}")


if __name__ == "__main__":
    main()
