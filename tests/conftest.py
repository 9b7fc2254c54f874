"""Shared pytest configuration: hypothesis profiles sized for a 2-core CI machine."""
import os
import torch
import pytest
from hypothesis import settings, HealthCheck

settings.register_profile('ci', max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile('thorough', max_examples=300, deadline=None)
settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))
# one process: up to two threads; `make test` runs pytest in two processes (pytest-xdist, `-n 2`), one thread each, so the
# two never compete for the two cores with four threads
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="module")
def one_thread():
    "Run a module's tests on one torch thread (tile loops and tiny models: faster than two competing), then restore."
    before = torch.get_num_threads(); torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
