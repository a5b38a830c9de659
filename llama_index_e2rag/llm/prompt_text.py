"""Prompts as plain text, filled exactly as llama-index fills them, without importing llama-index.

llama-index takes about a second to import, and ``lightrag_ext`` only needs a prompt's text and
a way to fill it, so the shared prompts live here as strings. The llama-index ``PromptTemplate``
objects (for ``get_prompts`` / ``update_prompts``) are built from the same texts on first access
(``lazy_templates``), so there is one text per prompt and both packages send the same prompt,
hence the same LLM cache keys.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Mapping, Union

from llama_index_e2rag.lazy import lazy_getattr

if TYPE_CHECKING:
    from llama_index.core.prompts import BasePromptTemplate, PromptTemplate

#: A prompt as ``lightrag_ext`` takes it: a text, or a user's llama-index template.
Prompt = Union[str, "BasePromptTemplate"]

# The placeholder rule of llama-index's ``SafeFormatter`` (``PromptTemplate.format``): one pass,
# a ``{key}`` that is given is replaced, every other brace (the prompts' JSON examples) stays.
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def fill(template: str, /, **values: Any) -> str:
    """``template`` with its ``{name}`` placeholders filled, as
    ``PromptTemplate(template).format(**values)`` fills them.

    ``str.format`` would refuse the literal braces of the JSON examples in our prompts.
    """

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        return str(values[key]) if key in values else match.group(0)

    return _PLACEHOLDER.sub(value, template)


def format_prompt(prompt: Prompt, /, **values: Any) -> str:
    """A text filled by ``fill``, a llama-index template by its own ``format``."""
    if isinstance(prompt, str):
        return fill(prompt, **values)
    return prompt.format(**values)


def lazy_templates(module: dict[str, Any], texts: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (``lazy.lazy_getattr``) building ``PromptTemplate(texts[name])``
    on first access, so that importing the module does not import llama-index.

    ``module`` is the module's ``globals()``.
    """
    return lazy_getattr(module, {name: partial(_template, text) for name, text in texts.items()})


def _template(text: str) -> PromptTemplate:
    from llama_index.core.prompts import PromptTemplate

    return PromptTemplate(text)
