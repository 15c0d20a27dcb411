#!/usr/bin/env python3
"""Which trend test tells a steady series from a drifting one when the
intervals remember each other (issue 37), measured on synthetic series.

For each kind of series (independent noise, AR(1) noise with phi 0.5 and
0.8, a series that switches between two levels as an unpinned rr on two
cores does, and ramps of 5% and 20% over the series under AR(1) noise) and
each length (10, 25, 50, 100 intervals), the share of TRIALS series that
each test calls a trend at 95%: for steady series that is the false-alarm
rate (a 5% test should say 5%), for ramps the power.

Tests: Mann-Kendall on the intervals ('mk', what -d auto used before);
Hamed and Rao's variance correction ('hr'); trend-free prewhitening after
Yue and Wang ('tfpw'); Mann-Kendall on batch means ('batch', what
src/measure/stationary.rs does: batches as short as keeps the lag-1
autocorrelation of the detrended means under 0.2, at least 5 batches).

    pip install numpy scipy
    bench/stationary.py [TRIALS=100]

Pure computation: no network, no root.
"""
import math
import sys

import numpy as np
from scipy import stats

TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 100
rng = np.random.default_rng(37)


def mk_s(x):
    return sum(np.sign(x[i + 1:] - x[i]).sum() for i in range(len(x) - 1))


def mk_var(n):
    return n * (n - 1) * (2 * n + 5) / 18


def z_of(s, var):
    return (s - np.sign(s)) / math.sqrt(var) if s else 0.0


def mk(x):
    return z_of(mk_s(np.asarray(x, float)), mk_var(len(x)))


def sen(x):
    n = len(x)
    return np.median([(x[j] - x[i]) / (j - i) for i in range(n) for j in range(i + 1, n)])


def acf(x, k):
    x = np.asarray(x, float)
    d = x - x.mean()
    v = (d * d).sum()
    return (d[:-k] * d[k:]).sum() / v if v > 0 else 0.0


def hamed_rao(x):
    x = np.asarray(x, float)
    n = len(x)
    r = stats.rankdata(x - sen(x) * np.arange(n))
    corr = 0.0
    for k in range(1, n - 1):
        rho = acf(r, k)
        if abs(rho) > 1.96 / math.sqrt(n):
            corr += (n - k) * (n - k - 1) * (n - k - 2) * rho
    f = max(1.0, 1 + 2 * corr / (n * (n - 1) * (n - 2)))
    return z_of(mk_s(x), mk_var(n) * f)


def tfpw(x):
    x = np.asarray(x, float)
    n = len(x)
    b = sen(x)
    d = x - b * np.arange(n)
    r1 = acf(d, 1)
    if r1 <= 0:
        return mk(x)
    return mk(d[1:] - r1 * d[:-1] + b * np.arange(1, n))


def batch_means(x, m):
    k = len(x) // m
    return np.asarray(x[len(x) - k * m:], float).reshape(k, m).mean(1)


def batch(x, min_batches=5):
    x = np.asarray(x, float)
    n = len(x)
    if n < 2 * min_batches:
        return mk(x)
    d = x - sen(x) * np.arange(n)
    m = next((m for m in range(1, n // min_batches + 1) if acf(batch_means(d, m), 1) < 0.2),
             n // min_batches)
    return mk(batch_means(x, m))


def ar1(n, phi, cv=0.05):
    x = np.zeros(n)
    x[0] = rng.normal() / math.sqrt(1 - phi * phi)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + rng.normal()
    return 1e4 * (1 + cv * x * math.sqrt(1 - phi * phi))


def levels(n, dwell=15, low=0.76):
    out, state = [], 1
    for _ in range(n):
        if rng.random() < 1 / dwell:
            state = 1 - state
        out.append((1.0 if state else low) * (1 + 0.015 * rng.normal()))
    return 1e4 * np.array(out)


SERIES = {
    'independent': lambda n: ar1(n, 0.0),
    'AR(1) 0.5': lambda n: ar1(n, 0.5),
    'AR(1) 0.8': lambda n: ar1(n, 0.8),
    'two levels': levels,
    'ramp 5%, AR 0.5': lambda n: ar1(n, 0.5, 0.02) * np.linspace(1, 1.05, n),
    'ramp 20%, AR 0.5': lambda n: ar1(n, 0.5, 0.02) * np.linspace(1, 1.2, n),
}
TESTS = {'mk': mk, 'hr': hamed_rao, 'tfpw': tfpw, 'batch': batch}
LENGTHS = (10, 25, 50, 100)

print(f"share called a trend at 95%, {TRIALS} series each, lengths {LENGTHS}")
for name, make in SERIES.items():
    cells = []
    for tname, test in TESTS.items():
        rates = [sum(abs(test(make(n))) >= 1.96 for _ in range(TRIALS)) / TRIALS for n in LENGTHS]
        cells.append(f"{tname} " + "/".join(f"{r:.2f}" for r in rates))
    print(f"{name:18} " + "  ".join(cells))
