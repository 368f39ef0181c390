"""Sweeps: YAML grids of models x policies x hardware x workloads, run locally or on Dask, resumable."""
