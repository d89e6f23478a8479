"""Default prompts for calibration without labelled data (CONFLARE steps 1-2).

Templates use single-brace placeholders and literal JSON braces (LlamaIndex convention):
:func:`fill` fills only named placeholders, :func:`to_fstring` escapes the rest for LangChain.
The few-shot question template asks for one JSON object per line, so a completion that stops at
a newline holds exactly one.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

QUESTION_VARIABLES = ("context", "topic", "topic_instruction")
JUDGE_VARIABLES = ("question", "answer", "context")

QUESTION_FEW_SHOT_TEMPLATE = (
    "Write one question that the passage answers, and its answer: a short span copied from the passage. "
    "{topic_instruction}Reply with one JSON object.\n\n"
    "Passage: The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 "
    "for the World's Fair.\n"
    'JSON: {"question": "In which year was the Eiffel Tower completed?", "answer": "1889"}\n\n'
    "Passage: Photosynthesis takes place in the chloroplasts of plant cells, where chlorophyll absorbs "
    "light energy.\n"
    'JSON: {"question": "Where in plant cells does photosynthesis take place?", "answer": "the chloroplasts"}\n\n'
    "Passage: Mount Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa.\n"
    'JSON: {"question": "Which country is Mount Kilimanjaro in?", "answer": "Tanzania"}\n\n'
    "Passage: {context}\n"
    "JSON:"
)

QUESTION_CHAT_SYSTEM = (
    "You write reading-comprehension questions for testing a search engine. Given a passage, write one "
    "question that the passage answers, in the language of the passage, without copying a sentence of it, "
    "and its answer: a short span copied exactly from the passage. "
    'Reply with only a JSON object: {"question": "...", "answer": "..."}'
)

QUESTION_CHAT_USER_TEMPLATE = "{topic_instruction}Passage: {context}"

JUDGE_FEW_SHOT_TEMPLATE = (
    "Does the passage contain the answer to the question? Reply yes or no.\n\n"
    "Passage: The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 "
    "for the World's Fair.\n"
    "Question: When was the Eiffel Tower completed?\n"
    "Answer: 1889\n"
    "Contains the answer: yes\n\n"
    "Passage: Mount Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa.\n"
    "Question: Who painted the Mona Lisa?\n"
    "Answer: Leonardo da Vinci\n"
    "Contains the answer: no\n\n"
    "Passage: Photosynthesis takes place in the chloroplasts of plant cells, where chlorophyll absorbs "
    "light energy.\n"
    "Question: Where does photosynthesis take place?\n"
    "Answer: the chloroplasts\n"
    "Contains the answer: yes\n\n"
    "Passage: The Great Wall of China is a series of fortifications built across the northern borders "
    "of ancient Chinese states.\n"
    "Question: How long is the Great Wall of China?\n"
    "Answer: 21,196 km\n"
    "Contains the answer: no\n\n"
    "Passage: {context}\n"
    "Question: {question}\n"
    "Answer: {answer}\n"
    "Contains the answer:"
)

JUDGE_CHAT_SYSTEM = "You check whether a passage contains the answer to a question. Reply with one word: yes or no."

JUDGE_CHAT_USER_TEMPLATE = (
    "Passage: {context}\n\nQuestion: {question}\nExpected answer: {answer}\n\n"
    "Does the passage contain the answer to the question?"
)


@dataclass(frozen=True)
class PromptSet:
    """The default prompts of one calibration LLM task, for base and chat models alike."""

    few_shot: str
    chat_system: str
    chat_user: str
    variables: tuple[str, ...]


QUESTION_PROMPTS = PromptSet(
    QUESTION_FEW_SHOT_TEMPLATE, QUESTION_CHAT_SYSTEM, QUESTION_CHAT_USER_TEMPLATE, QUESTION_VARIABLES
)
JUDGE_PROMPTS = PromptSet(JUDGE_FEW_SHOT_TEMPLATE, JUDGE_CHAT_SYSTEM, JUDGE_CHAT_USER_TEMPLATE, JUDGE_VARIABLES)


def topic_instruction(topic: str | None) -> str:
    """The sentence inserted for a topic of interest (empty without one).

    >>> topic_instruction("medication dosage"), topic_instruction(None)
    ('The question must be about medication dosage. ', '')
    """
    topic = (topic or "").strip()
    return f"The question must be about {topic}. " if topic else ""


def _placeholder(names: Collection[str]) -> re.Pattern[str]:
    return re.compile(r"\{(" + "|".join(re.escape(n) for n in names) + r")\}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` for each ``name`` in ``values``; every other brace stays as it is.

    >>> fill('JSON: {"q": 1} {context}', {"context": "C {x}"})
    'JSON: {"q": 1} C {x}'
    """
    if not values:
        return template
    return _placeholder(values).sub(lambda m: str(values[m.group(1)]), template)


def to_fstring(template: str, variables: Collection[str]) -> str:
    """Escape literal braces for f-string formatting, keeping ``{name}`` for ``variables``.

    >>> to_fstring('{"q": 1} {context}', ["context"])
    '{{"q": 1}} {context}'
    """
    escaped = template.replace("{", "{{").replace("}", "}}")
    return _placeholder([f"{{{v}}}" for v in variables]).sub(lambda m: m.group(1), escaped)
