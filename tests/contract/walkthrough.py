"""The walk-through through the SDK generated from openapi/openapi.json: create a dataset,
upload a .npy file, submit a job, poll it, fetch the basis and check it.

Usage: PYTHONPATH=<dir holding the generated `sdk` package> walkthrough.py <base url> <api key>
"""

import math
import random
import struct
import sys
import time

from sdk import AuthenticatedClient
from sdk.api.datasets import create_dataset, get_dataset, upload_dataset_data
from sdk.api.jobs import get_job, get_job_result, submit_job
from sdk.models import (
    BudgetEpsilonDelta,
    CreateDataset,
    DatasetKind,
    JobStatus,
    PrivacyRho,
    Relation,
    SubmitJob,
    SubmitJobAlgorithm,
    SubmitJobParams,
)
from sdk.types import File

BASE, KEY = sys.argv[1], sys.argv[2]
N_SAMPLES, N_FEATURES, K = 2000, 6, 2


def npy(rows):
    """A C-order float64 .npy file holding `rows` (version 1.0 header, padded to 64 bytes)."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), len(rows[0]))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    body = b"".join(struct.pack("<%dd" % len(row), *row) for row in rows)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + body


def expect(response, status):
    if response.status_code != status or response.parsed is None:
        sys.exit(f"expected {status}, got {response.status_code}: {response.content[:500]!r}")
    return response.parsed


# Rows with most of their variance along two directions, inside the unit ball.
rng = random.Random(7)
rows = []
for _ in range(N_SAMPLES):
    a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
    x = [0.6 * a, 0.6 * a, 0.3 * b, -0.3 * b, 0.05 * rng.uniform(-1, 1), 0.05 * rng.uniform(-1, 1)]
    rows.append(x)

client = AuthenticatedClient(base_url=BASE, token=KEY, raise_on_unexpected_status=False)

dataset = expect(
    create_dataset.sync_detailed(
        client=client,
        body=CreateDataset(
            name="sdk walk-through",
            kind=DatasetKind.RECORDS,
            relation=Relation.REPLACE_ONE,
            row_norm_bound=1.0,
            budget=BudgetEpsilonDelta(epsilon=2.0, delta=1e-6),
        ),
    ),
    201,
)
print("created dataset", dataset.id, dataset.status)

uploaded = expect(
    upload_dataset_data.sync_detailed(
        id=dataset.id, client=client, body=File(payload=npy(rows), file_name="x.npy")
    ),
    200,
)
assert (uploaded.n_features, uploaded.n_samples) == (N_FEATURES, N_SAMPLES), uploaded
assert uploaded.status.value == "ready", uploaded.status
print("uploaded", uploaded.n_samples, "x", uploaded.n_features)

job = expect(
    submit_job.sync_detailed(
        client=client,
        body=SubmitJob(
            dataset_id=dataset.id,
            algorithm=SubmitJobAlgorithm.NOISY_POWER,
            params=SubmitJobParams.from_dict({"k": K}),
            privacy=PrivacyRho(rho=0.05),
        ),
    ),
    202,
)
print("submitted job", job.id, job.status)

deadline = time.monotonic() + 60
while True:
    job = expect(get_job.sync_detailed(id=job.id, client=client), 200)
    if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
        break
    if time.monotonic() > deadline:
        sys.exit(f"job still {job.status} after 60 s")
    time.sleep(0.1)
assert job.status == JobStatus.SUCCEEDED, (job.status, job.error)

result = expect(get_job_result.sync_detailed(id=job.id, client=client), 200)
basis = result.basis
assert (result.n_features, result.n_components) == (N_FEATURES, K), result
assert len(basis) == K and all(len(column) == N_FEATURES for column in basis), basis
for i in range(K):
    for j in range(K):
        dot = sum(a * b for a, b in zip(basis[i], basis[j]))
        assert math.isclose(dot, 1.0 if i == j else 0.0, abs_tol=1e-9), (i, j, dot)
# The leading component lies in the high-variance plane of the first four features.
energy = sum(v * v for v in basis[0][:4])
assert energy > 0.9, basis[0]

spent = expect(get_dataset.sync_detailed(id=dataset.id, client=client), 200)
print("basis", K, "orthonormal columns of", N_FEATURES, "; remaining ρ", spent.budget.remaining.rho)
print("walk-through ok")
