"""Thin route modules: parse, call one service, return a model."""
