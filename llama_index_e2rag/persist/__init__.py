"""A store's life on disk: save, open, check, repair, info, checksums, llama-index files and
the legacy (0.1.0) format."""
