"""mpsim: compare mixed-precision and progressive-decoding LLM inference policies.

Data flows one way: model spec + policy + workload -> trace -> simulator -> tables -> figures.
"""

__version__ = "0.1.0"
