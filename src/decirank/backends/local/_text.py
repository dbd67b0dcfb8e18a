"""Splitting a question's text into what it asks and the subject the encoders compare."""

from __future__ import annotations

import re

__all__ = ["split_frame", "split_question"]

# A short leading clause ending in ": " is a frame ("This note bears on the request: ",
# "How well does the artifact meet this criterion: "); what follows is the subject.
_FRAME = re.compile(r"^\s*(?P<frame>[^:\n]{1,80}?):\s+(?P<subject>\S.*)$", re.DOTALL)
_FRAME_MAX_WORDS = 12


def split_frame(text: str) -> tuple[str, str]:
    """``(frame, subject)`` of a question's text; the frame is empty when there is none.

    A bi-encoder compares meanings, it does not follow instructions: the same
    frame glued to every document pulls all their vectors toward the frame and
    blurs the differences that matter, so the subject is encoded without it.
    The split looks at one question at a time, so a question's answer never
    depends on what else its call carries.
    """
    match = _FRAME.match(text)
    if match is None or len(match["frame"].split()) > _FRAME_MAX_WORDS:
        return "", text.strip()
    return match["frame"].strip(), match["subject"].strip()


# A question whose text ends in a block labelled as the thing asked about ("Is it about
# fleas?\nItem: <text>", the filter tool's shape) asks what comes before about that block.
_SUBJECT_BLOCK = re.compile(
    r"^(?P<instructions>.*?\S)\s*\n\s*(?:item|document|passage|text|note|artifact)\s*:\s*(?P<subject>\S.*)$",
    re.DOTALL | re.IGNORECASE,
)


def split_question(text: str) -> tuple[str, str]:
    """``(instructions, subject)`` of a likelihood or score question's text.

    A leading frame comes first (everything after it is the subject, whatever
    lines it holds); then a trailing labelled block; else the whole text is
    the subject.
    """
    frame, subject = split_frame(text)
    if frame:
        return frame, subject
    block = _SUBJECT_BLOCK.match(text)
    if block is not None:
        return block["instructions"].strip(), block["subject"].strip()
    return "", subject
