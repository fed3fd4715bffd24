"""Benchmarks (`make bench`): measured against a real daemon, medians and tails reported."""
