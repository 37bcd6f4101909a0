"""tests/bench holds scripts (the benchmark and its cluster generator), not tests: never collect them.

Run the benchmark with `.venv/bin/python tests/bench/bench_extender.py [--quick]`;
tests/test_bench_smoke.py keeps the generator honest in the normal test run.
"""
collect_ignore_glob = ["*.py"]
