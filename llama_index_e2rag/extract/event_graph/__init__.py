"""E²GraphRAG (paper 001, ``mode="event_graph"``): per-document entities fused from mentions by
names and embeddings, an event layer over them, and cross-document ``same_entity`` links; see
``docs/design/event_graph_plan.md``. Nothing is imported here, so importing the package stays cheap.
"""
