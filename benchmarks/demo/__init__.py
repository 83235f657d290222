"""The demo quality benchmark's parts: questions and checks, the two chains compared."""
