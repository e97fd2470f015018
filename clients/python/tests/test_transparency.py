"""Receipts, checkpoints and the witness without a service: the committed fixtures of
crates/core/src/transparency (tests/fixtures/transparency, also checked by scripts/receipt_verifier.py),
and logs built and signed here with a test key, served through a fake wire."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

import privpca
from privpca.transparency import EMPTY_ROOT, leaf_hash, node_hash, verify_consistency, verify_inclusion

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "transparency"
FIXTURE_KEY = (FIXTURES / "verifier_key.txt").read_text().strip()
FIXTURE_DATASET = "0b7c6d2e-1f0a-4c3b-9a8d-5e6f7a8b9c0d"
BASE = "http://test.invalid"


def fixture(name: str) -> Any:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else text


def flip(b64: str, at: int) -> str:
    data = bytearray(base64.b64decode(b64))
    data[at % len(data)] ^= 1
    return base64.b64encode(bytes(data)).decode()


# -- a log built here: the tree by RFC 6962's recursive definitions, notes signed here --------


def mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while 2 * k < len(hashes):
        k *= 2
    return node_hash(mth(hashes[:k]), mth(hashes[k:]))


def path(m: int, hashes: list[bytes]) -> list[bytes]:
    if len(hashes) <= 1:
        return []
    k = 1
    while 2 * k < len(hashes):
        k *= 2
    if m < k:
        return path(m, hashes[:k]) + [mth(hashes[k:])]
    return path(m - k, hashes[k:]) + [mth(hashes[:k])]


def subproof(m: int, hashes: list[bytes], complete: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if complete else [mth(hashes)]
    k = 1
    while 2 * k < n:
        k *= 2
    if m <= k:
        return subproof(m, hashes[:k], complete) + [mth(hashes[k:])]
    return subproof(m - k, hashes[k:], False) + [mth(hashes[:k])]


class Signer:
    """An Ed25519 note signer with a C2SP key name, as the service's."""

    def __init__(self, name: str = "privpca.test/key-1") -> None:
        self.name = name
        self.key = Ed25519PrivateKey.generate()
        public = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
        encoded = base64.b64encode(b"\x01" + public).decode()
        self.verifier_key = f"{name}+{self.key_id.hex()}+{encoded}"

    def sign(self, text: str) -> str:
        signature = base64.b64encode(self.key_id + self.key.sign(text.encode())).decode()
        return f"{text}\n\u2014 {self.name} {signature}\n"


class Log:
    """A log of JSON events with its checkpoints and proofs."""

    def __init__(self, origin: str, signer: Signer, events: int = 0) -> None:
        self.origin, self.signer = origin, signer
        self.leaves: list[bytes] = []
        for i in range(events):
            self.append({"kind": "charge", "job": f"job-{i}"})

    def append(self, event: dict[str, Any]) -> None:
        self.leaves.append(json.dumps(event, sort_keys=True, separators=(",", ":")).encode())

    def hashes(self, n: int | None = None) -> list[bytes]:
        return [leaf_hash(leaf) for leaf in self.leaves[: len(self.leaves) if n is None else n]]

    def checkpoint(self, n: int | None = None) -> str:
        n = len(self.leaves) if n is None else n
        root = base64.b64encode(mth(self.hashes(n))).decode()
        return self.signer.sign(f"{self.origin}\n{n}\n{root}\n")

    def receipt(self, index: int) -> dict[str, Any]:
        return {
            "leaf": base64.b64encode(self.leaves[index]).decode(),
            "leaf_index": index,
            "inclusion_proof": [base64.b64encode(h).decode() for h in path(index, self.hashes())],
            "checkpoint": self.checkpoint(),
        }

    def consistency(self, m: int, n: int) -> list[str]:
        proof = subproof(m, self.hashes(n), True) if 0 < m < n else []
        return [base64.b64encode(h).decode() for h in proof]


