"""Operator rules: kept in the database, checked by the digest library's own parser, handed
to nodes with each lease. The executable rule is built into the digest and always on.

Rules of the field ``flag`` look at what an inspection found in a post (app.services.inspections:
``executable``, ``password``, ``password_url``, ``encrypted_headers``) rather than at headers:
the data center applies them when a node posts an inspection's result (flag_verdict), and they
are never handed to nodes. Their pattern is a regex searched in each flag's name; the first
rule that matches one of the flags decides (drop, or keep: protected from the built-in rule
INSPECTED_EXECUTABLE_RULE, which drops a post whose archive holds an executable)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.models import SeedRule
from app.services.errors import Conflict, NotFound, ServiceError
from edge.digest.rules import EXECUTABLE_RULE, Rule, RuleError


def rule_data(rule: SeedRule) -> dict[str, str]:
    data = {"name": rule.name, "field": rule.field, "pattern": rule.pattern, "action": rule.action}
    if rule.groups:
        data["groups"] = rule.groups
    return data


FLAG_FIELD = "flag"
# The enabled header rules, in order, as a JSON array of rule_data's objects (groups null where a
# rule applies to every group): a lease reads them in its own statement (app.services.leases.GRANT).
ACTIVE_RULES_JSON = f"""(SELECT coalesce(json_agg(json_build_object('name', r.name, 'field', r.field,
        'pattern', r.pattern, 'action', r.action, 'groups', r.groups) ORDER BY r.id), '[]')
        FROM seed_rules r WHERE r.enabled AND r.field <> '{FLAG_FIELD}')"""
INSPECTED_EXECUTABLE_RULE = "inspected-executable"


def add_rule(session: Session, data: Mapping[str, str | None]) -> SeedRule:
    try:
        if isinstance(data, dict) and data.get("field") == FLAG_FIELD:
            # The digest's parser checks every other part of the rule: the field it knows stands in.
            Rule.from_data({**data, "field": "subject"})
        else:
            Rule.from_data(data)
    except RuleError as exc:
        raise ServiceError(str(exc), code="bad_rule") from None
    if data["name"] == INSPECTED_EXECUTABLE_RULE:
        raise ServiceError(f"{INSPECTED_EXECUTABLE_RULE} is a built-in rule's name", code="bad_rule")
    if session.scalar(select(SeedRule.id).where(SeedRule.name == data["name"])) is not None:
        raise Conflict(f"rule already exists: {data['name']}", code="rule_exists")
    rule = SeedRule(
        name=data["name"],
        field=data["field"],
        pattern=data["pattern"],
        action=data.get("action", "drop"),
        groups=data.get("groups") or None,
    )
    session.add(rule)
    session.flush()
    return rule


def get_rule(session: Session, name: str, *, lock: bool = False) -> SeedRule:
    query = select(SeedRule).where(SeedRule.name == name)
    rule = session.scalar(query.with_for_update() if lock else query)
    if rule is None:
        if name == EXECUTABLE_RULE:
            raise NotFound(
                f"no such rule: {name} (the executable rule is built into the digest, not an operator rule)",
                code="unknown_rule",
            )
        raise NotFound(f"no such rule: {name}", code="unknown_rule")
    return rule


def remove_rule(session: Session, name: str) -> SeedRule:
    rule = get_rule(session, name, lock=True)
    session.delete(rule)
    session.flush()
    return rule


def set_enabled(session: Session, name: str, enabled: bool) -> tuple[SeedRule, bool]:
    """Enable or disable a rule; (the rule, whether it changed). Nodes get the change with their
    next lease (active_rules hands out enabled rules only); a range already leased keeps the rules
    it was leased with."""
    rule = get_rule(session, name, lock=True)
    changed = rule.enabled != enabled
    rule.enabled = enabled
    session.flush()
    return rule, changed


def list_rules(session: Session) -> list[SeedRule]:
    return list(session.scalars(select(SeedRule).order_by(SeedRule.id)))


def active_rules(session: Session, group: str) -> list[dict[str, str]]:
    """The enabled header rules that apply to this group, in order, as data for the node."""
    return applying(session.execute(text(f"SELECT {ACTIVE_RULES_JSON}")).scalar_one(), group)


def applying(rules: Iterable[Mapping[str, str | None]], group: str) -> list[dict[str, str]]:
    """Of the enabled header rules (ACTIVE_RULES_JSON's), those that apply to this group, in
    order, as data for the node (rule_data's)."""
    return [
        {name: value for name, value in rule.items() if value is not None}
        for rule in rules
        if not rule["groups"] or fnmatchcase(group, rule["groups"])
    ]


def posts_dropped(session: Session) -> dict[str, int]:
    """How many posts each flag rule (and the built-in one) dropped for what inspections found."""
    rows = session.execute(
        text("SELECT dropped_by, count(*) FROM post_inspections WHERE dropped_by IS NOT NULL GROUP BY dropped_by")
    )
    return dict(rows.all())


def flag_verdict(session: Session, group: str, flags: list[str]) -> str | None:
    """The rule that drops a post an inspection flagged so, or None to keep it: the first enabled
    flag rule of the group matching one of the flags decides; else the built-in rule drops a post
    flagged executable."""
    if not flags:
        return None
    for rule in list_rules(session):
        if rule.enabled and rule.field == FLAG_FIELD and (not rule.groups or fnmatchcase(group, rule.groups)):
            pattern = re.compile(rule.pattern, re.IGNORECASE)
            if any(pattern.search(flag) for flag in flags):
                return rule.name if rule.action == "drop" else None
    return INSPECTED_EXECUTABLE_RULE if "executable" in flags else None
