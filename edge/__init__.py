"""The edge: the digest library shared with the data center, and the node program.

- edge.digest: overview lines read from NNTP and turned into files, releases and batches; the range
  loop. It imports only msgpack and the standard library, and the data center imports it.
- edge.node: the `edge` program that leases ranges from the coordinator over HTTPS, fetches them
  with N connections, digests them with edge.digest and posts the batches.

Nothing here imports the data center (app/), Celery, Redis, SQLAlchemy, psycopg or Flask.
"""
