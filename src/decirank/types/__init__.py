"""The value types every layer shares: questions, answers, limits and their records.

This is the bottom layer: it imports nothing of decirank but :mod:`decirank.errors`,
so backends, stores, decisions and tools all point down to it.
"""
