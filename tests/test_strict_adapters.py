"""The strict adapters refuse cut-off structured answers, and accept what DSPy's own format
writes for scalar fields (a judge's `True`)."""

from __future__ import annotations

import dspy
import pytest

from dspy_memory.programs.strict import StrictChatAdapter
from dspy_memory.testing import scripted_lm
from dspy_memory.util.lm import run_program


class Verdict(dspy.Signature):
    """Judge an answer."""

    answer: str = dspy.InputField()
    correct: bool = dspy.OutputField()
    score: int = dspy.OutputField()
    facts: list[str] = dspy.OutputField()


def test_scalars_as_dspy_formats_them_are_accepted_in_one_call():
    lm = scripted_lm(lambda call: {"correct": True, "score": 3, "facts": ["a"]})
    prediction, usage = run_program(dspy.Predict(Verdict), lm, {"answer": "x"}, max_attempts=1)
    assert (prediction.correct, prediction.score, prediction.facts, usage.lm_calls) == (True, 3, ["a"], 1)
    # The answer the LM gave was DSPy's own rendering (Python's True, not JSON's true), which
    # the demos in a prompt show a real LM too.
    written = StrictChatAdapter().format_assistant_message_content(
        Verdict, {"correct": True, "score": 3, "facts": ["a"]}
    )
    assert "\nTrue\n" in written
    assert StrictChatAdapter().parse(Verdict, written) == {"correct": True, "score": 3, "facts": ["a"]}


@pytest.mark.parametrize("cut", ['["Ada lives in Lis', '["a", "b"'])
def test_a_cut_off_list_is_still_refused(cut):
    answer = f"[[ ## correct ## ]]\nTrue\n\n[[ ## score ## ]]\n3\n\n[[ ## facts ## ]]\n{cut}\n\n[[ ## completed ## ]]"
    with pytest.raises(Exception, match="not complete JSON"):
        StrictChatAdapter().parse(Verdict, answer)
