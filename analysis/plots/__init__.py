"""Figures, one module per chart; each reads a tidy table or a simulated run."""