class Service:
    """A fake wire serving logs (``datasets/<id>`` or ``studies/<id>`` → :class:`Log`), the
    verifier key, and any override answers; records the paths it was asked."""

    def __init__(self, signer: Signer, logs: dict[str, Log]) -> None:
        self.signer, self.logs = signer, logs
        self.seen: list[str] = []
        self.override: dict[str, httpx.Response] = {}

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.url.path)
        if request.url.path in self.override:
            return self.override[request.url.path]
        if request.url.path == "/v1/ledger-key":
            return httpx.Response(200, json={"verifier_key": self.signer.verifier_key})
        parts = request.url.path.split("/")  # "", "v1", kind, id, "ledger", what
        log = self.logs.get(f"{parts[2]}/{parts[3]}")
        if log is None or len(parts) != 6:
            return httpx.Response(404, json={"type": "urn:privpca:problem:not-found", "title": "Not found", "status": 404, "detail": "no such route"})
        if parts[5] == "checkpoint":
            return httpx.Response(200, json={"checkpoint": log.checkpoint()})
        query = parse_qs(request.url.query.decode())
        return httpx.Response(200, json={"proof": log.consistency(int(query["from"][0]), int(query["to"][0]))})

    def client(self) -> privpca.Client:
        return privpca.Client(BASE, "key", transport=httpx.MockTransport(self.handler))


DS = "6f1c0a52-3a3e-4c53-9d6e-0c1f2a3b4c5d"


@pytest.fixture
def served(tmp_path: Path) -> tuple[Service, Log, Path]:
    signer = Signer()
    log = Log(f"privpca.test/datasets/{DS}", signer, events=2)
    return Service(signer, {f"datasets/{DS}": log}), log, tmp_path / "witness.json"


# -- the tree's algorithms ------------------------------------------------------------------


def test_inclusion_and_consistency_proofs_of_every_tree_up_to_20_leaves():
    leaves = [leaf_hash(i.to_bytes(2, "big")) for i in range(20)]
    for n in range(1, 21):
        root = mth(leaves[:n])
        for m in range(n):
            verify_inclusion(m, n, leaves[m], path(m, leaves[:n]), root)
            with pytest.raises(privpca.ReceiptError):
                verify_inclusion(m, n, leaves[m], path(m, leaves[:n]) + [root], root)
            with pytest.raises(privpca.ReceiptError):
                verify_inclusion(m, n, leaf_hash(b"other"), path(m, leaves[:n]), root)
        for m in range(n + 1):
            proof = subproof(m, leaves[:n], True) if m > 0 else []
            verify_consistency(m, n, mth(leaves[:m]), root, proof)
            if 0 < m < n:
                wrong = bytes([proof[0][0] ^ 1]) + proof[0][1:]
                with pytest.raises(privpca.LogRewrittenError):
                    verify_consistency(m, n, mth(leaves[:m]), root, [wrong, *proof[1:]])
                with pytest.raises(privpca.LogRewrittenError):
                    verify_consistency(m, n, mth(leaves[1 : m + 1]), root, proof)


def test_the_certificate_transparency_test_tree_roots():
    # RFC 6962's reference tree (the roots of sizes 1, 2, 3 and 8 from the CT test data).
    leaves = [bytes.fromhex(x) for x in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]]
    roots = {
        1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    }
    for n, root in roots.items():
        assert mth([leaf_hash(x) for x in leaves[:n]]).hex() == root
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# -- receipts: the fixtures -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["receipt_0_at_3.json", "receipt_1.json", "receipt_6.json"])
def test_the_fixture_receipts_verify(name):
    raw = fixture(name)
    receipt = privpca.Receipt.from_json(raw)
    verified = receipt.verify(FIXTURE_KEY)
    assert verified.origin == f"privpca.example.org/datasets/{FIXTURE_DATASET}"
    assert verified.leaf_index == raw["leaf_index"]
    assert verified.event["dataset"] == FIXTURE_DATASET
    assert verified.event["format"] == "privpca/ledger-event/1"
    assert verified.size == (3 if name == "receipt_0_at_3.json" else 7)
    assert base64.b64encode(verified.root).decode() == raw["checkpoint"].split("\n")[2]
    assert verified.leaf == base64.b64decode(raw["leaf"])
    assert receipt.to_json() == raw
    # The leaf and hashes as bytes verify the same; so does the parsed key, with the origin.
    as_bytes = privpca.Receipt(
        leaf=base64.b64decode(raw["leaf"]),
        leaf_index=raw["leaf_index"],
        inclusion_proof=[base64.b64decode(h) for h in raw["inclusion_proof"]],
        checkpoint=raw["checkpoint"],
    )
    assert as_bytes.verify(privpca.VerifierKey.parse(FIXTURE_KEY), origin=verified.origin).event == verified.event
    assert as_bytes.to_json() == raw


