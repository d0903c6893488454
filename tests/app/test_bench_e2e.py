"""bench/e2e.py's reading of autovacuum's passes from PostgreSQL's log."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.e2e import autovacuum_cpu  # noqa: E402

# As PostgreSQL 15 writes them with log_autovacuum_min_duration = 0 (from a bench/e2e.py run),
# with a statement's line between and a pass whose usage line never came (the log cut off).
LOG = """\
2026-12-07 22:32:11.399 UTC [15801] LOG:  automatic vacuum of table "seed.public.releases": index scans: 1
\tpages: 0 removed, 120 remain, 120 scanned (100.00% of total)
\tsystem usage: CPU: user: 0.01 s, system: 0.02 s, elapsed: 0.03 s
2026-12-07 22:32:11.580 UTC [15801] LOG:  automatic analyze of table "seed.public.releases"
\tavg read rate: 0.000 MB/s, avg write rate: 0.000 MB/s
\tbuffer usage: 1443 hits, 0 misses, 0 dirtied
\tsystem usage: CPU: user: 0.09 s, system: 0.01 s, elapsed: 0.18 s
2026-12-07 22:32:12.000 UTC [15802] LOG:  statement: SELECT 1
2026-12-07 22:32:19.020 UTC [15801] LOG:  automatic analyze of table "seed.public.fragment_packs_g1"
\tsystem usage: CPU: user: 1.38 s, system: 0.06 s, elapsed: 3.74 s
2026-12-07 22:32:20.020 UTC [15801] LOG:  automatic analyze of table "seed.public.fragment_packs_g12"
\tsystem usage: CPU: user: 0.50 s, system: 0.00 s, elapsed: 0.74 s
2026-12-07 22:32:31.383 UTC [15873] LOG:  automatic analyze of table "template1.pg_catalog.pg_attribute"
\tsystem usage: CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.01 s
2026-12-07 22:32:40.000 UTC [15801] LOG:  automatic vacuum of table "seed.public.posts": index scans: 0
"""


def test_each_pass_is_summed_by_kind_and_table_the_partitions_under_their_table():
    assert autovacuum_cpu(LOG) == {
        "analyze fragment_packs": 1.94,
        "analyze releases": 0.1,
        "vacuum releases": 0.03,
        "analyze pg_attribute": 0.01,
    }
    assert list(autovacuum_cpu(LOG))[0] == "analyze fragment_packs"  # the largest first


def test_a_log_without_passes_gives_none():
    assert autovacuum_cpu("") == {}
    assert autovacuum_cpu("\tsystem usage: CPU: user: 9.00 s, system: 0.00 s, elapsed: 9.00 s\n") == {}
