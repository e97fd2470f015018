"""The client against a live service: datasets, jobs, results, the ledger, plan, studies and
the problem documents as typed exceptions."""

from __future__ import annotations

import os
import uuid

import httpx
import numpy as np
import pytest

import privpca


def test_create_dataset_uploads_npy_and_returns_budget_state(client, make_rows):
    X = make_rows(500, 4, 1)
    ds = client.create_dataset(X, name="client", row_norm_bound=1.0, budget=(1.0, 1e-6))
    assert ds.status == "ready"
    assert (ds.n_samples, ds.n_features) == (500, 4)
    assert ds.budget is not None and ds.budget.spent.rho == 0.0
    assert ds.budget.stated == {"epsilon": 1.0, "delta": 1e-6}
    assert client.get_dataset(ds.id) == ds
    assert ds.id in [d.id for d in client.list_datasets()]


def test_job_result_ledger_and_plan(client, make_rows):
    X = make_rows(1000, 5, 2)
    ds = client.create_dataset(X, name="jobs", row_norm_bound=1.0, budget=0.1)

    plan = client.plan(dataset_id=ds.id, algorithm="noisy_power", params={"k": 2}, rho=0.03)
    assert plan.cost is not None and plan.cost.rho == pytest.approx(0.03)
    assert plan.fits_budget is True
    assert client.plan(dataset_id=ds.id, algorithm="noisy_power", params={"k": 2}, rho=0.2).fits_budget is False

    job = client.submit_job(ds.id, "noisy_power", {"k": 2}, rho=0.03)
    assert job.dataset_id == ds.id and job.algorithm == "noisy_power"
    done = client.wait(job.id, timeout=120)
    assert done.status == "succeeded" and done.finished
    result = client.result(job.id)
    assert result.basis.shape == (5, 2) and result.components.shape == (2, 5)
    np.testing.assert_allclose(result.basis.T @ result.basis, np.eye(2), atol=1e-9)
    assert job.id in [j.id for j in client.list_jobs(ds.id)]

    ledger = client.ledger(ds.id)
    assert [(e.entry, e.job_id) for e in ledger.entries] == [("charge", job.id)]
    assert ledger.entries[0].rho == pytest.approx(0.03)
    assert ledger.budget is not None and ledger.budget.remaining.rho == pytest.approx(0.07)


def test_run_and_wait_shows_a_progress_bar(client, make_rows, capsys):
    ds = client.create_dataset(make_rows(300, 4, 3), name="progress", row_norm_bound=1.0, public=True)
    result = client.run(ds.id, "noisy_power", {"k": 2, "iterations": 5}, progress=True, timeout=120)
    assert result.basis.shape == (4, 2)
    assert f"job {result.job_id[:8]}" in capsys.readouterr().err


def test_budget_exhaustion_raises_budget_exceeded_with_both_amounts(client, make_rows):
    ds = client.create_dataset(make_rows(400, 3, 4), name="budget", row_norm_bound=1.0, budget=0.01)
    with pytest.raises(privpca.BudgetExceeded) as refused:
        client.submit_job(ds.id, "noisy_power", {"k": 1}, rho=0.02)
    error = refused.value
    assert (error.remaining, error.requested) == (pytest.approx(0.01), pytest.approx(0.02))
    assert error.status == 409 and error.type == "urn:privpca:problem:over-budget"
    assert error.dataset_id == ds.id
    assert client.ledger(ds.id).entries == []


def test_not_found_and_validation_error_carry_the_problem(client):
    with pytest.raises(privpca.NotFound) as missing:
        client.get_dataset(str(uuid.uuid4()))
    assert missing.value.status == 404
    # Refused by the client before any request, in the service's terms.
    with pytest.raises(privpca.InvalidInput) as local:
        client.create_dataset(name="bad", row_norm_bound=-1.0, budget=1.0)
    assert local.value.field == "row_norm_bound" and isinstance(local.value, ValueError)
    assert client.list_datasets() == []
    # Refused by the service: a 422 whose field names the parameter.
    ds = client.create_dataset(np.eye(3) * 0.5, name="ok", row_norm_bound=1.0, budget=1.0)
    with pytest.raises(privpca.ValidationError) as invalid:
        client.submit_job(ds.id, "noisy_power", {"k": 1, "iterations": -3}, rho=0.1)
    assert invalid.value.status == 422 and isinstance(invalid.value, ValueError)
    assert invalid.value.field is not None and "iterations" in invalid.value.field
    with pytest.raises(privpca.Unauthorized):
        privpca.Client(client.base_url, "not-a-key").list_datasets()


