"""The garbage collector kept out of the store's and the join's bulk work (app.collector), and a
worker's pool process freezing what it loaded once it has started."""

from __future__ import annotations

import gc

import pytest
from celery.signals import worker_process_init

import app.celery_app  # noqa: F401  (its receivers of the worker's signals)
from app.collector import collector_paused
from app.db import session_scope
from app.services.ingest import posts, store
from tests.app.factories import BIG, accept, lease_one_range
from tests.app.test_posts import batch_of, overview, post_lines
from tests.fixtures.queries import query


def test_the_collector_is_paused_meanwhile_and_as_it_was_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: still paused after the inner one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("a failing join")
    assert gc.isenabled()
    gc.disable()  # a caller that paused it keeps it paused
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_store_and_the_join_run_with_the_collector_paused(clean_db, monkeypatch):
    seen: dict[str, bool] = {}
    load_catalog, names_of = store.load_catalog, posts.names_of

    def loading(*args, **kwargs):
        seen["store"] = gc.isenabled()
        return load_catalog(*args, **kwargs)

    def naming(*args, **kwargs):
        seen["join"] = gc.isenabled()
        return names_of(*args, **kwargs)

    monkeypatch.setattr(store, "load_catalog", loading)
    monkeypatch.setattr(posts, "names_of", naming)
    lines = overview(BIG, post_lines())
    node, range_id = lease_one_range(BIG, BIG + len(lines) - 1)
    batch_id = accept(node, range_id, batch_of(BIG, lines))
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    assert gc.isenabled()
    with session_scope() as s:
        posts.join_batch(s, batch_id)
    assert gc.isenabled()
    assert seen == {"store": False, "join": False}
    assert query(clean_db, "SELECT count(*) FROM posts")[0][0] == 3  # the post, the other, the repost


def test_a_pool_process_freezes_what_it_loaded_once_started(clean_db):
    before = gc.get_freeze_count()
    try:
        worker_process_init.send(sender=None)  # as Celery sends it in each pool process it forks
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
