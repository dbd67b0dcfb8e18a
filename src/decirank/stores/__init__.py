"""Stores of user state: the run log, the decision cache and the artifact store."""
