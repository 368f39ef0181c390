"""PMPD precision schedulers (static, learned, baselines, budget), their offline searches and training.

The interface they implement, `PrecisionScheduler`, stays beside the engine (mpsim/engine/scheduler.py),
which consults it every decode step.
"""
