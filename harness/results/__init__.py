"""Structured records of a run and everything rendered from them."""
