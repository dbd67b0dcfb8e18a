"""``decirank models``: the providers, their models, and what each role resolves to."""

from __future__ import annotations

from typing import Annotated

import typer

from ..backends import providers
from ..decisions.decider import DEFAULT_ROLE, Decider
from ._app import app
from ._output import console, new_table, print_json


@app.command()
def models(as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
    """List the backends and the models each role resolves to."""
    listed = [
        {
            "provider": provider.name,
            "default_model": provider.default_model,
            "models": list(provider.models),
            "any_model": provider.open_models,
            "key_variable": provider.key_variable,
            "description": provider.description,
        }
        for provider in providers()
    ]
    roles = {DEFAULT_ROLE: Decider.resolve(DEFAULT_ROLE).model_names}
    if as_json:
        print_json({"providers": listed, "roles": roles})
        return
    table = new_table("provider", "models", "key", "about")
    for entry in listed:
        names = ", ".join(f"{entry['provider']}:{m}" for m in entry["models"])
        if entry["any_model"]:
            names += ", … (any model name)"
        table.add_row(entry["provider"], names, entry["key_variable"] or "—", entry["description"])
    console.print(table)
    roles_table = new_table("role", "models, in the order tried")
    for role, chain in roles.items():
        roles_table.add_row(role, " → ".join(chain))
    console.print(roles_table)
