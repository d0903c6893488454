"""`flask seed bench --store`."""
from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.output import print_json


@click.command("bench")
@click.option("--store", "store", is_flag=True, required=True, help="Time the batch store (the only bench).")
@click.option("--articles", type=click.IntRange(min=1000), default=400_000, show_default=True)
@click.option("--group", default="alt.binaries.e-book.french", show_default=True,
              help="Which kind of generated data (the seed system's test groups).")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Each timing is the best of this many rounds.")
@click.option("--catalog", type=click.IntRange(min=0), default=0, show_default=True,
              help="Files the group's catalog holds before the store (a release per three), as a group"
                   " indexed for years has: the store's look-ups and updates then search it.")
@with_appcontext
def bench(store: bool, articles: int, group: str, rounds: int, catalog: int) -> None:
    """Time the batch store on a generated boneless range, beside a raw COPY of the same
    fragments; the last line is JSON."""
    from app.services.storebench import run_store_bench

    settings = current_app.config["SETTINGS"]
    click.echo(f"digesting {articles} generated articles of {group} numbered from 2^32 + 1,000,000;"
               f" best of {rounds} rounds{f', the catalog holding {catalog:,} files' if catalog else ''} ...",
               err=True)
    result = run_store_bench(articles=articles, source_group=group, chunk_size=settings.chunk_size,
                             batch_chunks=settings.batch_chunks, rounds=rounds, catalog=catalog)
    click.echo(f"stored {result.batches} batches: {result.fragments} fragments, {result.release_chunks} release"
               f" chunks in {result.store_seconds} s = {result.ms_per_release_chunk} ms per release chunk"
               " (releases brought up to date in the same transactions)")
    click.echo(f"store: {result.store_fragments_per_second:,} fragments/s; raw COPY of the same fragments:"
               f" {result.raw_copy_fragments_per_second:,}/s binary ({result.store_vs_raw_copy:.0%} of raw),"
               f" {result.raw_text_copy_fragments_per_second:,}/s text ({result.store_vs_raw_text_copy:.0%})")
    print_json(result.as_dict())
