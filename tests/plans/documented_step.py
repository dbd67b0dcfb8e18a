"""The plan step of builtin__rank's documentation, verbatim, shared by the plan tests."""

RANK_STEP = """\
- id: E1
  tool_name: builtin__rank
  input:
    state: "{{input.state}}"
    items: "{{input.items}}"
    instructions: "{{input.instructions}}"
"""
