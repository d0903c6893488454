"""What the seed produces: files (details once), fragments, releases, release chunks, rule counts.

Files, fragment packs and release chunks are partitioned by group (LIST on group_id); the partitions
are made on demand by app.db.ensure_group_partitions (a partition's group_id defaults to its group). No foreign keys on these hot tables: a
row can only land in an existing group's partition, and keys come from the digest library.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import (
    REAL,
    BigInteger,
    Boolean,
    Computed,
    Date,
    DateTime,
    Identity,
    Index,
    Integer,
    PrimaryKeyConstraint,
    SmallInteger,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base

PARTITION_BY_GROUP = {"postgresql_partition_by": "LIST (group_id)"}
# A post's names as words (app.services.search): everything that is not a letter or a digit
# (WORD_BREAK) is a space, words lower-cased by the 'simple' configuration (no stemming, no stop
# words).
WORD_BREAK = "[^[:alnum:]]+"
POST_WORDS = f"to_tsvector('simple'::regconfig, regexp_replace(names, '{WORD_BREAK}', ' ', 'g'))"
# The hours a post's last article is in, as words (migration 0027's function).
POST_TIMES = "post_times(last_post)"


class File(Base):
    """One posted file; its details are stored once, keyed by the digest's stable file key (its
    poster with its release: see poster)."""

    __tablename__ = "files"
    __table_args__ = (
        # The store's look-up probes this key for each of a batch's files, and the key keeps a
        # file from being stored twice.
        PrimaryKeyConstraint("group_id", "key"),
        # A post's files (the NZB export, a post's details, release repair). Each partition is one
        # group's, so the group is not in the index.
        Index("ix_files_release", "release_key"),
        PARTITION_BY_GROUP,
    )

    # Columns in the table's order: 8-byte ones first, then 4-byte, then texts (no padding).
    key: Mapped[int] = mapped_column(BigInteger)
    release_key: Mapped[int] = mapped_column(BigInteger)
    posted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    group_id: Mapped[int] = mapped_column(Integer)
    file_index: Mapped[int | None] = mapped_column(Integer)
    file_count: Mapped[int | None] = mapped_column(Integer)
    parts: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    # NULL when it is its release's poster (always, as the digest builds releases): the poster is
    # stored once, with the release. Read coalesce(files.poster, releases.poster).
    poster: Mapped[str | None] = mapped_column(Text)


class FragmentPack(Base):
    """Up to PACK_ARTICLES articles of one batch, an array a column: the i-th article of the pack
    is (file_keys[i], articles[i], parts[i], bytes[i], host_ids[i], message_locals[i]), and an
    article number appears once per group.

    The articles of a batch are stored in packs rather than a row each (migration 0030): a row an
    article cost 72 bytes of heap and its COPY with its index by file was the largest part of
    PostgreSQL's work for each batch. The arrays are compressed by lz4. The one index is a GIN of
    the files' keys, so the packs of a file are found without reading the group's: read them as
    app.services.fragments does. The view `fragments` unpacks every pack, in the columns of a row
    an article, and `fragments_with_ids` has each message-id whole (message_local || its host,
    stored once in message_hosts). The packs have no key: a batch's go in whole, recorded in
    stored_fragments, so an article is stored once. The mapper's primary key is (group_id,
    articles) all the same.
    """

    __tablename__ = "fragment_packs"
    __table_args__ = (
        Index("ix_fragment_packs_files", "file_keys", postgresql_using="gin"),
        PARTITION_BY_GROUP,
    )

    group_id: Mapped[int] = mapped_column(Integer)
    file_keys: Mapped[list[int]] = mapped_column(ARRAY(BigInteger))
    articles: Mapped[list[int]] = mapped_column(ARRAY(BigInteger))
    parts: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    bytes: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    host_ids: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    message_locals: Mapped[list[str]] = mapped_column(ARRAY(Text))

    __mapper_args__ = {"primary_key": [group_id, articles]}


# Articles a pack holds at most (the store's packs, and migration 0030's).
PACK_ARTICLES = 100


class MessageHost(Base):
    """A message-id's host, stored once: from its last '@' to its end ('>' included; '' for a
    message-id without an '@'). Posting tools write a handful of hosts, so storing the host once
    saves most of a message-id's bytes in every fragment (migration 0007)."""

    __tablename__ = "message_hosts"

    id: Mapped[int] = mapped_column(Integer, Identity(always=False), primary_key=True)
    host: Mapped[str] = mapped_column(Text, unique=True)


