"""The edge node and the digest library shared with the data center.

Nothing here imports the data center (app/), Celery, Redis, SQLAlchemy, psycopg or Flask:
the edge installs and runs with msgpack and the standard library only.
"""
