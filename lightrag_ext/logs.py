"""Our log lines in LightRAG's logs.

LightRAG's server (``configure_logging``, or gunicorn's ``logconfig_dict``) gives handlers to the
``lightrag`` logger only (console and ``lightrag.log``) and stops it from propagating, so the
lines of ``lightrag_ext`` and ``llama_index_e2rag`` (``e2rag layer of <doc>: …``, the layer
warnings) would reach neither. ``attach_to_lightrag_logging`` hands their records to whatever
handlers the ``lightrag`` logger has when a record is emitted, at its level (``LOG_LEVEL``), so
they land in the same places in the same formats, however and whenever those were configured.
"""

from __future__ import annotations

import logging

PACKAGE_LOGGERS = ("lightrag_ext", "llama_index_e2rag")


class ToLightRAGHandlers(logging.Handler):
    """Emit a record through the ``lightrag`` logger's handlers, at that logger's level."""

    def emit(self, record: logging.LogRecord) -> None:
        target = logging.getLogger("lightrag")
        if record.levelno < target.getEffectiveLevel():
            return
        for handler in target.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


def attach_to_lightrag_logging() -> None:
    """Route our packages' loggers to LightRAG's handlers (idempotent; entry points only)."""
    for name in PACKAGE_LOGGERS:
        package_logger = logging.getLogger(name)
        if not any(isinstance(h, ToLightRAGHandlers) for h in package_logger.handlers):
            package_logger.addHandler(ToLightRAGHandlers())
        # the handler applies LightRAG's level, which the server sets after this runs
        package_logger.setLevel(logging.DEBUG)
        package_logger.propagate = False  # as "lightrag": a root handler would print it twice
