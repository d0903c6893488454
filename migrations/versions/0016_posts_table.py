"""Posts kept as rows: the view `posts` becomes a table the join keeps up to date, searched by the
words of its releases' names and read newest first; indexes of files by release and of
fragments by file for the NZB export

A search reads `posts` only: the words of every name of a post's releases (the column words,
generated from names), its figures, its last article. Indexes: GIN over words, and the post's
last article (newest first) overall and within a group. The GIN index's pending list (new
rows' words, merged into the index in bulk) is kept to 512 kB: every search reads it whole, and
the default 4 MB would hold tens of thousands of posts' words; without a pending list each row
costs half as much again to write. The index of migration 0012 over the
releases' names goes: nothing reads it any more.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 12:00:00.000000+00:00
"""

from alembic import op


revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# The colons are escaped for SQLAlchemy's text(), which would read ':alnum' as a parameter.
NAMES_WORDS = r"to_tsvector('simple'::regconfig, regexp_replace(names, '[^[\:alnum\:]]+', ' ', 'g'))"
RELEASE_NAME_WORDS = r"to_tsvector('simple'::regconfig, regexp_replace(name, '[^[\:alnum\:]]+', ' ', 'g'))"

POSTS_TABLE = f"""
CREATE TABLE posts (
    key bigint NOT NULL,
    parts_expected bigint NOT NULL,
    parts_seen bigint NOT NULL,
    bytes bigint NOT NULL,
    first_post timestamptz,
    last_post timestamptz,
    group_id integer NOT NULL,
    releases integer NOT NULL,
    files_seen integer NOT NULL,
    completion real NOT NULL,
    name text NOT NULL,
    poster text NOT NULL,
    names text NOT NULL,
    posters text NOT NULL,
    words tsvector GENERATED ALWAYS AS ({NAMES_WORDS}) STORED,
    CONSTRAINT pk_posts PRIMARY KEY (group_id, key)
) WITH (fillfactor = 80)
"""

# Every post of the catalog, as app.services.ingest.posts.REFRESH_SEVERAL sums one.
FILL = """
INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen, parts_expected, parts_seen,
                   bytes, completion, first_post, last_post)
SELECT r.group_id, coalesce(p.post_key, r.key),
       (array_agg(r.name ORDER BY r.files_seen DESC, r.key))[1],
       (array_agg(r.poster ORDER BY r.files_seen DESC, r.key))[1],
       string_agg(DISTINCT r.name, E'\\n'),
       string_agg(DISTINCT r.poster, E'\\n'),
       count(*),
       least(sum(r.files_seen), 2147483647),
       least(sum(r.parts_expected), 9223372036854775807),
       least(sum(r.parts_seen), 9223372036854775807),
       least(sum(r.bytes), 9223372036854775807),
       CASE WHEN sum(r.parts_expected) > 0
            THEN least(100.0, 100.0 * sum(r.parts_seen) / sum(r.parts_expected)) ELSE 0 END,
       min(r.first_post), max(r.last_post)
  FROM releases r
  LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key
 GROUP BY r.group_id, coalesce(p.post_key, r.key)
"""

POSTS_VIEW = """
CREATE VIEW posts AS
SELECT r.group_id,
       coalesce(p.post_key, r.key) AS key,
       (array_agg(r.name ORDER BY r.files_seen DESC, r.key))[1] AS name,
       (array_agg(r.poster ORDER BY r.files_seen DESC, r.key))[1] AS poster,
       count(*) AS releases,
       least(sum(r.files_seen), 2147483647)::int AS files_seen,
       least(sum(r.parts_expected), 9223372036854775807)::bigint AS parts_expected,
       least(sum(r.parts_seen), 9223372036854775807)::bigint AS parts_seen,
       least(sum(r.bytes), 9223372036854775807)::bigint AS bytes,
       CASE WHEN sum(r.parts_expected) > 0
            THEN least(100.0, 100.0 * sum(r.parts_seen) / sum(r.parts_expected))::real ELSE 0 END AS completion,
       min(r.first_post) AS first_post,
       max(r.last_post) AS last_post
  FROM releases r
  LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key
 GROUP BY r.group_id, coalesce(p.post_key, r.key)
"""


def upgrade() -> None:
    op.execute("DROP VIEW posts")
    op.execute(POSTS_TABLE)
    op.execute(FILL)
    op.execute("CREATE INDEX ix_posts_words ON posts USING gin (words) WITH (gin_pending_list_limit = 512)")
    op.execute("CREATE INDEX ix_posts_newest ON posts (last_post DESC NULLS LAST, group_id, key)")
    op.execute("CREATE INDEX ix_posts_group_newest ON posts (group_id, last_post DESC NULLS LAST, key)")
    op.execute("DROP INDEX ix_releases_name_words")
    op.execute("CREATE INDEX ix_files_release ON files (release_key)")
    op.execute("CREATE INDEX ix_fragments_file ON fragments (file_key)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_fragments_file")
    op.execute("DROP INDEX ix_files_release")
    op.execute(f"CREATE INDEX ix_releases_name_words ON releases USING gin ({RELEASE_NAME_WORDS})")
    op.execute("DROP TABLE posts")
    op.execute(POSTS_VIEW)
