"""Query engines, the chat engine, the two-stage engine, extractive answers and answer types."""
