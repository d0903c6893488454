"""`flask seed bench --store`: runs bench/store.py of the checkout the app runs from.

Benchmarks live in bench/ with the test tooling that generates their data, which the
data center's code does not import; the command loads the bench from its file.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.output import print_json

STORE_BENCH = Path(__file__).resolve().parents[2] / "bench" / "store.py"


def _store_bench() -> ModuleType:
    if not STORE_BENCH.is_file():
        raise click.ClickException(f"the store bench runs from a checkout of the project: no {STORE_BENCH}")
    name = "bench_store"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, STORE_BENCH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # The module is registered before it runs, because its dataclasses look their module up
        # by name.
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


@click.command("bench")
@click.option("--store", "store", is_flag=True, required=True, help="Time the batch store.")
@click.option("--articles", type=click.IntRange(min=1000), default=400_000, show_default=True)
@click.option(
    "--group",
    default="alt.binaries.e-book.french",
    show_default=True,
    help="Which group's generated data: alt.binaries.e-book.french or alt.binaries.cd.image.playstation2.dvdiso.",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Each timing is the best of this many rounds.",
)
@click.option(
    "--catalog",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Files the group's catalog holds before the store (a release per three), as a group"
    " indexed for years has: the store's look-ups and updates then search it.",
)
@with_appcontext
def bench(store: bool, articles: int, group: str, rounds: int, catalog: int) -> None:
    """Time the batch store on a generated boneless range, beside a raw COPY of the same
    fragments; the last line is JSON."""
    store_bench = _store_bench()
    settings = current_app.config["SETTINGS"]
    click.echo(store_bench.announce(articles=articles, group=group, rounds=rounds, catalog=catalog), err=True)
    result = store_bench.run_store_bench(
        articles=articles,
        source_group=group,
        chunk_size=settings.chunk_size,
        batch_chunks=settings.batch_chunks,
        rounds=rounds,
        catalog=catalog,
    )
    for line in store_bench.summary(result):
        click.echo(line)
    print_json(result.as_dict())
