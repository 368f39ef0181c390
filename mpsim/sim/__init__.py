"""Performance models that replay traces: the roofline baseline and the SimPy simulators."""
