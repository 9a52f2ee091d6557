"""The read path: search recipes and fusion, prompt-ready context, answers from memory."""
