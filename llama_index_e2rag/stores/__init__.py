"""The Stores port (graph + vectors + docstore + lexical index), its locks and read-model caches."""
