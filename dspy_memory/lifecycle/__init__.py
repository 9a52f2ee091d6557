"""Memory lifecycle: the forgetting curve (curve.py); maintenance and consolidation build on it."""
