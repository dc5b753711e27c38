"""Model, GPU, all-reduce and engine presets (JSON data, every number with its source)."""
