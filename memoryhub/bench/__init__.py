"""Benchmarks run by `manage.py bench` (`make bench`): each measures side by side in one run and
prints ratios, because this machine is noisy. Thresholds live here, never in unit tests."""
