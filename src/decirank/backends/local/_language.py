"""A cheap guess at whether a text is English, the only language the embedded model reads.

Two signals, each needing enough text to mean anything:

- **script**: at least 30% of its letters are not ASCII (Chinese, Japanese, Korean,
  Cyrillic, Arabic, Greek, Devanagari...). English with names or loanwords ("café",
  "Zürich") stays far below: the highest share among DL19's passages is 14%.
- **function words**: in a text of 8 words or more, at least 10% of the words are
  function words of French, Spanish, Portuguese, Italian, German or Dutch that are not
  English words ("le", "der", "que", "het"), and they outnumber English ones ("the",
  "of", "is"). A list of English keywords or product names has neither, so it passes.

Measured (``benchmarks/language_flag.py``): 2 of DL19's 4,340 passages and queries are
flagged (reference lists, "et al.", "del."), and a sentence in each of 13 other languages
(the six above and Chinese, Japanese, Korean, Russian, Arabic, Greek, Hindi) is flagged.
A short text (under 20 letters, or under 8 words for the second signal) is never flagged:
a title or a keyword carries too little to tell.
"""

from __future__ import annotations

import re

__all__ = ["looks_non_english"]

#: Share of letters outside ASCII from which a text is in another script.
FOREIGN_SCRIPT_SHARE = 0.30
#: Share of other languages' function words from which a text in Latin letters is not English.
FOREIGN_WORD_SHARE = 0.10
MIN_LETTERS = 20
MIN_WORDS = 8

_ENGLISH_FUNCTION_WORDS = frozenset(
    """the of and to a in is it that for on with as was are be by this at from or an have not which
    but they you he she his her their its we can has had were will what there been one all would when
    who how more if no so do does than these those them our your my i me also into about may should""".split()
)
#: Function words of French, Spanish, Portuguese, Italian, German and Dutch that are not English words.
_FOREIGN_FUNCTION_WORDS = (
    frozenset(
        """le la les des est et une un dans pour que qui sur avec pas ne du au aux ce cette sont il elle nous vous
        ils mais ou leur plus par se sa son ses y el los las es en por con para una del lo al como pero sus
        muy esta este son ser o os um uma não do da das dos em com na no é ao pelo pela il di che per della
        sono gli nel alla anche der das und ist nicht mit ein eine zu von den im auf sich dem des oder auch
        wird sind wie nur noch het een van niet op dat zijn voor ook worden bij maar wel dit""".split()
    )
    - _ENGLISH_FUNCTION_WORDS
)
_WORD = re.compile(r"[^\W\d_]+")


def looks_non_english(text: str) -> bool:
    """True when ``text`` is long enough to judge and does not look like English (module docstring)."""
    letters = [character for character in text if character.isalpha()]
    if len(letters) < MIN_LETTERS:
        return False
    if sum(not character.isascii() for character in letters) >= FOREIGN_SCRIPT_SHARE * len(letters):
        return True
    words = _WORD.findall(text.lower())
    if len(words) < MIN_WORDS:
        return False
    foreign = sum(word in _FOREIGN_FUNCTION_WORDS for word in words)
    english = sum(word in _ENGLISH_FUNCTION_WORDS for word in words)
    return foreign >= FOREIGN_WORD_SHARE * len(words) and foreign > english