def test_the_fixture_receipts_name_their_events():
    assert privpca.Receipt.from_json(fixture("receipt_0_at_3.json")).verify(FIXTURE_KEY).kind == "budget_set"
    charge = privpca.Receipt.from_json(fixture("receipt_1.json")).verify(FIXTURE_KEY)
    assert (charge.kind, charge.job_id) == ("charge", "00000000-0000-4000-8000-000000000001")
    assert charge.event["amount"]["rho_units"] == "100000000000"


def _tamper(raw: dict[str, Any], part: str) -> dict[str, Any]:
    raw = json.loads(json.dumps(raw))
    if part == "leaf":
        raw["leaf"] = flip(raw["leaf"], 10)
    elif part in ("proof0", "proof1", "proof2"):
        i = int(part[len("proof") :])
        raw["inclusion_proof"][i] = flip(raw["inclusion_proof"][i], 5)
    elif part == "signature":
        text, line = raw["checkpoint"].rsplit("\n\n", 1)
        head, sig = line.rstrip("\n").rsplit(" ", 1)
        raw["checkpoint"] = f"{text}\n\n{head} {flip(sig, 20)}\n"
    elif part == "key id":
        text, line = raw["checkpoint"].rsplit("\n\n", 1)
        head, sig = line.rstrip("\n").rsplit(" ", 1)
        raw["checkpoint"] = f"{text}\n\n{head} {flip(sig, 0)}\n"
    elif part == "origin":
        raw["checkpoint"] = raw["checkpoint"].replace("/datasets/", "/dataset5/", 1)
    elif part == "size":
        lines = raw["checkpoint"].split("\n")
        lines[1] = str(int(lines[1]) + 1)
        raw["checkpoint"] = "\n".join(lines)
    elif part == "root":
        lines = raw["checkpoint"].split("\n")
        lines[2] = flip(lines[2], 3)
        raw["checkpoint"] = "\n".join(lines)
    elif part == "index":
        raw["leaf_index"] += 1
    elif part == "proof dropped":
        raw["inclusion_proof"] = raw["inclusion_proof"][:-1]
    elif part == "proof extended":
        raw["inclusion_proof"] = raw["inclusion_proof"] + [raw["inclusion_proof"][0]]
    else:
        raise AssertionError(part)
    return raw


PARTS = ["leaf", "proof0", "proof1", "proof2", "signature", "key id", "origin", "size", "root", "index", "proof dropped", "proof extended"]


@pytest.mark.parametrize("part", PARTS)
def test_a_receipt_with_one_changed_byte_is_rejected(part):
    raw = fixture("receipt_1.json")
    with pytest.raises(privpca.ReceiptError) as refused:
        privpca.Receipt.from_json(_tamper(raw, part)).verify(FIXTURE_KEY)
    assert str(refused.value)


def test_the_reason_is_named():
    raw = fixture("receipt_1.json")

    def reason(part: str) -> str:
        with pytest.raises(privpca.ReceiptError) as refused:
            privpca.Receipt.from_json(_tamper(raw, part)).verify(FIXTURE_KEY)
        return str(refused.value)

    assert "inclusion proof does not lead" in reason("leaf")
    assert "inclusion proof does not lead" in reason("proof1")
    assert "does not verify" in reason("signature")
    assert "no signature by" in reason("key id")
    assert "too short" in reason("proof dropped")


