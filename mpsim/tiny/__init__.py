"""The tiny-model lab: the shipped byte-level Llama, its stdlib training text, and its training."""
