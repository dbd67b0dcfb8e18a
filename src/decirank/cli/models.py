"""``decirank models``: the providers, their models, and what each role resolves to."""

from __future__ import annotations

from typing import Annotated

import typer

from .._config import load_config
from ..backends import providers
from ..decisions.roles import resolve_chain, role_names
from ._app import app
from ._output import console, new_table, print_json, print_table


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
    config = load_config()
    # Names only: listing a role must not load its models.
    chains = {name: resolve_chain(name, config) for name in role_names(config)}
    roles = {name: chain.full_model_names() for name, chain in chains.items()}
    if as_json:
        print_json({"providers": listed, "roles": roles, "config": str(config.path)})
        return
    table = new_table("provider", "models", "key", "about", wrap=("models", "about"))
    for entry in listed:
        names = ", ".join(f"{entry['provider']}:{m}" for m in entry["models"])
        if entry["any_model"]:
            names += ", … (any model name)"
        table.add_row(entry["provider"], names, entry["key_variable"] or "—", entry["description"])
    print_table(table)
    roles_table = new_table("role", "models, in the order tried", "set by")
    for role, chain in roles.items():
        roles_table.add_row(role, " → ".join(chain), chains[role].source)
    print_table(roles_table)
    found = "" if config.path.is_file() else " (not found: the defaults apply)"
    console.print(f"config: {config.path}{found}", style="dim", highlight=False)
