"""Measured datasets with provenance and the built-in (calibrated) scenarios."""
