"""Serving under load: a request-level discrete-event simulation (SimPy) of continuous batching with a
paged KV cache, every iteration priced by the kernel-level performance models (`mpsim.sim.simulate`).

    workload.py   requests: arrival processes, length distributions, the arrivals CSV
    config.py     the scheduler's knobs, the SLOs (defaults and where they come from), the
                  iteration's measurement protocols (decode `graph`, prefill `eager`)
    context.py    the model's context length and the check every request passes
    kv.py         paged KV: capacity from the device memory, blocks per sequence
    precision.py  each sequence's weight precision per decode step, precision groups of a batch
    scheduler.py  iteration-level continuous batching (chunked prefill or prefill-first, FCFS,
                  preemption by recompute)
    rows.py       an iteration's launches, built by mpsim.launch_plan
    pricing.py    iteration times: components priced through `simulate`, memo and buckets
    engine.py     the SimPy processes and `run_serve`
    outputs.py    per-request and per-iteration tables, the summary, files, timeline
docs/serving.md describes the model and its assumptions. Entry point: `mpsim.serve.engine.run_serve`.
This package file imports nothing, so `mpsim serve --help` loads only the light config module.
"""
