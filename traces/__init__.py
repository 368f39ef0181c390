"""Trace contract: one row per kernel launch, Parquet IO, validation, byte/FLOP accounting.

Imports nothing of mpsim: the engine, the synthesizer and the simulator all stand on it.
"""
