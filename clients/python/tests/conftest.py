"""Fixtures for the tests against a live `privpca serve`, which scripts/python-client-test.sh
starts. It passes the service's address and admin key in the environment:

- PRIVPCA_BASE_URL, PRIVPCA_ADMIN_KEY: the service (rate limits off);
- PRIVPCA_LIMITED_BASE_URL: a second service with the same admin key and a low job rate
  (a burst of 1), for the 429 retry test.

Each test gets a tenant of its own, so budgets and rate buckets never leak between tests.
"""

from __future__ import annotations

import os

# check_estimator's array API check runs only when scipy was imported with this set.
os.environ.setdefault("SCIPY_ARRAY_API", "1")
import uuid
from collections.abc import Callable, Iterator

import httpx
import numpy as np
import pytest

import privpca
import privpca._releases


def _service(variable: str) -> str:
    url = os.environ.get(variable)
    if not url:
        pytest.fail(f"{variable} is not set: run scripts/python-client-test.sh")
    return url


def _tenant_key(base_url: str) -> str:
    with privpca.Client(base_url, os.environ["PRIVPCA_ADMIN_KEY"]) as admin:
        return str(admin.create_tenant(f"pytest-{uuid.uuid4().hex[:8]}")["api_key"])


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a fresh process would: no uploads or releases remembered."""
    privpca._releases.REGISTRY.clear()
    yield
    privpca._releases.REGISTRY.clear()


@pytest.fixture
def base_url() -> str:
    return _service("PRIVPCA_BASE_URL")


@pytest.fixture
def api_key(base_url: str) -> str:
    return _tenant_key(base_url)


@pytest.fixture
def client(base_url: str, api_key: str) -> Iterator[privpca.Client]:
    with privpca.Client(base_url, api_key) as c:
        yield c


@pytest.fixture
def limited() -> tuple[str, str]:
    """The rate-limited service's address and a fresh tenant's key there."""
    url = _service("PRIVPCA_LIMITED_BASE_URL")
    return url, _tenant_key(url)


def rows(n: int, d: int, seed: int) -> np.ndarray:
    """n rows in R^d with a clear spectrum (distinct eigenvalues), each of L2 norm ≤ 1 so that
    clipping to 1 changes nothing."""
    rng = np.random.default_rng(seed)
    scales = np.linspace(3.0, 0.2, d)
    X = rng.normal(size=(n, d)) * scales
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, 1.0) * 0.999


@pytest.fixture
def make_rows() -> Callable[[int, int, int], np.ndarray]:
    return rows


Faked = Callable[[list[httpx.Response]], tuple[privpca.Client, list[httpx.Request]]]


@pytest.fixture
def faked() -> Faked:
    """A client whose wire answers the given responses in turn, and the requests it saw."""

    def make(answers: list[httpx.Response]) -> tuple[privpca.Client, list[httpx.Request]]:
        seen: list[httpx.Request] = []

        def handler(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return answers[len(seen) - 1]

        return privpca.Client("http://test.invalid", "key", transport=httpx.MockTransport(handler)), seen

    return make
