"""Default prompts: short answer from the context, or "I don't know"; adapters let users override them."""

from __future__ import annotations

IDK = "I don't know"

FEW_SHOT_TEMPLATE = (
    "Answer the question with a short phrase from the context. If the context does not contain "
    f'the answer, say "{IDK}".\n\n'
    "Context: The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 "
    "for the World's Fair.\n"
    "Question: When was the Eiffel Tower completed?\n"
    "Answer: 1889\n\n"
    "Context: Mount Kilimanjaro is a dormant volcano in Tanzania, the highest mountain in Africa.\n"
    "Question: Who painted the Mona Lisa?\n"
    f"Answer: {IDK}\n\n"
    "Context: {context}\n"
    "Question: {question}\n"
    "Answer:"
)

CHAT_SYSTEM_PROMPT = (
    "You answer questions using only the given context. Reply with a short phrase copied from the "
    f'context, with no explanation. If the context does not contain the answer, reply exactly "{IDK}".'
)

CHAT_USER_TEMPLATE = "Context: {context}\n\nQuestion: {question}"
