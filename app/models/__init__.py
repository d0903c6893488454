"""The catalog's tables; importing this package registers every model on Base.metadata."""

from app.models.apikeys import ApiKey
from app.models.batches import SeedBatch, StoredFragments
from app.models.catalog import (
    File,
    FragmentPack,
    MessageHost,
    Post,
    PostGrab,
    PostWord,
    Release,
    ReleaseChunk,
    ReleasePost,
    RuleCount,
)
from app.models.groups import Group
from app.models.inspections import InspectionJoin, InspectionState, PostFileHash, PostInspection
from app.models.operators import OperatorKey
from app.models.nodes import SeedNode
from app.models.ranges import SeedPlan, SeedRange
from app.models.rules import SeedRule
from app.models.spool import SpoolChunk

__all__ = [
    "ApiKey",
    "File",
    "FragmentPack",
    "Group",
    "InspectionJoin",
    "InspectionState",
    "MessageHost",
    "OperatorKey",
    "Post",
    "PostGrab",
    "PostWord",
    "PostFileHash",
    "PostInspection",
    "Release",
    "ReleaseChunk",
    "ReleasePost",
    "RuleCount",
    "SeedBatch",
    "SeedNode",
    "SeedPlan",
    "SeedRange",
    "SeedRule",
    "SpoolChunk",
    "StoredFragments",
]
