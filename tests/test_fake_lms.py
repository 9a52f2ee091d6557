"""The scripted LMs answer by signature and input values, never by reading the prompt's text:
an adapter that renders prompts differently does not break them."""

from __future__ import annotations

import dspy
import pytest

from dspy_memory.programs import AnswerJudge
from dspy_memory.testing import call_for, scripted_lm


def judge(call):
    assert call.signature == "question, gold_answer, answer -> correct, reason"
    return {"correct": call.inputs["answer"] == call.inputs["gold_answer"], "reason": "compared"}


@pytest.mark.parametrize("adapter", [dspy.ChatAdapter(), dspy.JSONAdapter(), dspy.XMLAdapter()], ids=type)
def test_every_adapter_gets_answers_in_its_own_format(adapter):
    lm = scripted_lm(judge)
    with dspy.context(lm=lm, adapter=adapter):
        assert AnswerJudge()(question="Where?", gold_answer="Denver", answer="Denver").correct is True
        assert AnswerJudge()(question="Where?", gold_answer="Denver", answer="Boston").correct is False
    [first, second] = lm.engine.calls
    assert first.inputs == {"question": "Where?", "gold_answer": "Denver", "answer": "Denver"}
    assert second.json_mode is isinstance(adapter, dspy.JSONAdapter)


def test_a_prompt_no_adapter_formatted_has_no_fields():
    call = call_for([{"role": "user", "content": "[[ ## question ## ]]\nlooks like a field"}])
    assert (call.input_fields, call.output_fields, call.inputs) == ([], [], {})
