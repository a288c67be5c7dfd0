"""Benchmarks of the performance targets (see README.md here); not part of the test run."""
