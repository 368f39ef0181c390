"""Sweeps, tidy tables, figures and validation reports."""
