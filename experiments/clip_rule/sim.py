# Calibration simulator for clip:"auto" (analyze_gauss + noisy quantile search), numpy only.
import json, sys, numpy as np
from scipy.stats import norm
from scipy.optimize import brentq
D = 1e-5
def rho_of(eps):
    def delta(rho):
        mu = np.sqrt(2*rho)
        return norm.cdf(-eps/mu + mu/2) - np.exp(eps)*norm.cdf(-eps/mu - mu/2) - D
    return brentq(delta, 1e-8, 100)
def search(norms, beta, q, rho_q, rng, T=8, L=8.0):
    sd = np.sqrt(T/(2*rho_q)); lo, hi = -L, 0.0; n = len(norms)
    for _ in range(T):
        mid = (lo+hi)/2; c = beta*2**mid
        s = (norms <= c).sum() - q*n + rng.normal(0, sd)
        if s > 0: hi = mid
        else: lo = mid
    return beta*2**hi
def run(X, sigma, topk, beta, k, rho, q, share, rng):
    n, d = X.shape
    norms = np.linalg.norm(X, axis=1)
    if q is None:
        c, Xc, ra = beta, X, rho
    else:
        c = search(norms, beta, q, share*rho, rng)
        Xc = X * np.minimum(1, c/np.maximum(norms, 1e-300))[:, None]
        ra = (1-share)*rho
    A = Xc.T @ Xc
    E = rng.normal(0, c*c/np.sqrt(ra), (d, d)); E = np.triu(E); E = E + np.triu(E, 1).T
    w, V = np.linalg.eigh(A + E)
    Q = V[:, np.argsort(w)[::-1][:k]]
    return np.trace(Q.T @ sigma @ Q)/topk
def synth(n, d, spikes, bg, amp, seed):
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.normal(size=(d, len(spikes))))[0]
    z = amp(rng, (n, len(spikes)))
    X = (z*np.sqrt(spikes)) @ U.T + bg*rng.normal(size=(n, d))
    return X
def datasets():
    out = {}
    for name in ["iris", "wine", "breast_cancer", "digits", "diabetes"]:
        out[name] = np.loadtxt(f"data/real/{name}.csv", delimiter=",")
    g = lambda r, s: r.normal(size=s)
    t3 = lambda r, s: r.standard_t(3, size=s)
    for n in [2000, 20000, 100000]:
        out[f"gauss_n{n}"] = synth(n, 30, np.array([16., 9, 4]), 0.3, g, n)
    out["t3_n20000"] = synth(20000, 30, np.array([16., 9, 4]), 0.3, t3, 7)
    # a heavy-tailed "real" stand-in: log-normal row scales on a spiked direction set
    r = np.random.default_rng(3); X = synth(50000, 20, np.array([9., 4, 2, 1]), 0.5, g, 9)
    out["lognorm_n50000"] = X * np.exp(0.5*r.normal(size=(50000, 1)))
    return out
if __name__ == "__main__":
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    qs = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, None]
    res = []
    for name, X in datasets().items():
        n, d = X.shape
        sigma = X.T @ X / n
        ev = np.sort(np.linalg.eigvalsh(sigma))[::-1]
        beta = np.linalg.norm(X, axis=1).max()*(1+1e-12)
        for k in [2, 3, 5]:
            if k >= d: continue
            for eps in [0.5, 1, 2]:
                rho = rho_of(eps)
                row = {"dataset": name, "n": n, "d": d, "k": k, "eps": eps, "rho": rho, "vals": {}}
                for q in qs:
                    rng = np.random.default_rng(1000 + int(100*(q or 1)))
                    v = [run(X, sigma, ev[:k].sum(), beta, k, rho, q, 0.1, rng) for _ in range(reps)]
                    row["vals"][str(q)] = float(np.mean(v))
                res.append(row)
                print(name, k, eps, {a: round(b, 3) for a, b in row["vals"].items()}, flush=True)
    json.dump(res, open("experiments/clip_rule/sim.json", "w"))
