"""SentGraph (paper 004): a sentence-level discourse graph with topic nodes and cross-document
bridges, built per document by ``builder.SentenceGraphBuilder``.

Modules: ``relations`` (relation types and connectives), ``segments`` (sentences, segments,
entities, topics), ``discourse`` (the LLM-free relation rules), ``bridges`` (topic–topic edges
across documents). Nothing is imported here, so importing the package stays cheap.
"""
