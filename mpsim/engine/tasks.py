"""Task templates for prompt files (mpsim.engine.prompts): how each of PMPD's tasks is posed.

Kept apart from prompts.py so the command line can list them without importing the engine.
"""

from __future__ import annotations

TASKS: dict[str, str] = {
    "plain": "{prompt}",
    "cnn-dm": "Summarize the following news article in a few sentences.\n\nArticle: {prompt}\n\nSummary:",
    "dialogsum": "Summarize the following dialogue.\n\n{prompt}\n\nSummary:",
    "iwslt": "Translate the following {source_lang} text into {target_lang}.\n\n{source_lang}: {prompt}\n"
             "{target_lang}:",
    "mt-bench": "{prompt}",
}
CHAT_TASKS = ("mt-bench",)
TRANSLATION_DEFAULTS = {"source_lang": "German", "target_lang": "English"}
