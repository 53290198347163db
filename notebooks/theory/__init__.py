"""Symbolic (sympy) statements of each paper's bounds, conditions and formulas, with checks against runs."""
