"""Novel experiments: each LiteraryQA book's offline-default index built once into a persistent
cache (``cache``), any retriever configuration evaluated on the cached stores against the hybrid
baseline of the same run (``evaluate``), and configurations chosen with the protocol's book-level
cross-validation (``cv``). ``python -m benchmarks.novels --help`` runs them."""