class Release(Base):
    """Files gathered together by the digest (one poster, one name, one file count); its
    aggregates are kept up to date by the store. Releases of one post (its poster changed part
    way, its .nfo had a counter of its own) are joined by app.services.ingest.posts into
    release_posts; the table `posts` holds each post summed over its releases."""

    __tablename__ = "releases"
    __table_args__ = (
        # The join's look-up of a name's releases; not led by the group, so that the store's probes by
        # (group_id, key) keep to the primary key, also in a group the planner has no statistics of.
        Index("ix_releases_name_hash", "name_hash", "group_id", postgresql_where=text("name_hash IS NOT NULL")),
    )

    group_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    poster: Mapped[str] = mapped_column(Text)
    file_count: Mapped[int | None] = mapped_column(Integer)
    files_seen: Mapped[int] = mapped_column(Integer, server_default="0")
    parts_expected: Mapped[int] = mapped_column(BigInteger, server_default="0")
    parts_seen: Mapped[int] = mapped_column(BigInteger, server_default="0")
    bytes: Mapped[int] = mapped_column(BigInteger, server_default="0")
    completion: Mapped[float] = mapped_column(REAL, server_default="0")
    first_post: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_post: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    joined_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The hash of the name folded (app.services.ingest.catalog.name_hash): what posts are joined
    # by; NULL for a name too short to join anything.
    name_hash: Mapped[int | None] = mapped_column(BigInteger)
    # Every file the store saw of it in the batch that made it is a metadata file (.nfo, .sfv,
    # .nzb, .jpg...): with one file and a file count of one or none, a companion (posts).
    metadata_only: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))


class ReleasePost(Base):
    """A release joined into a post whose key (post_key: the least key of the post's sets) is not
    its own; a release without a row is a post of its own. Written by app.services.ingest.posts
    only (the store never touches it, so the two never wait on each other's row locks)."""

    __tablename__ = "release_posts"
    __table_args__ = (Index("ix_release_posts_post", "group_id", "post_key"),)

    group_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    post_key: Mapped[int] = mapped_column(BigInteger)


