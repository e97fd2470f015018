"""429 and 503 are retried after Retry-After: live against a service with a job rate of 30 a
minute in bursts of 1 (Retry-After: 2), and on a faked wire for 503 and the header's forms."""

from __future__ import annotations

import time

import httpx
import pytest

import privpca


class Recording(httpx.HTTPTransport):
    """The real transport, remembering every answer's status."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        return response


def test_429_is_retried_after_retry_after(limited, make_rows):
    wire = Recording()
    client = privpca.Client(*limited, transport=wire)
    ds = client.create_dataset(make_rows(200, 3, 31), name="rate", row_norm_bound=1.0, public=True)
    first = client.submit_job(ds.id, "noisy_power", {"k": 1})
    started = time.monotonic()
    second = client.submit_job(ds.id, "noisy_power", {"k": 1})
    waited = time.monotonic() - started
    assert first.id != second.id
    assert 429 in wire.statuses, "the second submission was not rate limited"
    assert wire.statuses[-1] == 202
    assert waited >= 1.0, "the retry did not wait for Retry-After"
    assert len(client.list_jobs(ds.id)) == 2


def test_rate_limited_is_raised_when_retries_run_out(limited, make_rows):
    client = privpca.Client(*limited, max_retries=0)
    ds = client.create_dataset(make_rows(200, 3, 32), name="rate", row_norm_bound=1.0, public=True)
    client.submit_job(ds.id, "noisy_power", {"k": 1})
    with pytest.raises(privpca.RateLimited) as refused:
        client.submit_job(ds.id, "noisy_power", {"k": 1})
    assert refused.value.status == 429 and refused.value.retry_after is not None
    assert refused.value.retry_after >= 1


def _problem(status: int, slug: str, **headers: str) -> httpx.Response:
    body = {"type": f"urn:privpca:problem:{slug}", "title": slug, "status": status, "detail": slug}
    return httpx.Response(status, json=body, headers={"Content-Type": "application/problem+json", **headers})


def test_503_is_retried_and_the_idempotency_key_is_kept(faked):
    job = {
        "id": "j", "dataset_id": "d", "algorithm": "exact", "status": "queued", "params": {}, "config": {},
        "privacy": {}, "refunded": False, "cancel_requested": False, "created_at": "now",
        "cost": {"rho": 0.0, "delta": 0.0, "epsilon": 0.0, "epsilon_at_delta": 1e-6},
    }
    client, seen = faked([_problem(503, "unavailable", **{"Retry-After": "0"}), httpx.Response(202, json=job)])
    assert client.submit_job("d", "exact", {"k": 1}).id == "j"
    assert len(seen) == 2
    keys = {r.headers["Idempotency-Key"] for r in seen}
    assert len(keys) == 1, "a retried submission must reuse its Idempotency-Key"


def test_retries_give_up_with_the_typed_error(faked):
    answers = [_problem(503, "queue-full", **{"Retry-After": "0"})] * 3
    client, seen = faked(answers)
    client.max_retries = 2
    with pytest.raises(privpca.QueueFull):
        client.get_job("j")
    assert len(seen) == 3


def test_a_retry_after_longer_than_allowed_is_not_waited(faked):
    client, seen = faked([_problem(429, "rate-limited", **{"Retry-After": "3600"})])
    with pytest.raises(privpca.RateLimited) as refused:
        client.get_job("j")
    assert refused.value.retry_after == 3600 and len(seen) == 1


def test_retry_after_as_an_http_date_and_unknown_problem_types(faked):
    client, _ = faked([_problem(429, "rate-limited", **{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), _problem(418, "teapot")])
    client.max_retries = 1
    with pytest.raises(privpca.ApiError) as other:
        client.get_job("j")
    assert type(other.value) is privpca.ApiError and other.value.status == 418
