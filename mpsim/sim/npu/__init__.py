"""The NPU model: DMA into double-buffered SRAM, a bit-width-aware weight decoder, a MAC array."""