class Post(Base):
    """A post as users find it: its releases summed (app.services.ingest.posts keeps the row up to
    date as it joins releases; a release alone is a post of its own). name and poster are those of
    its release with the most files; names and posters every distinct one of its releases', one a
    line. words are the words of names (app.services.search), generated by PostgreSQL."""

    __tablename__ = "posts"
    __table_args__ = (
        PrimaryKeyConstraint("group_id", "key"),
        # New rows' words wait in a pending list, merged into the index in bulk; every search reads
        # the list whole, so it is kept small (migration 0016). The hours of times with them: a
        # search among the newest posts intersects both in the index (migration 0027).
        Index(
            "ix_posts_words",
            "words",
            "times",
            postgresql_using="gin",
            postgresql_with={"gin_pending_list_limit": 512},
        ),
        # Newest first: every post, and a group's.
        Index("ix_posts_newest", text("last_post DESC NULLS LAST"), "group_id", "key"),
        Index("ix_posts_group_newest", "group_id", text("last_post DESC NULLS LAST"), "key"),
        # A category's posts newest first: the newznab functions' searches without words (Sonarr's
        # and Radarr's RSS sync ask for the newest of their categories).
        Index("ix_posts_category_newest", "category", text("last_post DESC NULLS LAST"), "group_id", "key"),
        # Searches by the ids an inspection found (t=movie&imdbid=, t=tvsearch&tvdbid=...).
        Index("ix_posts_imdb", "imdb", postgresql_where=text("imdb IS NOT NULL")),
        Index("ix_posts_tvdb", "tvdb", postgresql_where=text("tvdb IS NOT NULL")),
        Index("ix_posts_tvmaze", "tvmaze", postgresql_where=text("tvmaze IS NOT NULL")),
        Index("ix_posts_tmdb", "tmdb", postgresql_where=text("tmdb IS NOT NULL")),
        # The post's row changes with every batch adding to it: room on its page for the new one.
        # Its dead versions, among the newest posts where searches look first, are vacuumed away
        # with their index entries past a few thousand (migration 0029).
        {
            "postgresql_with": {
                "fillfactor": 80,
                "autovacuum_vacuum_scale_factor": 0,
                "autovacuum_vacuum_threshold": 2000,
                "vacuum_index_cleanup": "on",
            }
        },
    )

    # Columns in the table's order: 8-byte ones first, then 4-byte, then texts (no padding).
    key: Mapped[int] = mapped_column(BigInteger)
    parts_expected: Mapped[int] = mapped_column(BigInteger)
    parts_seen: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    first_post: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_post: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    group_id: Mapped[int] = mapped_column(Integer)
    releases: Mapped[int] = mapped_column(Integer)
    files_seen: Mapped[int] = mapped_column(Integer)
    completion: Mapped[float] = mapped_column(REAL)
    name: Mapped[str] = mapped_column(Text)
    poster: Mapped[str] = mapped_column(Text)
    names: Mapped[str] = mapped_column(Text)
    posters: Mapped[str] = mapped_column(Text)
    words: Mapped[str] = mapped_column(TSVECTOR, Computed(POST_WORDS, persisted=True))
    # What its name says (app.services.postnames, from edge.digest.names; migration 0018): the
    # newznab category by what the post is, and the fields the newznab functions filter on and
    # show. episode and episode_last bound its episodes (both NULL for a season pack or a film);
    # resolution is the height (720 for 720p); languages are comma-separated.
    category: Mapped[int] = mapped_column(SmallInteger, server_default="8010")
    year: Mapped[int | None] = mapped_column(SmallInteger)
    season: Mapped[int | None] = mapped_column(SmallInteger)
    episode: Mapped[int | None] = mapped_column(SmallInteger)
    episode_last: Mapped[int | None] = mapped_column(SmallInteger)
    resolution: Mapped[int | None] = mapped_column(SmallInteger)
    air_date: Mapped[date | None] = mapped_column(Date)
    title: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str | None] = mapped_column(Text)
    video: Mapped[str | None] = mapped_column(Text)
    languages: Mapped[str | None] = mapped_column(Text)
    # What an inspection of it found (app.services.inspections; migration 0019): newznab's
    # password (0 none, 1 passworded, 2 an archive inside) and the ids its NFO names.
    password: Mapped[int | None] = mapped_column(SmallInteger)
    imdb: Mapped[int | None] = mapped_column(Integer)
    tvdb: Mapped[int | None] = mapped_column(Integer)
    tvmaze: Mapped[int | None] = mapped_column(Integer)
    tmdb: Mapped[int | None] = mapped_column(Integer)
    # The hour, the day and the 16 days its last article is in, as words (post_times, migration
    # 0027): a search among the newest posts asks for those since its window's start.
    times: Mapped[str | None] = mapped_column(TSVECTOR, Computed(POST_TIMES, persisted=True))


class PostWord(Base):
    """A word of the names of a group's posts (migration 0026: a trigger on posts adds them),
    what a search's last word stands for when it is matched as the start of a word
    (app.services.search). In bytewise order, so that the words with a prefix are one range."""

    __tablename__ = "post_words"

    word: Mapped[str] = mapped_column(Text(collation="C"), primary_key=True)
    group_id: Mapped[int] = mapped_column(Integer, primary_key=True)


class PostGrab(Base):
    """How often a post's NZB was downloaded through the newznab API (app.services.grabs)."""

    __tablename__ = "post_grabs"

    group_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    post_key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    grabs: Mapped[int] = mapped_column(BigInteger, server_default="0")


class ReleaseChunk(Base):
    """What one batch saw of one release; batch_from is the batch's first article (bigint)."""

    __tablename__ = "release_chunks"
    __table_args__ = PARTITION_BY_GROUP

    group_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    release_key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    batch_from: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    range_id: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[int] = mapped_column(Integer)
    fragments: Mapped[int] = mapped_column(Integer)
    bytes: Mapped[int] = mapped_column(BigInteger)
    first_post: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_post: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RuleCount(Base):
    """Per batch and rule: what the rule dropped; the rule '' counts what no rule dropped."""

    __tablename__ = "rule_counts"

    range_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    batch_from: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    rule: Mapped[str] = mapped_column(Text, primary_key=True)
    group_id: Mapped[int] = mapped_column(Integer, index=True)
    releases: Mapped[int] = mapped_column(Integer)
    files: Mapped[int] = mapped_column(Integer)
    fragments: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
