import json, numpy as np
rows = json.load(open("experiments/clip_rule/sim.json"))
qs = [0.5,0.6,0.7,0.8,0.9,0.95,0.98,0.99]
def choose(r, K, mintail=0.02):
    tail = K*np.sqrt(r["k"])*np.sqrt(r["d"])/(r["n"]*np.sqrt(r["rho"]))
    if tail < mintail: return "None"
    sd = np.sqrt(8/(2*0.1*r["rho"])); tail = min(max(tail, 3*sd/r["n"]), 0.5)
    q = 1-tail
    return str(min(qs, key=lambda x: abs(x-q)))
def regret(rs, K): return np.mean([max(r["vals"].values()) - r["vals"][choose(r,K)] for r in rs])
Ks = [1,2,5,10,20,35,50,75,100,200,500]
names = sorted(set(r["dataset"] for r in rows))
print("all:", {K: round(regret(rows,K),4) for K in Ks})
tot=[]
for h in names:
    tr=[r for r in rows if r["dataset"]!=h]; te=[r for r in rows if r["dataset"]==h]
    K=min(Ks,key=lambda K: regret(tr,K)); tot.append(regret(te,K))
    print(h, "K*", K, "held-out regret", round(regret(te,K),4), "median regret", round(np.mean([max(r['vals'].values())-r['vals']['0.5'] for r in te]),4), "noclip regret", round(np.mean([max(r['vals'].values())-r['vals']['None'] for r in te]),4))
print("LOO mean regret", np.mean(tot))
rule = [r["vals"][choose(r, 35)] for r in rows]
none = [r["vals"]["None"] for r in rows]; med = [r["vals"]["0.5"] for r in rows]
d = np.array(rule) - np.array(none)
print(f"K=35 over {len(rows)} cells: rule {np.mean(rule):.3f}, median {np.mean(med):.3f}, no clip {np.mean(none):.3f}; rule - no clip min {d.min():+.3f} at {rows[int(d.argmin())]['dataset']} k={rows[int(d.argmin())]['k']} eps={rows[int(d.argmin())]['eps']}")
