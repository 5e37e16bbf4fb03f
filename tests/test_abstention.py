"""The abstention phrase a fix set teaches (finetune/abstention.py): spoken as a model says it, spellable by
the tokenizer, and a message naming the phrase and what the tokenizer lacks when none is."""

from __future__ import annotations

from typing import Any

import pytest

from finetune.abstention import choose_phrase, spoken, unspellable
from workbench.errors import WorkbenchError
from workbench.probes import DEFAULT_ABSTENTIONS


def _words(vocab: list[str], *, lowercase: bool = False) -> Any:
    """A word-level tokenizer (words and punctuation runs apart) holding only `vocab`."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    ids = {t: i for i, t in enumerate(["[UNK]", "[EOS]", *vocab])}
    tok = Tokenizer(models.WordLevel(ids, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")


def test_spoken_as_a_model_says_it() -> None:
    assert spoken("i don't know", ".") == "I don't know"  # the stop string is the period
    assert spoken("i don't know", "\n") == "I don't know."
    assert spoken("Not sure!", "\n") == "Not sure!" and spoken("我不知道", "。") == "我不知道"


def test_unspellable_names_words_and_characters_never_placeholders() -> None:
    tok = _words(["i", "know", "."])
    assert unspellable(tok, "i don't know") == ["don't"] and unspellable(tok, "i know.") == []
    chars = _words(["a", "b", "c", "ab"])  # a word it spells but for one character
    assert unspellable(chars, "ab c d") == ["d"]


def test_choose_phrase_takes_one_the_tokenizer_can_spell_and_says_so() -> None:
    cased = _words(["I", "don", "'", "t", "know", "."])
    assert choose_phrase(cased, ["i don't know"], ".", model="m").text == "I don't know"
    lower = _words(["i", "don", "'", "t", "know", "."])  # no "I": the phrase as the suite writes it
    c = choose_phrase(lower, ["i don't know"], ".", model="m")
    assert c.text == "i don't know" and not c.note
    # it cannot spell the first phrase, but a later one (the suite's, then one the grader knows)
    tok = _words(["not", "sure", "unknown", "."], lowercase=True)
    c = choose_phrase(tok, ["i don't know", "not sure"], ".", model="tiny")
    assert c.phrase == "not sure" and c.text == "Not sure"
    assert "`i don't know`" in c.note and "`don't`" in c.note and "UNK" not in c.note and "`Not sure`" in c.note
    only_unknown = _words(["unknown", "."], lowercase=True)
    assert choose_phrase(only_unknown, list(DEFAULT_ABSTENTIONS), ".", model="m").text == "Unknown"
    # "Unknown" declines by meaning whatever the suite's own phrases are: the grader counts it as abstaining
    c = choose_phrase(only_unknown, ["i don't know"], ".", model="m")
    assert c.text == "Unknown" and "`i don't know`" in c.note
    with pytest.raises(WorkbenchError) as err:
        choose_phrase(_words(["yes"]), ["i don't know"], ".", model="tiny")
    msg = str(err.value)
    assert "`tiny`" in msg and "`i don't know`" in msg and "`don't`" in msg and "UNK" not in msg
