"""Ingest: batches checked at the door, stored into the catalog, retried, repaired.

A batch's life cycle (app.models.batches.BatchState): the API decodes and checks a posted body
whole (decode.check_body, with checks.check_batch) and accepts it (accept.accept_batch), its raw body
durable in seed_batches ('accepted'); after the commit the API enqueues the ingest task. The store
(store.store_batch) loads its rows and brings the releases it touched up to date in the task's
transaction, the fragments on a connection of their own committed just before it, and marks it
'stored'; then, in a transaction of its own, its releases are joined into their posts
(posts.join_batch) and it is 'joined'. A failed attempt is counted (lifecycle.record_failure):
after a few the batch is 'failed', a poison batch an operator can give fresh attempts
(lifecycle.retry_failed). Beat's requeue sweep (lifecycle.pending_batches) sends again the batches
whose task was lost, in either state. Release repair (repair.repair_batch) recomputes a stored
batch's releases whole before joining them. Each step runs under a row lock
on the batch and only from the state before it, and moves the state in the same transaction, so a
redelivered task finds the work done and does nothing.

Modules:
- accept: a batch accepted: its raw body stored, the range's resume point moved (accept_batch);
- checks: what a batch must hold beyond its format (check_batch), and the errors the API answers;
- decode: a body decoded, whole for the API (check_body), table by table for the store (StoredBatch);
- hosts: message-ids cut before their host, the hosts stored once (message_hosts);
- pgcopy: COPY payloads (binary and text) and the COPYs that send them;
- store: store_batch and load_catalog, the fragments' COPY;
- catalog: the keyed rows (files, release chunks, releases) and the known releases' update;
- posts: releases of one post joined (its poster changed, its .nfo had its own counter);
- repair: release repair;
- lifecycle: failed attempts, lost tasks, retries.
"""
