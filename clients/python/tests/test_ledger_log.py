"""The transparency log against a live service: a job's receipt verifies with the key the
service serves (here and with the independent scripts/receipt_verifier.py), and a witness
follows a dataset's log across jobs and refuses a saved checkpoint that was edited."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import privpca

VERIFIER = Path(__file__).resolve().parents[3] / "scripts" / "receipt_verifier.py"


def flip(b64: str, at: int) -> str:
    data = bytearray(base64.b64decode(b64))
    data[at % len(data)] ^= 1
    return base64.b64encode(bytes(data)).decode()


def private_dataset(client, make_rows, seed: int, rho: float = 1.0) -> privpca.Dataset:
    return client.create_dataset(make_rows(300, 4, seed), name=f"log-{seed}", row_norm_bound=1.0, budget=rho)


def run_job(client, dataset_id: str, rho: float) -> privpca.Job:
    job = client.submit_job(dataset_id, "analyze_gauss", {"k": 1}, rho=rho)
    client.wait(job.id, timeout=120)
    return client.get_job(job.id)


def test_a_jobs_receipt_verifies_with_the_services_key(client, make_rows, tmp_path):
    ds = private_dataset(client, make_rows, 51)
    job = run_job(client, ds.id, 0.05)
    assert job.receipt is not None, "a job's view carries its receipt"
    key = client.ledger_key()
    verified = job.receipt.verify(key)
    assert verified.origin.endswith(f"/datasets/{ds.id}")
    assert (verified.kind, verified.job_id) == ("charge", job.id)
    assert verified.event["dataset"] == ds.id
    assert verified.event["amount"]["rho"] == pytest.approx(0.05)
    assert job.receipt.verify(key, origin=verified.origin).leaf_index == verified.leaf_index
    assert job.receipt.to_json() == job.raw["receipt"]

    # The independent verifier, written from the specifications alone, agrees.
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(job.receipt.to_json()))
    checked = subprocess.run(
        [sys.executable, str(VERIFIER), "receipt", "--key", key, "--origin", verified.origin, str(path)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr

    # One changed byte in the leaf, in a proof hash or in the signature: refused.
    raw = job.receipt.to_json()
    text, line = raw["checkpoint"].rsplit("\n\n", 1)
    head, signature = line.rstrip("\n").rsplit(" ", 1)
    forgeries = [
        {**raw, "leaf": flip(raw["leaf"], 10)},
        {**raw, "checkpoint": f"{text}\n\n{head} {flip(signature, 20)}\n"},
    ]
    forgeries += [
        {**raw, "inclusion_proof": [flip(h, 3) if j == i else h for j, h in enumerate(raw["inclusion_proof"])]}
        for i in range(len(raw["inclusion_proof"]))
    ]
    assert raw["inclusion_proof"], "the dataset's log opens with its budget: the charge has a sibling"
    for forged in forgeries:
        with pytest.raises(privpca.ReceiptError):
            privpca.Receipt.from_json(forged).verify(key)


def test_job_results_carry_receipts_when_the_service_adds_them(client, make_rows):
    ds = private_dataset(client, make_rows, 52)
    job = run_job(client, ds.id, 0.05)
    result = client.result(job.id)
    if result.receipt is None:
        pytest.skip("this service puts no receipt on GET /v1/jobs/{id}/result yet")
    verified = result.receipt.verify(client.ledger_key())
    assert (verified.kind, verified.job_id) == ("charge", job.id)


def test_a_witness_follows_the_log_across_jobs(client, make_rows, tmp_path, base_url):
    state = tmp_path / "witness.json"
    ds = private_dataset(client, make_rows, 53)
    run_job(client, ds.id, 0.05)
    first = client.witness(ds.id, state)
    assert first.first_visit and first.previous_size is None
    assert first.origin.endswith(f"/datasets/{ds.id}")
    assert first.size == 2, "the budget, then the charge"

    job = run_job(client, ds.id, 0.05)
    second = client.witness(ds.id, state)
    assert (second.previous_size, second.size) == (2, 3)
    stored = json.loads(state.read_text())
    assert stored["services"][base_url]["verifier_key"] == client.ledger_key()
    assert stored["services"][base_url]["logs"][f"datasets/{ds.id}"] == second.checkpoint
    # The saved head is the one the job's receipt was proved in (or an older one).
    assert job.receipt is not None and job.receipt.verify(client.ledger_key()).size == 3
    same = client.witness(ds.id, state)
    assert (same.previous_size, same.size, same.root) == (3, 3, second.root)

    # A fresh client (another process) trusts the pinned key, and follows on.
    with privpca.Client(client.base_url, client._api_key) as other:
        run_job(other, ds.id, 0.05)
        assert other.witness(ds.id, state).previous_size == 3


def test_a_tampered_saved_checkpoint_makes_the_witness_raise(client, make_rows, tmp_path, base_url):
    state = tmp_path / "witness.json"
    ds = private_dataset(client, make_rows, 54)
    run_job(client, ds.id, 0.05)
    client.witness(ds.id, state)
    run_job(client, ds.id, 0.05)

    stored = json.loads(state.read_text())
    logs = stored["services"][base_url]["logs"]
    lines = logs[f"datasets/{ds.id}"].split("\n")
    lines[2] = flip(lines[2], 0)  # the stored root
    logs[f"datasets/{ds.id}"] = "\n".join(lines)
    state.write_text(json.dumps(stored))
    before = state.read_text()
    with pytest.raises(privpca.ReceiptError, match="does not verify with the pinned key"):
        client.witness(ds.id, state)
    assert state.read_text() == before, "nothing is saved after a failure"


def test_another_datasets_checkpoint_saved_for_this_one_is_a_rewritten_log(client, make_rows, tmp_path, base_url):
    state = tmp_path / "witness.json"
    a = private_dataset(client, make_rows, 55)
    b = private_dataset(client, make_rows, 56)
    run_job(client, a.id, 0.05)
    client.witness(a.id, state)
    stored = json.loads(state.read_text())
    logs = stored["services"][base_url]["logs"]
    logs[f"datasets/{b.id}"] = logs[f"datasets/{a.id}"]
    state.write_text(json.dumps(stored))
    with pytest.raises(privpca.LogRewrittenError, match="origin changed"):
        client.witness(b.id, state)


def test_witness_study(client, tmp_path):
    created = client.create_study(
        name="witnessed",
        algorithm="federated_power",
        n_features=3,
        sites=["north", "south"],
        row_norm_bound=1.0,
        rho=0.1,
        params={"k": 1},
        join_timeout_seconds=600,
    )
    state = tmp_path / "witness.json"
    try:
        try:
            seen = client.witness_study(created.id, state)
        except privpca.NotFound as missing:
            if "route" in missing.detail:
                pytest.skip("this service has no /v1/studies/{id}/ledger/ endpoints yet")
            raise
        assert seen.origin.endswith(f"/studies/{created.id}") and seen.first_visit
        assert client.witness_study(created.id, state).previous_size == seen.size
    finally:
        client.cancel_study(created.id)


def test_a_finished_studys_result_receipt_and_its_log(client, make_rows, tmp_path, base_url, api_key):
    """Two real `privpca site` processes run a study; its result's receipt verifies and a
    witness follows the study's log from before the run to after it."""
    binary = os.environ.get("PRIVPCA_BIN")
    if not binary:
        pytest.skip("PRIVPCA_BIN (the privpca binary, for `privpca site`) is not set: run scripts/python-client-test.sh")
    created = client.create_study(
        name="receipted",
        algorithm="federated_power",
        n_features=3,
        sites=["north", "south"],
        row_norm_bound=1.0,
        rho=0.2,
        params={"k": 1, "iterations": 5},
        threshold=2,
        join_timeout_seconds=120,
        round_timeout_seconds=60,
    )
    state = tmp_path / "witness.json"
    try:
        before = client.witness_study(created.id, state)
    except privpca.NotFound as missing:
        client.cancel_study(created.id)
        if "route" in missing.detail:
            pytest.skip("this service has no /v1/studies/{id}/ledger/ endpoints yet")
        raise
    sites = []
    for i, (name, token) in enumerate(sorted(created.tokens.items())):
        data = tmp_path / f"{name}.csv"
        data.write_text("\n".join(",".join(f"{v:.6f}" for v in row) for row in make_rows(400, 3, 60 + i)) + "\n")
        command = [binary, "site", "--server", base_url, "--token", token, "--budget-rho", "1",
                   "--data", str(data), "--ledger", str(tmp_path / f"{name}-ledger.json")]
        sites.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for site in sites:
        _, err = site.communicate(timeout=180)
        assert site.returncode == 0, err[-2000:]
    client.wait_study(created.id, timeout=120)

    result = client.study_result(created.id)
    if result.receipt is None:
        pytest.skip("this service puts no receipt on GET /v1/studies/{id}/result yet")
    key = client.ledger_key()
    verified = result.receipt.verify(key)
    assert verified.origin.endswith(f"/studies/{created.id}")
    assert (verified.kind, verified.event.get("study")) == ("charge", created.id)
    assert verified.event["amount"]["rho"] == pytest.approx(0.2)
    forged = {**result.receipt.to_json(), "leaf": flip(result.receipt.to_json()["leaf"], 10)}
    with pytest.raises(privpca.ReceiptError):
        privpca.Receipt.from_json(forged).verify(key)

    after = client.witness_study(created.id, state)
    assert after.previous_size == before.size and after.size >= verified.size > before.size
