"""Reproducible retrieval benchmarks for llama-index-e2rag (not shipped in the wheel).

``python -m benchmarks quick|full`` runs quality, speed, scaling and LLM-cost measurements and
writes JSON to ``benchmarks/results/`` and a report to ``docs/benchmarks.md``.
"""
