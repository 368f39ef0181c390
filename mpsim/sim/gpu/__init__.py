"""The GPU model: CTAs in waves on SMs, software-pipelined K-loops, L2 and HBM channels."""
