"""LitBank: the offline entity and event layer measured against LitBank's annotations.

``python -m benchmarks litbank --data-root DIR`` (``__main__``): ``loader`` reads a folder laid
out like ``shared/data/litbank``, ``systems`` runs the project's offline default and the
baselines over each work's text, ``scoring`` applies the standard definitions (mention P/R/F1,
event-trigger P/R/F1, MUC / B³ / CEAF-e), ``chains`` the timeline chain-coverage metric, and
``report`` writes ``benchmarks/results/litbank.{json,md}`` and the section of
``docs/benchmarks.md``.
"""
