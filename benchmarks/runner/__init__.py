"""Benchmark runners (one concern per module)."""
