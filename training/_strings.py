"""Every string the corpus needs a vector for."""

from __future__ import annotations

import re

from decirank.backends.local.runtime import AUXILIARY, BACKGROUND_TOPICS, option_reading, read_yes_no


def strings(yes_no, choices) -> list[str]:
    out = list(BACKGROUND_TOPICS)
    for row in yes_no:
        reading = read_yes_no(row.question, row.true, row.false)
        out += [row.text, reading.topic, reading.question]
        out += [side for pair in reading.contrasts for side in pair]
        negated = read_yes_no(negate(row.question), row.false, row.true)
        out += [negated.topic, negated.question] + [side for pair in negated.contrasts for side in pair]
    for row in choices:
        out += [row.text, *row.options.values()]
        for description in row.options.values():
            reading = option_reading(description)
            out += [reading.topic, reading.question]
    return list(dict.fromkeys(out))


def negate(question: str) -> str:
    """The question asked the other way round: "Is this about X?" -> "Is this not about X?"."""
    nouns = (
        "sentiment of this text|customer query|movie review|product review|customer|user|writer|author|tone|tweet"
        "|review|post|message|question|request|sentence|text|phrase"
    )
    subject = rf"it|(?:this|the)(?:\s+(?:{nouns}))?"
    match = re.match(rf"^(\s*{AUXILIARY})\s+({subject})\s+", question, re.IGNORECASE)
    if match is None:
        return f"Is it false that {question[0].lower()}{question[1:]}"
    return f"{match[1]} {match[2]} not {question[match.end() :]}"