def test_a_receipt_checked_with_another_key_or_for_another_log_is_rejected():
    receipt = privpca.Receipt.from_json(fixture("receipt_1.json"))
    with pytest.raises(privpca.ReceiptError, match="no signature by"):
        receipt.verify(Signer("privpca.example.org/key-1").verifier_key)
    with pytest.raises(privpca.ReceiptError, match="not 'privpca.example.org/datasets/other'"):
        receipt.verify(FIXTURE_KEY, origin="privpca.example.org/datasets/other")
    for bad in ["", "name+0000000+AQ==", FIXTURE_KEY.replace("+71aca78f+", "+71aca78e+"), FIXTURE_KEY[:-4]]:
        with pytest.raises(privpca.ReceiptError):
            receipt.verify(bad)


@pytest.mark.parametrize(
    "raw",
    [
        {"leaf": 1, "leaf_index": 0, "inclusion_proof": [], "checkpoint": ""},
        {"leaf": "", "leaf_index": "0", "inclusion_proof": [], "checkpoint": ""},
        {"leaf": "", "leaf_index": 0, "inclusion_proof": "", "checkpoint": ""},
        {"leaf": "", "leaf_index": True, "inclusion_proof": [], "checkpoint": ""},
        {"leaf_index": 0, "inclusion_proof": [], "checkpoint": ""},
    ],
)
def test_malformed_receipts_are_refused(raw):
    with pytest.raises(privpca.ReceiptError):
        privpca.Receipt.from_json(raw)


def test_a_job_view_and_a_result_carry_their_receipt():
    signer = Signer()
    log = Log(f"privpca.test/datasets/{DS}", signer, events=3)
    cost = {"rho": 0.1, "delta": 0.0, "epsilon": 1.0, "epsilon_at_delta": 1e-6}
    view = {"id": "job-1", "algorithm": "noisy_power", "status": "succeeded", "cost": cost, "progress": None, "error": None, "dataset_id": DS}
    job = privpca.Job.parse({**view, "receipt": log.receipt(1)})
    assert job.receipt is not None and job.receipt.verify(signer.verifier_key).job_id == "job-1"
    assert privpca.Job.parse(view).receipt is None
    # A malformed receipt does not stop the view from being read; verify refuses it.
    odd = privpca.Job.parse({**view, "receipt": {"leaf": 3}})
    assert odd.receipt is not None
    with pytest.raises(privpca.ReceiptError):
        odd.receipt.verify(signer.verifier_key)
    result = {"job_id": "job-1", "n_features": 2, "n_components": 1, "basis": [[1.0, 0.0]], "eigenvalues": None, "cost": cost}
    parsed = privpca.JobResult.parse({**result, "receipt": log.receipt(1)})
    assert parsed.receipt is not None and parsed.receipt.verify(signer.verifier_key).leaf_index == 1
    assert privpca.JobResult.parse(result).receipt is None
    study = {**result, "study_id": "s", "survivors": ["a"], "receipt": log.receipt(2)}
    assert privpca.StudyResult.parse(study).receipt.verify(signer.verifier_key).leaf_index == 2  # type: ignore[union-attr]


# -- the witness ----------------------------------------------------------------------------


def seed_state(path: Path, log: str, checkpoint: str, key: str) -> None:
    path.write_text(json.dumps({"format": "privpca-witness/1", "services": {BASE: {"verifier_key": key, "logs": {log: checkpoint}}}}))


def saved(path: Path, log: str) -> str:
    return str(json.loads(path.read_text())["services"][BASE]["logs"][log])


def fixture_service(checkpoint: str, proof: Any) -> Service:
    service = Service(Signer(), {})
    prefix = f"/v1/datasets/{FIXTURE_DATASET}/ledger"
    service.override[f"{prefix}/checkpoint"] = httpx.Response(200, json={"checkpoint": checkpoint})
    service.override[f"{prefix}/consistency"] = httpx.Response(200, json=proof)
    return service


