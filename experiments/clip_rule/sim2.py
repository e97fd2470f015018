import json, numpy as np, sys
sys.argv=[sys.argv[0]]
exec(open("experiments/clip_rule/sim.py").read().split('if __name__')[0])
def rare(n, d, seed, frac=0.1, amp=8.0):
    r = np.random.default_rng(seed)
    U = np.linalg.qr(r.normal(size=(d, 3)))[0]
    a = np.where(r.random(n) < frac, amp, 0.0) * r.choice([-1, 1], n)
    z = r.normal(size=(n, 2)) * np.sqrt([4., 3.])
    return np.outer(a, U[:, 0]) + z @ U[:, 1:].T + 0.3*r.normal(size=(n, d))
data = {f"rare_n{n}": rare(n, 20, n) for n in [2000, 20000, 200000]}
qs = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, None]
res = json.load(open("experiments/clip_rule/sim.json"))
res = [r for r in res if not r["dataset"].startswith("rare")]
for name, X in data.items():
    n, d = X.shape; sigma = X.T @ X / n
    ev = np.sort(np.linalg.eigvalsh(sigma))[::-1]; beta = np.linalg.norm(X, axis=1).max()*(1+1e-12)
    for k in [2, 3, 5]:
        for eps in [0.5, 1, 2]:
            rho = rho_of(eps); row = {"dataset": name, "n": n, "d": d, "k": k, "eps": eps, "rho": rho, "vals": {}}
            for q in qs:
                rng = np.random.default_rng(1000 + int(100*(q or 1)))
                row["vals"][str(q)] = float(np.mean([run(X, sigma, ev[:k].sum(), beta, k, rho, q, 0.1, rng) for _ in range(6)]))
            res.append(row); print(name, k, eps, {a: round(b, 3) for a, b in row["vals"].items()}, flush=True)
json.dump(res, open("experiments/clip_rule/sim.json", "w"))
