#!/usr/bin/env python3
"""How `-d auto` fares on this host's own intervals (issue 37): records
long fixed-length rr series while the host loses both CPUs 3 ms in every
30 (a SCHED_FIFO spinner per CPU, as tests/common `Stalls`), then replays
`-d auto`'s rule over windows cut from them at many offsets.

For each window (WINDOW intervals, 20 s at 0.2 s) it reports whether the
rule settled and when, and how far the settled mean is from the mean of
the whole recorded series, against the half-width it claimed: the share
of settled windows whose claim held ("coverage"). The rule is a port of
src/measure/stationary.rs (`judge`: Mann-Kendall on the intervals for the
warm-up, MSER cut, Mann-Kendall on batch means, Student's t over the
batch means, 99% / width 5%): keep the two in step.

    bench/auto_replay.py record [SECONDS=120] [RUNS=3]   (root: SCHED_FIFO)
    bench/auto_replay.py replay FILE.json...
    pip install numpy scipy

Traffic on loopback only; every spinner and run bounded in time.
"""
import json
import math
import multiprocessing as mp
import os
import subprocess
import sys
import time

import numpy as np
from scipy import stats

LR = os.environ.get("LR", "./target/release/linerate")
WINDOW = 100
MIN_INTERVALS = 5
MIN_BATCHES = 5


def spin(cpu, t0, on, every, limit):
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    nxt = t0
    while time.monotonic() < t0 + limit:
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        end = nxt + on
        while time.monotonic() < end:
            pass
        nxt += every


def record(seconds, runs):
    limit = runs * (seconds + 10)
    t0 = time.monotonic() + 0.05
    ps = [mp.Process(target=spin, args=(c, t0, 0.003, 0.030, limit), daemon=True)
          for c in range(os.cpu_count())]
    for p in ps:
        p.start()
    try:
        for i in range(runs):
            out = f"/tmp/auto-series-{i}.json"
            subprocess.run([LR, "run", "rr", "--cpus", "0", "--agent-cpus", "1", "-d", str(seconds),
                            "-i", "0.2", "--warmup", "0.2", "-q", "--json", out],
                           check=True, stdout=subprocess.DEVNULL, timeout=seconds + 60)
            print(out)
    finally:
        for p in ps:
            p.terminate()
            p.join()


def mk(x):
    x = np.asarray(x, float)
    n = len(x)
    if n < 3:
        return 0.0
    s = sum(np.sign(x[i + 1:] - x[i]).sum() for i in range(n - 1))
    var = n * (n - 1) * (2 * n + 5) / 18
    return 0.0 if s == 0 else (s - np.sign(s)) / math.sqrt(var)


def sen(x):
    n = len(x)
    if n < 2:
        return 0.0
    return float(np.median([(x[j] - x[i]) / (j - i) for i in range(n) for j in range(i + 1, n)]))


def lag1(x):
    x = np.asarray(x, float)
    if len(x) < 3:
        return 0.0
    d = x - x.mean()
    v = (d * d).sum()
    return 0.0 if v <= 0 else (d[:-1] * d[1:]).sum() / v


def batch_means(x, m):
    m = max(m, 1)
    return np.asarray(x[len(x) % m:], float).reshape(-1, m).mean(axis=1)


def batch_len(x):
    n = len(x)
    if n < 2 * MIN_BATCHES:
        return 1
    d = np.asarray(x, float) - sen(x) * np.arange(n)
    most = n // MIN_BATCHES
    return next((m for m in range(1, most + 1) if lag1(batch_means(d, m)) < 0.2), most)


def half_width_pct(x, level=99.0):
    b = batch_means(x, batch_len(x))
    if len(b) < 2:
        return math.inf
    t = stats.t.ppf(1 - (1 - level / 100) / 2, len(b) - 1)
    return 100 * t * b.std(ddof=1) / math.sqrt(len(b)) / abs(np.mean(x))


def mser(x):
    best = (math.inf, 0)
    for k in range(len(x) // 2 + 1):
        t = np.asarray(x[k:], float)
        if len(t) < 2:
            break
        score = ((t - t.mean()) ** 2).sum() / len(t) ** 2
        if score < best[0] * (1 - 1e-9):
            best = (score, k)
    return best[1]


def judge(x, width=5.0):
    """(done, warm-up, half-width %) as src/measure/stationary.rs judges."""
    if len(x) < MIN_INTERVALS:
        return False, 0, math.inf
    k = 0 if abs(mk(x)) < 1.96 else mser(x)
    tail = x[k:]
    stationary = len(tail) >= MIN_INTERVALS and abs(mk(batch_means(tail, batch_len(tail)))) < 1.96
    if not stationary:
        k = 0
    h = half_width_pct(x[k:])
    return stationary and h <= width / 2, k, h


def replay(files, step=5):
    tried = settled = covered = 0
    ends, errs = [], []
    for f in files:
        x = [i["transactions_per_s"] for i in json.load(open(f))["iterations"][0]["intervals"]]
        whole = np.mean(x)
        for o in range(0, len(x) - WINDOW + 1, step):
            w = x[o:o + WINDOW]
            tried += 1
            for m in range(MIN_INTERVALS, len(w) + 1):
                done, k, h = judge(w[:m])
                if done:
                    settled += 1
                    ends.append(m)
                    err = 100 * abs(np.mean(w[k:m]) - whole) / whole
                    errs.append(err)
                    covered += err <= h
                    break
    print(f"windows {tried}, settled {settled} ({100 * settled / tried:.1f}%), "
          f"after {np.median(ends):.0f} intervals (median), p90 {np.percentile(ends, 90):.0f}")
    print(f"settled mean vs the whole series' mean: p50 {np.median(errs):.2f}%, "
          f"p90 {np.percentile(errs, 90):.2f}%, claim held in {100 * covered / settled:.0f}%")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "record":
        record(int(sys.argv[2]) if len(sys.argv) > 2 else 120, int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    elif len(sys.argv) > 2 and sys.argv[1] == "replay":
        replay(sys.argv[2:])
    else:
        sys.exit(__doc__)
