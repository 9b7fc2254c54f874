"""Shared pytest configuration: hypothesis profiles sized for a 2-core CI machine."""
import os
import torch
from hypothesis import settings, HealthCheck

settings.register_profile('ci', max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile('thorough', max_examples=300, deadline=None)
settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