def test_the_witness_accepts_the_fixtures_consistency_proof(tmp_path):
    state = tmp_path / "witness.json"
    log = f"datasets/{FIXTURE_DATASET}"
    seed_state(state, log, fixture("checkpoint_3.txt"), FIXTURE_KEY)
    service = fixture_service(fixture("checkpoint_7.txt"), fixture("consistency_3_7.json"))
    seen = service.client().witness(FIXTURE_DATASET, state)
    assert (seen.previous_size, seen.size, seen.first_visit) == (3, 7, False)
    assert seen.origin == f"privpca.example.org/{log}"
    assert saved(state, log) == fixture("checkpoint_7.txt")
    assert "/v1/ledger-key" not in service.seen, "the pinned key is used"


def test_the_witness_refuses_the_fixtures_with_a_changed_proof_or_a_smaller_log(tmp_path):
    state = tmp_path / "witness.json"
    log = f"datasets/{FIXTURE_DATASET}"
    seed_state(state, log, fixture("checkpoint_3.txt"), FIXTURE_KEY)
    before = state.read_text()
    proof = fixture("consistency_3_7.json")
    for i in range(len(proof["proof"])):
        changed = {"proof": [flip(h, 7) if j == i else h for j, h in enumerate(proof["proof"])]}
        with pytest.raises(privpca.LogRewrittenError, match="does not extend the checkpoint of size 3"):
            fixture_service(fixture("checkpoint_7.txt"), changed).client().witness(FIXTURE_DATASET, state)
    with pytest.raises(privpca.LogRewrittenError):
        fixture_service(fixture("checkpoint_7.txt"), {"proof": proof["proof"][:-1]}).client().witness(FIXTURE_DATASET, state)
    assert state.read_text() == before, "the saved checkpoint is kept"
    seed_state(state, log, fixture("checkpoint_7.txt"), FIXTURE_KEY)
    with pytest.raises(privpca.LogRewrittenError, match="shrank: size 3 now, 7"):
        fixture_service(fixture("checkpoint_3.txt"), {"proof": []}).client().witness(FIXTURE_DATASET, state)
    assert saved(state, log) == fixture("checkpoint_7.txt")


def test_first_use_pins_the_key_and_later_visits_check_consistency(served):
    service, log, state = served
    first = service.client().witness(DS, state)
    assert (first.previous_size, first.size, first.first_visit) == (None, 2, True)
    assert service.seen.count("/v1/ledger-key") == 1
    stored = json.loads(state.read_text())
    assert stored["services"][BASE]["verifier_key"] == service.signer.verifier_key
    assert saved(state, f"datasets/{DS}") == log.checkpoint()

    service.seen.clear()
    again = service.client().witness(DS, str(state))
    assert (again.previous_size, again.size) == (2, 2)
    assert service.seen == [f"/v1/datasets/{DS}/ledger/checkpoint"], "same size: no proof needed, the key is pinned"

    for n in (3, 4, 9):
        while len(log.leaves) < n:
            log.append({"kind": "charge", "job": f"job-{len(log.leaves)}"})
        seen = service.client().witness(DS, state)
        assert seen.size == n and seen.root == mth(log.hashes())
    assert [p for p in service.seen if p.endswith("consistency")] == [f"/v1/datasets/{DS}/ledger/consistency"] * 3
    assert sorted(os.listdir(state.parent)) == ["witness.json"], "no temporary file left"


