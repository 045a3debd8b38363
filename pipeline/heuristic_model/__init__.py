"""The rule-based ranking (`scores`): the heuristic's one inference entry point, shared by stage `heuristic` and
the tools."""
