"""Benchmarks that write tables (analysis/results/): GPU kernels, references, simulator, sweeps."""