def test_admin_rotates_and_revokes_a_tenant_key(base_url):
    with privpca.Client(base_url, os.environ["PRIVPCA_ADMIN_KEY"]) as admin:
        tenant = admin.create_tenant(f"pytest-{uuid.uuid4().hex[:8]}")
        rotated = admin.rotate_tenant_key(tenant["id"])
        assert rotated["tenant_id"] == tenant["id"] and rotated["api_key"] != tenant["api_key"]
        with pytest.raises(privpca.Unauthorized):
            privpca.Client(base_url, tenant["api_key"]).list_datasets()
        assert privpca.Client(base_url, rotated["api_key"]).list_datasets() == []
        admin.revoke_tenant_key(tenant["id"])
        with pytest.raises(privpca.Unauthorized):
            privpca.Client(base_url, rotated["api_key"]).list_datasets()
        with pytest.raises(privpca.NotFound):
            admin.revoke_tenant_key(str(uuid.uuid4()))


def test_cancel_and_delete(client, make_rows):
    ds = client.create_dataset(make_rows(200, 3, 5), name="delete", row_norm_bound=1.0, budget=1.0)
    job = client.submit_job(ds.id, "noisy_power", {"k": 1}, rho=0.1)
    try:
        cancelled = client.cancel_job(job.id)
    except privpca.Conflict:  # it finished first
        assert client.get_job(job.id).status == "succeeded"
    else:
        assert cancelled.id == job.id
        assert cancelled.status == "cancelled" or cancelled.raw["cancel_requested"]
        try:
            client.wait(job.id, timeout=60)
        except privpca.JobFailed as failed:
            assert failed.job.status == "cancelled"
    deleted = client.delete_dataset(ds.id)
    assert deleted.status == "deleted"
    assert client.ledger(ds.id).dataset_id == ds.id


def test_studies(client):
    created = client.create_study(
        name="study",
        algorithm="federated_power",
        n_features=3,
        sites=["north", "south", "east"],
        row_norm_bound=1.0,
        rho=0.1,
        params={"k": 1},
        join_timeout_seconds=600,
    )
    assert set(created.tokens) == {"north", "south", "east"}
    study = client.get_study(created.id)
    assert study.status == "enrolling" and not study.finished
    assert created.id in [s.id for s in client.list_studies()]
    assert client.cancel_study(created.id).status == "cancelled"
    with pytest.raises(privpca.JobFailed):
        client.wait_study(created.id)


def test_algorithms_and_health(client):
    names = {a["name"] for a in client.algorithms()}
    assert {"exact", "noisy_power"} <= names
    assert client.health()["status"] == "ok"


def test_study_result_orientation(faked):
    # A succeeded study needs running sites (`privpca site`); its result's shape is checked on a
    # faked answer instead: k = 2 columns of d = 3 numbers.
    cost = {"rho": 0.1, "delta": 0.0, "epsilon": 1.9, "epsilon_at_delta": 1e-6}
    answer = {
        "study_id": "s", "n_features": 3, "n_components": 2, "basis": [[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]],
        "eigenvalues": [4.0, 1.0], "cost": cost, "survivors": ["north", "south"], "rounds": [],
    }
    client, seen = faked([httpx.Response(200, json=answer)])
    result = client.study_result("s")
    assert seen[0].url.path == "/v1/studies/s/result"
    np.testing.assert_array_equal(result.basis, [[1.0, 0.0], [0.0, 0.6], [0.0, 0.8]])
    np.testing.assert_array_equal(result.components[1], [0.0, 0.6, 0.8])
    assert result.survivors == ["north", "south"] and result.cost.rho == 0.1
    assert list(result.eigenvalues) == [4.0, 1.0]
