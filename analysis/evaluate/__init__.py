"""Scheduler evaluation: policies and precision schedulers, quality against fp16 and simulated speed."""
