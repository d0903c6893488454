#!/bin/sh
# Run once by the postgres image when it makes the cluster (/docker-entrypoint-initdb.d): lets the
# seed user stream the WAL to a replica on the Compose network (compose.yaml's postgres-replica),
# with the password as every other connection. wal_level replica and max_wal_senders are
# PostgreSQL's defaults.
echo "host replication seed all scram-sha-256" >>"$PGDATA/pg_hba.conf"
