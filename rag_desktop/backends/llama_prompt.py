"""A chat prompt as llama-cpp-python's ``create_chat_completion`` renders and tokenizes it.

Owned by :class:`rag_desktop.backends.llama_cpp_generator.LlamaCppGenerator`, which needs the
exact tokens to split an answer prompt at its fixed prefix and to count what a prompt costs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def render_prompt(lc: Any, llm: Any, template: str,
                  messages: list[dict[str, str]]) -> tuple[list[int], tuple[str, ...]]:
    """Prompt tokens and the template's stop strings for ``messages`` (plain role/content dicts).

    The GGUF's ``tokenizer.chat_template`` rendered by llama-cpp-python's ``Jinja2ChatFormatter``
    (what ``Llama`` builds from the same metadata), tokenized with special tokens parsed, BOS
    prepended when the vocabulary asks for it. ``lc`` is the ``llama_cpp`` module.
    """
    vocab = lc.llama_model_get_vocab(llm.model)
    eos, bos = llm.token_eos(), llm.token_bos()
    vtext = llm._model.token_get_text  # the token's text, as Llama passes it to the template
    fmt = _formatter(template, vtext(eos) if eos != -1 else "", vtext(bos) if bos != -1 else "", eos)
    resp = fmt(messages=messages)  # plain dicts, as create_chat_completion gets
    stops = resp.stop if isinstance(resp.stop, list) else [resp.stop] if resp.stop else []
    toks = list(llm.tokenize(resp.prompt.encode("utf-8"), add_bos=False, special=True))
    if bos != -1 and lc.llama_vocab_get_add_bos(vocab):
        toks = [bos, *toks]
    return toks, tuple(s for s in stops if s)


@lru_cache(maxsize=8)
def _formatter(template: str, eos_token: str, bos_token: str, eos: int) -> Any:
    """The template compiled once (~12 ms a time): an answer prompt is rendered once per piece it is
    read in (backends/llama_segments.py)."""
    from llama_cpp import llama_chat_format

    return llama_chat_format.Jinja2ChatFormatter(template=template, eos_token=eos_token, bos_token=bos_token,
                                                 stop_token_ids=[eos])
