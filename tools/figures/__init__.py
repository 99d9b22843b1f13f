"""Figure modules for tools/reproduce.py (each has a FIGURES dict)."""
