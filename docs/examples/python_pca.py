"""Private PCA of the wine data from Python, against a running privpca service.

    pip install "./clients/python[examples]"      # scikit-learn, pandas, matplotlib
    python docs/examples/python_pca.py "$BASE" "$KEY" docs/img/python_pca.png

The wine recognition data (178 wines × 13 chemical measurements, three cultivars) ships inside
scikit-learn as a CSV. It is fitted twice: exactly, as a public dataset (the reference), and
privately with zCDP ρ = 0.5, uploaded by `PrivatePCA.fit(X)` as a private dataset whose budget
is that ρ. The figure shows the eigenvalues each fit released and both 2-D projections. The
dataset the private fit uploaded is deleted at the end (its ledger stays readable).
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_wine  # noqa: E402

import privpca  # noqa: E402

RHO = 0.5
BOUND = 5.0  # rows are clipped to this L2 norm on upload
K = 4


def main(base_url: str, api_key: str, out: str) -> None:
    wine = load_wine(as_frame=True)
    frame = wine.data
    # Standardised columns. A real deployment takes the scales from public knowledge of the
    # measurements; here they come from the data, as the example is about the API.
    X = (frame - frame.mean()) / frame.std()
    client = privpca.Client(base_url, api_key)

    public = client.create_dataset(X, name="wine (public copy)", row_norm_bound=BOUND, public=True)
    exact = privpca.PrivatePCA(K, algorithm="exact", client=client, dataset=public.id).fit(X)

    private = privpca.PrivatePCA(
        K,
        algorithm="noisy_power",
        rho=RHO,
        client=client,
        row_norm_bound=BOUND,
        params={"with_eigenvalues": True},
        verbose=True,
    ).fit(X)
    print(f"private fit: uploaded as dataset {private.dataset_id_} with a budget of ρ = {RHO}")
    overlap = np.linalg.svd(exact.components_[:2] @ private.components_[:2].T, compute_uv=False)
    print(f"private fit: job {private.job_id_}, cost ρ = {private.cost_.rho:g} (ε = {private.cost_.epsilon:.3g} at δ = {private.cost_.epsilon_at_delta:g})")
    print(f"cosines of the principal angles between the exact and private 2-D subspaces: {np.round(overlap, 4)}")

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    ticks = np.arange(1, K + 1)
    axes[0].bar(ticks - 0.2, exact.explained_variance_, width=0.4, label="exact (public copy)")
    axes[0].bar(ticks + 0.2, private.explained_variance_, width=0.4, label=f"private, ρ = {RHO}")
    axes[0].set(title="Explained variance (eigenvalues of XᵀX)", xlabel="component", xticks=ticks)
    axes[0].legend()
    for ax, model, title in ((axes[1], exact, "exact"), (axes[2], private, f"private, ρ = {RHO}")):
        Z = model.transform(X)
        for cultivar in np.unique(wine.target):
            rows = wine.target == cultivar
            ax.scatter(Z[rows, 0], Z[rows, 1], s=12, label=wine.target_names[cultivar])
        ax.set(title=f"Wine projected on 2 components ({title})", xlabel="component 1", ylabel="component 2")
        ax.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    print(f"wrote {out}")
    private.delete()  # the uploaded copy; the components stay usable, the ledger readable
    client.delete_dataset(public.id)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
