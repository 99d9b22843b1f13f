"""cuPDLPx 0.3.0's objective senses (python/cupdlpx/PDLP.py), for the stand-in package."""

MINIMIZE = 1
MAXIMIZE = -1
