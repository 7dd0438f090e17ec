"""Language of a text by script counts: ``"zh"``, ``"en"`` or ``"other"``.

The rule (chosen here; paper 000 only says foreign-language documents are translated, §3.5):

* count the characters of each script class in the text:

  - ``han``   — CJK ideographs (Unified, Extension A, Compatibility);
  - ``latin`` — Latin letters (ASCII, Latin-1 Supplement, Latin Extended-A/B and Additional);
  - ``kana_hangul`` — Japanese kana and Korean Hangul;
  - ``other_alpha`` — every other letter (Cyrillic, Greek, Arabic, Devanagari, ...).

* weigh them by how much text one character carries: a Han character is about one word and
  so is a kana/Hangul syllable, while a word of an alphabetic script takes several letters
  (English words average ~4.7 letters, Chinese words ~1.5 characters), so alphabetic letters
  count one third::

      score_zh    = han
      score_en    = latin / 3
      score_other = kana_hangul + other_alpha / 3

* the largest score wins, ties going to ``zh`` then ``en``; a text with no letters at all
  (digits, punctuation, whitespace) is ``"other"``.

So a Chinese paragraph full of English technical terms stays ``zh``, an English paragraph
quoting a few Chinese words stays ``en``, and Japanese (kana outnumber kanji in running text)
is ``other``. Any Latin-script text counts as ``en``: telling English from French by script
alone is impossible, and ``en`` here means "tokenise as a space-separated Latin language".

The counts use ``re.sub`` over runs of each class (a C loop), so the cost is linear in
``len(text)`` with a small constant — cheap enough to run on every chunk.
"""

from __future__ import annotations

import re

from rag_desktop.core.text import HAN_RUN
from rag_desktop.core.types import Lang

# Each pattern matches *runs* of its class; the count of characters is the length removed by
# ``sub`` — one match per run rather than per character, which is several times faster.
_LATIN = re.compile("[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]+")
# Letters only (no voicing marks, middle dot or unassigned points), so that these counts are
# part of the letter count and "other letters" can be had by subtraction.
_KANA_HANGUL = re.compile(
    "[\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
    "\u1100-\u11ff\u3131-\u318e\uac00-\ud7a3]+"
)
_ASCII_NON_LETTERS = str.maketrans("", "", "".join(chr(c) for c in range(128) if not chr(c).isalpha()))

# Letters of an alphabetic script carry about a third of a Han character (see module doc).
ALPHABETIC_LETTERS_PER_WORD = 3
ALPHABETIC_WEIGHT = 1.0 / ALPHABETIC_LETTERS_PER_WORD


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(text) - len(pattern.sub("", text))


def script_counts(text: str) -> dict[str, int]:
    """Character counts per script class (``han``, ``latin``, ``kana_hangul``, ``other_alpha``)."""
    if text.isascii():  # fast path: only ASCII letters can be present
        latin = len(text.translate(_ASCII_NON_LETTERS))
        return {"han": 0, "latin": latin, "kana_hangul": 0, "other_alpha": 0}
    han = _count(HAN_RUN, text)
    latin = _count(_LATIN, text)
    kana_hangul = _count(_KANA_HANGUL, text)
    letters = sum(map(str.isalpha, text))  # a C loop; exact, unlike regex \w tricks
    # The classes above are letters too; what is left is every other script.
    other_alpha = max(0, letters - han - latin - kana_hangul)
    return {"han": han, "latin": latin, "kana_hangul": kana_hangul, "other_alpha": other_alpha}


def detect_lang(text: str) -> Lang:
    """``"zh"``, ``"en"`` or ``"other"`` by weighted script counts (rule in the module doc)."""
    c = script_counts(text)
    # The scores of the module doc times 3, in integers so that ties are exact.
    score_zh = ALPHABETIC_LETTERS_PER_WORD * c["han"]
    score_en = c["latin"]
    score_other = ALPHABETIC_LETTERS_PER_WORD * c["kana_hangul"] + c["other_alpha"]
    if score_zh == score_en == score_other == 0:
        return "other"
    if score_zh >= score_en and score_zh >= score_other:
        return "zh"
    if score_en >= score_other:
        return "en"
    return "other"
