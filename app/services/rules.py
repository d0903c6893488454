"""Operator rules: kept in the database, checked by the digest library's own parser, handed
to nodes with each lease. The executable rule is built into the digest and always on."""
from __future__ import annotations

from fnmatch import fnmatchcase

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import SeedRule
from app.services.errors import Conflict, NotFound, ServiceError
from edge.digest.rules import EXECUTABLE_RULE, Rule, RuleError


def rule_data(rule: SeedRule) -> dict:
    data = {"name": rule.name, "field": rule.field, "pattern": rule.pattern, "action": rule.action}
    if rule.groups:
        data["groups"] = rule.groups
    return data


def add_rule(session: Session, data: dict) -> SeedRule:
    try:
        Rule.from_data(data)
    except RuleError as exc:
        raise ServiceError(str(exc), code="bad_rule") from None
    if session.scalar(select(SeedRule.id).where(SeedRule.name == data["name"])) is not None:
        raise Conflict(f"rule already exists: {data['name']}", code="rule_exists")
    rule = SeedRule(
        name=data["name"], field=data["field"], pattern=data["pattern"],
        action=data.get("action", "drop"), groups=data.get("groups") or None,
    )
    session.add(rule)
    session.flush()
    return rule


def get_rule(session: Session, name: str, *, lock: bool = False) -> SeedRule:
    query = select(SeedRule).where(SeedRule.name == name)
    rule = session.scalar(query.with_for_update() if lock else query)
    if rule is None:
        if name == EXECUTABLE_RULE:
            raise NotFound(f"no such rule: {name} (the executable rule is built into the digest, not an"
                           " operator rule)", code="unknown_rule")
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


def active_rules(session: Session, group: str) -> list[dict]:
    """The enabled rules that apply to this group, in order, as data for the node."""
    return [
        rule_data(r) for r in list_rules(session)
        if r.enabled and (not r.groups or fnmatchcase(group, r.groups))
    ]
