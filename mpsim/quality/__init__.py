"""Output quality of a policy against fp16: Rouge-L and token agreement on held-out text."""