def test_a_rewritten_history_is_caught(served):
    service, log, state = served
    for _ in range(3):
        log.append({"kind": "charge"})
    service.client().witness(DS, state)  # size 5
    # The operator edits leaf 1 and re-signs, then more charges come: the new log's own proofs
    # are consistent with it, not with the head this witness saved.
    forged = Log(log.origin, service.signer)
    forged.leaves = list(log.leaves)
    forged.leaves[1] = forged.leaves[1].replace(b"job-1", b"job-X")
    forged.append({"kind": "charge"})
    service.logs[f"datasets/{DS}"] = forged
    with pytest.raises(privpca.LogRewrittenError, match="does not extend"):
        service.client().witness(DS, state)
    assert saved(state, f"datasets/{DS}") == log.checkpoint(), "the old head is kept"
    # A fork of the same size: two signed heads that no proof joins.
    fork = Log(log.origin, service.signer)
    fork.leaves = list(log.leaves[:-1]) + [b'{"kind":"refund"}']
    service.logs[f"datasets/{DS}"] = fork
    with pytest.raises(privpca.LogRewrittenError, match="same size 5 have different root"):
        service.client().witness(DS, state)
    # A truncated log.
    short = Log(log.origin, service.signer)
    short.leaves = list(log.leaves[:3])
    service.logs[f"datasets/{DS}"] = short
    with pytest.raises(privpca.LogRewrittenError, match="shrank"):
        service.client().witness(DS, state)
    # An origin that changed (the same key signing the dataset under another service name).
    moved = Log(f"elsewhere.test/datasets/{DS}", service.signer, events=7)
    service.logs[f"datasets/{DS}"] = moved
    with pytest.raises(privpca.LogRewrittenError, match="origin changed"):
        service.client().witness(DS, state)
    assert saved(state, f"datasets/{DS}") == log.checkpoint()


def test_the_service_reporting_a_tampered_log_is_a_log_rewritten_error(served):
    service, log, state = served
    service.client().witness(DS, state)
    problem = {
        "type": "urn:privpca:problem:ledger-log-tampered",
        "title": "Ledger log tampered",
        "status": 409,
        "detail": "the ledger row 2 does not match leaf 2",
        "log": f"datasets/{DS}",
    }
    service.override[f"/v1/datasets/{DS}/ledger/checkpoint"] = httpx.Response(409, json=problem)
    with pytest.raises(privpca.LogRewrittenError) as refused:
        service.client().witness(DS, state)
    error = refused.value
    assert isinstance(error, privpca.LedgerLogTampered) and isinstance(error, privpca.ApiError)
    assert (error.status, error.log) == (409, f"datasets/{DS}")
    # Also when the consistency proof is refused.
    del service.override[f"/v1/datasets/{DS}/ledger/checkpoint"]
    log.append({"kind": "charge"})
    service.override[f"/v1/datasets/{DS}/ledger/consistency"] = httpx.Response(409, json=problem)
    with pytest.raises(privpca.LedgerLogTampered):
        service.client().witness(DS, state)
    assert saved(state, f"datasets/{DS}") == log.checkpoint(2)


def test_an_edited_saved_checkpoint_is_refused_and_kept(served):
    service, log, state = served
    service.client().witness(DS, state)
    stored = json.loads(state.read_text())
    note = stored["services"][BASE]["logs"][f"datasets/{DS}"]
    lines = note.split("\n")
    lines[2] = base64.b64encode(b"\x00" * 32).decode()
    stored["services"][BASE]["logs"][f"datasets/{DS}"] = "\n".join(lines)
    state.write_text(json.dumps(stored))
    before = state.read_text()
    log.append({"kind": "charge"})
    with pytest.raises(privpca.ReceiptError, match="saved in .* does not verify with the pinned key"):
        service.client().witness(DS, state)
    assert state.read_text() == before


def test_a_checkpoint_signed_by_another_key_or_of_another_log_is_refused(served, tmp_path):
    service, log, state = served
    service.client().witness(DS, state)
    rotated = Signer()
    service.logs[f"datasets/{DS}"] = Log(log.origin, rotated, events=3)
    with pytest.raises(privpca.ReceiptError, match="does not verify with privpca.test/key-1.*the pinned key"):
        service.client().witness(DS, state)
    with pytest.raises(privpca.ReceiptError, match="pins the verifier key"):
        service.client().witness(DS, state, public_key=rotated.verifier_key)
    # Another dataset's head served for this one.
    fresh = tmp_path / "other.json"
    service.logs[f"datasets/{DS}"] = Log("privpca.test/datasets/another", service.signer, events=2)
    with pytest.raises(privpca.ReceiptError, match="signed a checkpoint of 'privpca.test/datasets/another'"):
        service.client().witness(DS, fresh)
    assert not fresh.exists()


