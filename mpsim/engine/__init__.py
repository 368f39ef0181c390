"""The inference engine: Llama-family decoders on mpsim kernels, under a precision policy."""
