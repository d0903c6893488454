"""The words of the posts' names, each once a group: what a search's last word, matched as the
start of a word, stands for (app.services.search). GIN's own prefix match reads every post of every
word starting with it before the other words narrow them (counting every match of
`internal bluray` on 10,000,000 posts took 1.2 s, 61 ms for the words whole: docs/benchmarks.md); with the words known, the
search names them and GIN skips as it does for whole words.

A statement-level trigger on posts adds the words of the rows each statement inserts or updates
(the join's upserts, anything else that writes posts), in its transaction: a post found by its
words has them here. The words of posts gone stay (a word no post has costs a search nothing).
Filled from the posts there are.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 03:00:00.000000+00:00
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Bytewise order ("C"): the words starting with a prefix are one range of the key.
    op.execute("""
        CREATE TABLE post_words (
            word text COLLATE "C" NOT NULL,
            group_id integer NOT NULL,
            CONSTRAINT pk_post_words PRIMARY KEY (word, group_id)
        )
    """)
    # In word order, so that two statements adding words of one group take their locks in one
    # order (a group's joins run one at a time anyway).
    op.execute("""
        CREATE FUNCTION post_words_add() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO post_words (word, group_id)
            SELECT DISTINCT w.word, n.group_id FROM new_posts n, unnest(tsvector_to_array(n.words)) AS w(word)
             ORDER BY 1, 2
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END
        $$
    """)
    for event in ("INSERT", "UPDATE"):
        op.execute(f"""
            CREATE TRIGGER posts_words_{event.lower()} AFTER {event} ON posts
            REFERENCING NEW TABLE AS new_posts FOR EACH STATEMENT EXECUTE FUNCTION post_words_add()
        """)
    op.execute("""
        INSERT INTO post_words (word, group_id)
        SELECT DISTINCT w.word, p.group_id FROM posts p, unnest(tsvector_to_array(p.words)) AS w(word)
    """)


def downgrade() -> None:
    for event in ("insert", "update"):
        op.execute(f"DROP TRIGGER posts_words_{event} ON posts")
    op.execute("DROP FUNCTION post_words_add()")
    op.drop_table("post_words")
