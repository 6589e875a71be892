"""Benchmarks: each module `bench/<name>.py` exposes `main() -> str` (a Markdown section)."""