def test_an_explicit_key_is_used_and_pinned(served):
    service, log, state = served
    seen = service.client().witness(DS, state, public_key=service.signer.verifier_key)
    assert seen.size == 2 and "/v1/ledger-key" not in service.seen
    with pytest.raises(privpca.ReceiptError):
        service.client().witness(DS, state.parent / "other.json", public_key=Signer().verifier_key)


def test_the_state_file_keeps_each_service_and_log_apart(served, tmp_path):
    service, log, state = served
    other = Log(f"privpca.test/datasets/{DS}-2", service.signer, events=4)
    service.logs[f"datasets/{DS}-2"] = other
    service.client().witness(DS, state)
    service.client().witness(f"{DS}-2", state)
    logs = json.loads(state.read_text())["services"][BASE]["logs"]
    assert set(logs) == {f"datasets/{DS}", f"datasets/{DS}-2"}
    elsewhere = privpca.Client("http://other.invalid", "key", transport=httpx.MockTransport(service.handler))
    assert elsewhere.witness(DS, state).first_visit
    assert set(json.loads(state.read_text())["services"]) == {BASE, "http://other.invalid"}


def test_the_default_state_file_is_in_the_environment_or_the_home(served, tmp_path, monkeypatch):
    service, log, state = served
    monkeypatch.setenv("PRIVPCA_WITNESS_FILE", str(tmp_path / "env.json"))
    assert service.client().witness(DS).state_file == tmp_path / "env.json"
    monkeypatch.delenv("PRIVPCA_WITNESS_FILE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert service.client().witness(DS).state_file == tmp_path / "home" / ".privpca" / "witness.json"
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(privpca.ReceiptError, match="not JSON"):
        service.client().witness(DS, tmp_path / "bad.json")


def test_witness_study_checks_a_studys_log(tmp_path):
    signer = Signer()
    study = "3e0f4b7a-8f1c-4d2a-9b6e-5a4c3b2a1f0e"
    log = Log(f"privpca.test/studies/{study}", signer, events=1)
    service = Service(signer, {f"studies/{study}": log})
    state = tmp_path / "witness.json"
    assert service.client().witness_study(study, state).first_visit
    for i in range(4):
        log.append({"kind": "charge", "study": study, "site": i})
    seen = service.client().witness_study(study, state)
    assert (seen.previous_size, seen.size, seen.log) == (1, 5, f"studies/{study}")
    assert f"/v1/studies/{study}/ledger/consistency" in service.seen
    forged = Log(log.origin, signer)
    forged.leaves = [b"{}"] + log.leaves[1:] + [b"{}"]
    service.logs[f"studies/{study}"] = forged
    with pytest.raises(privpca.LogRewrittenError):
        service.client().witness_study(study, state)
    # A study's log is not a dataset's: a dataset head is refused for a study.
    service.logs[f"studies/{study}"] = Log(f"privpca.test/datasets/{study}", signer, events=6)
    with pytest.raises(privpca.ReceiptError, match="asked for the log studies/"):
        service.client().witness_study(study, state)


def test_ledger_key_is_fetched_once_and_checked(served):
    service, log, state = served
    client = service.client()
    assert client.ledger_key() == client.ledger_key() == service.signer.verifier_key
    assert service.seen.count("/v1/ledger-key") == 1
    service.override["/v1/ledger-key"] = httpx.Response(200, json={"verifier_key": "not a key"})
    with pytest.raises(privpca.ReceiptError):
        service.client().ledger_key()

