"""The `edge` program: leases ranges from the coordinator, keeps N NNTP connections busy, digests
batches with edge.digest and posts them over HTTPS; no database, no broker."""
