"""An event recorded in one call and waited in another (OFL101, OFL202): tag it, re-issue on a
mismatch.

Starts from each finding's wait call and follows the event by dataflow: the wait reads an event
kept on `self` (`self.E`, `self.E[i]`, or a local read from there), and the producer is the
method of the same class that records into that storage (`self.E[j].record()`, `ev.record();
self.E[j] = ev`, `self.E = s.record_event()`), whatever the methods are called. The rewrite:

- the producer tags the event, right after recording it, with the capture state it was recorded
  in (`self.E_captured[j] = is_current_stream_capturing()`), kept beside the event on `self`;
- the consumer takes the tag (once: a tag is consumed by the wait it allows) and waits only when
  the event was recorded on its side of a capture boundary and not waited on since; otherwise
  it re-issues the producing copy in this call (`self.producer(i)`, the producer's index
  argument mapped from the wait's subscript) and waits on that, so inside a capture it joins a
  fork of the same capture, and eagerly it never waits on an event recorded in an ended capture
  nor uses tensors a capture made;
- a call of the producer that prefetches across the forward boundary (`self.producer((i + 1) %
  n)`: the wrap-around that issues the next forward's first copy) runs only eagerly: inside a
  capture it would be a fork no replay joins and a second copy per replay; the captured forward
  copies its first block itself, at its start, through the consumer's re-issue.

Compile-safe (`compile_safe.py`): not applied. Which side of a capture boundary the event was
recorded on is known only at run time, through the capture test torch.compile cannot trace; the
findings are left with that reason.

Overlap is kept for every prefetch issued within a forward; the first block of a captured
forward is copied at its start. The fix is unsafe: the re-issue copies again where the original
waited on a stale or foreign event, and an event waited twice is copied twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.helpers import parse_template_expression, parse_template_statement

from offlint.analysis.facts import is_name
from offlint.analysis.kinds import self_attribute
from offlint.analysis.model import CallSite, ClassInfo, FunctionInfo, ModuleModel
from offlint.analysis.syntax import unsubscripted, walk
from offlint.diagnostics import Confidence
from offlint.fixing.capture_test import CaptureTestSpelling
from offlint.fixing.compile_safe import NEEDS_CAPTURE_STATE
from offlint.fixing.edits import Owner, StatementPlan
from offlint.fixing.findings import Found, at_call_sites

RULES = ("OFL101", "OFL202")
# the consumer must know whether the event was recorded on its side of a capture boundary
COMPILE_SAFE_REASON = (
    f"{NEEDS_CAPTURE_STATE}, or issue the copy in the forward that waits on it (no prefetch across "
    "a forward boundary)"
)


def handoff_of(model: ModuleModel, site: CallSite) -> Handoff | None:
    """The hand-off this fixer rewrites at the wait `site` (a producer on `self` it can
    re-issue), or None."""
    handoff = _handoff(model, site)
    return None if isinstance(handoff, str) else handoff


@dataclass(frozen=True)
class Storage:
    """Where the waited event lives: `self.<attr>` or `self.<attr>[<index>]`, and the local it
    was read into first (`ready = self._ready[i]`), if any."""

    attr: str
    index: cst.BaseExpression | None
    local: str | None


@dataclass(frozen=True)
class Producer:
    method: FunctionInfo
    index_param: str | None  # the parameter subscripting the storage where it records
    # the statement line after which the tag is set; None in a one-line body (`def f(self): x`),
    # which has no statement line to put a tag after
    tag_anchor: cst.BaseStatement | None


@dataclass(frozen=True)
class Handoff:
    site: CallSite
    cls: ClassInfo  # whose `self` holds the event (the wait may be in a closure of its method)
    storage: Storage
    producer: Producer
    wait_statement: cst.BaseStatement  # what the consumer's guard wraps


def plan_event_handoffs(
    model: ModuleModel,
    floor: Confidence,
    spelling: CaptureTestSpelling | None = None,
    *,
    compile_safe: bool = False,
) -> StatementPlan:
    """The tag-and-re-issue rewrite of every hand-off found; with `compile_safe` none (the
    consumer's choice needs the capture state at run time) and each is left with that reason."""
    plan = StatementPlan()
    spelling = spelling or CaptureTestSpelling(model, plan, RULES[:1])
    # (class, attr) whose producers and __init__ are planned: "" done, else why they cannot be
    tagged: dict[tuple[int, str], str] = {}
    wrapped: list[tuple[cst.BaseStatement, Owner]] = []
    firsts: dict[tuple[int, str], Owner] = {}
    for found, site in at_call_sites(model, RULES, floor):
        handoff = _handoff(model, site)
        if isinstance(handoff, str):
            plan.not_fixed.append((found.code, found.node, handoff))
            continue
        if compile_safe:
            plan.not_fixed.append((found.code, found.node, COMPILE_SAFE_REASON))
            continue
        owner = Owner(found.code, found.node)
        statement = handoff.wait_statement
        holder = next((w for w in wrapped if _holds(statement, w[0]) or _holds(w[0], statement)), None)
        if holder is not None:
            # two waits in one statement: the first rewrite guards the statement, for both
            plan.join_units(holder[1], owner)
            continue
        wrapped.append((statement, owner))
        cls = handoff.cls
        key = (id(cls), handoff.storage.attr)
        # every wait on one event shares its producer's tags: one fix, all of them or none
        first = firsts.setdefault(key, owner)
        # the producer's forks (OFL103): its copy is now waited on in the call that needs it, or
        # issued again there; with the wrap-around eager-only the pair is fixed by this rewrite
        forks = [
            Owner(fork.code, fork.node)
            for fork, fork_site in at_call_sites(model, ("OFL103",), floor)
            if fork_site.function is handoff.producer.method
        ]
        with plan.owning([owner, first, *forks]):
            if key not in tagged:
                tagged[key] = _plan_tags(model, cls, handoff, plan, spelling)
                if not tagged[key]:
                    _plan_eager_only_wrap_arounds(model, cls, handoff.producer, plan, spelling)
            if tagged[key]:
                plan.not_fixed.append((found.code, found.node, tagged[key]))
                continue
            _plan_guarded_wait(model, handoff, plan, spelling, found.code)
    return plan


def _holds(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return any(n is inner for n in walk(outer))


# ----------------------------------------------------------------------------- dataflow


def _handoff(model: ModuleModel, site: CallSite) -> Handoff | str:
    """The producer/consumer pair of the wait at `site`, or why there is none to rewrite."""
    fn = site.function
    event = site.receiver if site.method == "wait" else site.node.args[0].value
    assert event is not None
    shown = model.code_for(event)
    method = fn
    while method.parent is not None:  # a closure of a method sees its `self`
        method = method.parent
    cls = method.cls
    if cls is None or not method.is_method:
        return f"the wait on `{shown}` is in a module-level function: no producer on `self` to re-issue"
    storage = _storage(fn, event)
    if storage is None:
        collection = _collection_of(fn, event)
        if collection is not None:
            return (
                f"`{shown}` comes out of `self.{collection}`, a collection of events (one per copy): "
                "which copy an entry stands for is not in the code, so none can be re-issued; "
                "record them in the capture that waits on them, or make them external events"
            )
        return (
            f"`{shown}` is not read from `self` (a local or an argument the caller hands in): its "
            "producer is not in this class; if this runs under capture, record the event in the "
            "same capture where it is made, or make it with `torch.cuda.Event(external=True)`"
        )
    producers = [p for p in _records_into(model, cls, storage) if p.method is not method]
    if not producers:
        return f"no method of {cls.name} records `self.{storage.attr}`: the producing copy is not in this class"
    if len({id(p.method) for p in producers}) > 1:
        names = ", ".join(sorted({p.method.name for p in producers}))
        return f"`self.{storage.attr}` is recorded by more than one method ({names}): which copy to re-issue is ambiguous"
    producer = producers[0]
    missing = _arguments_missing(producer, storage) or _not_repeatable(cls, producer, storage, fn)
    if missing:
        return missing
    wait = _wait_statement(fn, site, storage)
    if producer.tag_anchor is None or wait is None:
        one_line = producer.method if producer.tag_anchor is None else fn
        return f"`{one_line.name}` is written on one line (`def {one_line.name}(...): ...`): put its body on lines of its own to have it fixed"
    return Handoff(site, cls, storage, producer, wait)


def _collection_of(fn: FunctionInfo, event: cst.BaseExpression) -> str | None:
    """`x` when the waited event is taken out of the collection `self.x` in this call: a loop over
    it (`for ev in self.x.values()`) or a lookup (`ev = self.x.pop(key)`, `ev = self.x[key]`)."""
    if not isinstance(event, cst.Name):
        return _looked_up(event)
    for loop in walk(fn.node.body):
        if isinstance(loop, cst.For) and _binds(loop.target, event.value):
            for node in walk(loop.iter):
                attr = self_attribute(node) if isinstance(node, cst.Attribute) else None
                if attr is not None:
                    return attr
    for assign in fn.assignments:
        if assign.value is not None and any(_binds(t, event.value) for t in assign.targets):
            found = _looked_up(assign.value)
            if found is not None:
                return found
    return None


_LOOKUPS = frozenset({"pop", "get", "popleft", "popitem", "__getitem__"})


def _looked_up(value: cst.BaseExpression) -> str | None:
    """`x` for `self.x[key]` or `self.x.pop(key)` (and the other lookups)."""
    if isinstance(value, cst.Subscript):
        return self_attribute(value.value)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _LOOKUPS:
        return self_attribute(value.func.value)
    return None


def _binds(target: cst.CSTNode, name: str) -> bool:
    return any(isinstance(node, cst.Name) and node.value == name for node in walk(target))


def _storage(fn: FunctionInfo, event: cst.BaseExpression) -> Storage | None:
    local = None
    if isinstance(event, cst.Name):
        sources = [a.value for a in fn.assignments if any(is_name(t, event.value) for t in a.targets)]
        if len(sources) != 1 or sources[0] is None:
            return None
        local, event = event.value, sources[0]
    index = None
    if isinstance(event, cst.Subscript) and len(event.slice) == 1 and isinstance(event.slice[0].slice, cst.Index):
        index = event.slice[0].slice.value
        event = event.value
    attr = self_attribute(event)
    return Storage(attr, index, local) if attr is not None else None



def _records_into(model: ModuleModel, cls: ClassInfo, storage: Storage) -> list[Producer]:
    """Where the methods of `cls` record an event into the storage (with the parameter it indexes by)."""
    found = _recordings_by_attr(model, cls).get(storage.attr, [])
    if storage.index is None:
        return [p for p in found if p.index_param == ""]
    return [p for p in found if p.index_param]


def _recordings_by_attr(model: ModuleModel, cls: ClassInfo) -> dict[str, list[Producer]]:
    """Every event a method of `cls` records into an attribute of `self`, by attribute: built once
    per class (each wait asked every method: 3 200 methods took 13 s in `check`)."""

    def index() -> dict[str, list[Producer]]:
        by_attr: dict[str, list[Producer]] = {}
        for m in cls.methods.values():
            for attr, producer in _recordings(model, m):
                by_attr.setdefault(attr, []).append(producer)
        return by_attr

    return model.remembered(("events recorded into self by the methods of", id(cls)), index)


def _recordings(model: ModuleModel, method: FunctionInfo) -> list[tuple[str, Producer]]:
    """Every event `method` records into an attribute of `self`, by attribute: found once per
    method (each wait of a class asks about every method)."""

    def find() -> list[tuple[str, Producer]]:
        found: list[tuple[str, Producer]] = []
        recorded_locals = {
            site.receiver.value: site
            for site in method.calls
            if site.method == "record" and isinstance(site.receiver, cst.Name)
        }
        for site in method.calls:
            if site.method == "record" and site.receiver is not None:
                where = _stored_where(site.receiver)
                if where is not None:
                    found.append((where[0], Producer(method, where[1], _line_of(method, site.node))))
        for assign in method.assignments:
            value = assign.value
            made_here = (isinstance(value, cst.Name) and value.value in recorded_locals) or (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "record_event"
            )
            if not made_here:
                continue
            for target in assign.targets:
                where = _stored_where(target)
                if where is not None:
                    found.append((where[0], Producer(method, where[1], _line_of(method, assign.node))))
        return found

    return model.remembered(("events recorded into self by", id(method)), find)


def _stored_where(target: cst.BaseExpression) -> tuple[str, str] | None:
    """(attr, "") for `self.<attr>`, (attr, the parameter name) for `self.<attr>[<param>]`."""
    attr = self_attribute(target)
    if attr is not None:
        return attr, ""
    if (
        isinstance(target, cst.Subscript)
        and len(target.slice) == 1
        and isinstance(target.slice[0].slice, cst.Index)
        and isinstance(target.slice[0].slice.value, cst.Name)
    ):
        attr = self_attribute(target.value)
        if attr is not None:
            return attr, target.slice[0].slice.value.value
    return None


def _line_of(fn: FunctionInfo, inner: cst.CSTNode) -> cst.BaseStatement | None:
    """The innermost statement of `fn`'s body that is or holds `inner`; None when the body is
    one line after the colon (a `SimpleStatementSuite`: no statement line of its own)."""
    if isinstance(fn.node.body, cst.SimpleStatementSuite):
        return None
    best: cst.BaseStatement | None = None
    for node in walk(fn.node.body):
        if isinstance(node, cst.SimpleStatementLine | cst.BaseCompoundStatement) and any(
            n is inner for n in walk(node)
        ):
            best = node  # walked outer first: the last one found is the innermost
    if best is None:
        raise LookupError(f"no statement of {fn.qualname} holds the node")
    return best


def _parameters(fn: FunctionInfo) -> tuple[list[cst.Param], bool]:
    params = fn.node.params
    positional = [*params.posonly_params, *params.params][1:]  # `self` is bound
    variadic = isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None
    return [*positional, *params.kwonly_params], variadic


def _arguments_missing(producer: Producer, storage: Storage) -> str:
    params, _ = _parameters(producer.method)
    needed = [p.name.value for p in params if p.default is None and p.name.value != producer.index_param]
    if needed:
        return (
            f"re-issuing `{producer.method.name}` needs arguments the waiter does not have "
            f"({', '.join(needed)})"
        )
    return ""


_MUTATORS = frozenset({"append", "extend", "insert", "pop", "popleft", "remove", "clear", "update", "add", "setdefault"})


def _not_repeatable(cls: ClassInfo, producer: Producer, storage: Storage, consumer: FunctionInfo) -> str:
    """Why calling the producer once more, from the consumer, could change more than the copy:
    it raises (a state check), or it changes state on `self` other than the event and what the
    consumer only reads. Empty when a re-issue only copies again."""
    method = producer.method
    written_by_consumer = {
        attr for a in consumer.assignments for t in a.targets if (attr := self_attribute(unsubscripted(t))) is not None
    }
    read_by_consumer = {self_attribute(n) for n in walk(consumer.node.body) if isinstance(n, cst.Attribute)}
    changed: list[str] = []
    for assign in method.assignments:
        for target in assign.targets:
            attr = self_attribute(unsubscripted(target))
            if attr is None or attr == storage.attr:
                continue
            if attr in read_by_consumer and attr not in written_by_consumer:
                continue  # what the copy makes, handed to the consumer
            changed.append(attr)
    for site in method.calls:
        receiver = unsubscripted(site.receiver) if site.receiver is not None else None
        attr = self_attribute(receiver) if receiver is not None else None
        if site.method in _MUTATORS and attr is not None and attr != storage.attr:
            changed.append(attr)
    if changed:
        shown = ", ".join(f"`self.{a}`" for a in sorted(set(changed))[:3])
        return f"re-issuing `{method.name}` would change more than the copy ({shown}): not repeatable"
    callees = [
        cls.methods[site.method]
        for site in method.calls
        if site.method in cls.methods and isinstance(site.receiver, cst.Name) and site.receiver.value == "self"
    ]
    for fn in [method, *callees]:
        if any(isinstance(n, cst.Raise) for n in walk(fn.node.body)):
            return f"re-issuing `{method.name}` may raise (`{fn.name}` checks state): not repeatable"
    return ""



def _wait_statement(fn: FunctionInfo, site: CallSite, storage: Storage) -> cst.BaseStatement | None:
    """The line holding the wait, or the `if <event> is not None:` around it when that is all
    the `if` tests."""
    line = _line_of(fn, site.node)
    if line is None:
        return None
    names = {storage.local} if storage.local else set()
    for node in walk(fn.node.body):
        if (
            isinstance(node, cst.If)
            and node.orelse is None
            and isinstance(node.body, cst.IndentedBlock)
            and len(node.body.body) == 1
            and node.body.body[0] is line
            and all(
                (isinstance(n, cst.Name) and (n.value in names or n.value == "None"))
                or self_attribute(n) == storage.attr
                for n in walk(node.test)
                if isinstance(n, cst.Name | cst.Attribute) and not _part_of_self_attribute(n, node.test)
            )
        ):
            return node
    return line


def _part_of_self_attribute(name: cst.CSTNode, test: cst.BaseExpression) -> bool:
    """`self` or `E` inside `self.E` (the attribute itself is judged whole)."""
    for node in walk(test):
        if isinstance(node, cst.Attribute) and (node.value is name or node.attr is name):
            return self_attribute(node) is not None
    return False


# ----------------------------------------------------------------------------- rewrites


def _tag_attr(cls: ClassInfo, attr: str) -> str:
    wanted = f"{attr}_captured"
    taken = set(cls.attrs) | set(cls.methods)
    return wanted if wanted not in taken else f"_offlint{wanted if wanted.startswith('_') else '_' + wanted}"


def _plan_tags(
    model: ModuleModel, cls: ClassInfo, handoff: Handoff, plan: StatementPlan, spelling: CaptureTestSpelling
) -> str:
    """The tag's initial value in `__init__` and its setting where the producer records."""
    init = cls.methods.get("__init__")
    body = init.node.body if init is not None else None
    if init is None or not isinstance(body, cst.IndentedBlock):
        return f"{cls.name} has no `__init__` to initialise the capture tag of `self.{handoff.storage.attr}` in"
    storage, producer = handoff.storage, handoff.producer
    tag = _tag_attr(cls, storage.attr)
    anchor = _init_anchor(init, storage.attr, producer.method.name)
    initial = parse_template_statement(
        f"self.{tag} = {{value}}\n",
        value=cst.Dict([]) if storage.index is not None else cst.Name("None"),
    ).with_changes(
        leading_lines=[
            _comment(
                f"# Where each event of self.{storage.attr} was recorded (True: while capturing);"
                if storage.index is not None
                else f"# Where self.{storage.attr} was recorded (True: while capturing);"
            ),
            _comment("# the wait it allows takes it."),
        ]
    )
    if anchor is None:
        plan.insert_before(body.body[0], [initial], ("OFL101",), "initialise the capture tag")
    else:
        plan.insert_after(anchor, [initial], ("OFL101",), "initialise the capture tag")
    target = (
        f"self.{tag}[{producer.index_param}]" if storage.index is not None else f"self.{tag}"
    )
    set_tag = parse_template_statement(f"{target} = {{capturing}}\n", capturing=spelling.call())
    assert producer.tag_anchor is not None  # a Handoff is made only with one
    plan.insert_after(
        producer.tag_anchor,
        [set_tag],
        ("OFL101", "OFL202"),
        "tag the event with the capture state it was recorded in",
    )
    return ""


def _init_anchor(init: FunctionInfo, attr: str, producer: str) -> cst.BaseStatement | None:
    """The top-level statement of `__init__` that stores `self.<attr>`, or the one before the
    first call of the producer (the tag must exist when it runs); None: put it first."""
    body = init.node.body
    assert isinstance(body, cst.IndentedBlock)
    previous: cst.BaseStatement | None = None
    for stmt in body.body:
        for node in walk(stmt):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == producer:
                return previous
            if isinstance(node, cst.Assign | cst.AnnAssign):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if any(self_attribute(t) == attr for t in targets):
                    return stmt
        previous = stmt
    return previous



def _comment(text: str) -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment(text))


def _fresh_local(fn: FunctionInfo, wanted: str) -> str:
    taken = {n.value for n in walk(fn.node) if isinstance(n, cst.Name)}
    name = wanted
    while name in taken:
        name = f"_{name}"
    return name


def _plan_guarded_wait(
    model: ModuleModel, handoff: Handoff, plan: StatementPlan, spelling: CaptureTestSpelling, code: str
) -> None:
    fn = handoff.site.function
    cls = handoff.cls
    storage, producer = handoff.storage, handoff.producer
    tag = _tag_attr(cls, storage.attr)
    existing = _capture_flag_before(model, fn, handoff.wait_statement)
    capturing = existing or _fresh_local(fn, "capturing")
    index = storage.index
    # the test reads the tag where it is kept (`self.<E>_captured`): capture bookkeeping
    # `check` recognises; taking it (`pop`, or `= None`) lets it allow one wait only
    first_wait: list[cst.BaseStatement]
    if index is not None:
        test = parse_template_expression(f"self.{tag}.pop({{index}}, None) == {capturing}", index=index.deep_clone())
        reissue = parse_template_statement(f"self.{producer.method.name}({{index}})\n", index=index.deep_clone())
        forget = parse_template_statement(f"self.{tag}.pop({{index}}, None)\n", index=index.deep_clone())
        first_wait = []
    else:
        test = parse_template_expression(f"self.{tag} == {capturing}")
        reissue = cst.parse_statement(f"self.{producer.method.name}()\n")
        forget = cst.parse_statement(f"self.{tag} = None\n")
        first_wait = [forget.deep_clone()]
    reissue = reissue.with_changes(
        leading_lines=[
            _comment("# Recorded on the other side of a capture boundary (before this capture began, or"),
            _comment("# in one that has ended), or already waited on: issue it again in this call and wait"),
            _comment("# on that (while capturing, a fork of this capture)."),
        ]
    )
    reread: list[cst.BaseStatement] = []
    if storage.local is not None:  # the wait reads a local taken from the storage before
        reread.append(
            parse_template_statement(f"{storage.local} = self.{storage.attr}[{{index}}]\n", index=index.deep_clone())
            if index is not None
            else cst.parse_statement(f"{storage.local} = self.{storage.attr}\n")
        )
    wait = handoff.wait_statement
    kept_wait = wait.deep_clone().with_changes(leading_lines=[])
    body: list[cst.BaseStatement] = [*first_wait, kept_wait]
    body[0] = body[0].with_changes(
        leading_lines=[
            _comment("# Recorded on this side of any capture boundary and not waited on yet: inside a"),
            _comment("# capture, a fork of this capture."),
        ]
    )
    guard = cst.If(
        test=test,
        body=cst.IndentedBlock(body),
        orelse=cst.Else(cst.IndentedBlock([reissue, forget, *reread, _without_comments(wait.deep_clone())])),
    )
    plan.replace(
        wait,
        guard,
        (code, "OFL103"),
        "wait only on an event recorded on this side of the capture boundary, else copy again",
    )
    if existing is None:
        first = parse_template_statement(f"{capturing} = {{test}}\n", test=spelling.call())
        plan.insert_before(wait, [first], (code,), "the capture state of this call")


def _capture_flag_before(model: ModuleModel, fn: FunctionInfo, wait: cst.BaseStatement) -> str | None:
    """`capturing` of a top-level `capturing = is_current_stream_capturing()` of `fn` before the
    statement holding the wait: the function's own capture flag, reused."""
    body = fn.node.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    for stmt in body.body:
        if any(n is wait for n in walk(stmt)):
            return None
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1
            and isinstance(stmt.body[0].targets[0].target, cst.Name)
            and model.is_capture_test(stmt.body[0].value, fn)
        ):
            name = stmt.body[0].targets[0].target.value
            if not any(  # assigned once: still what it was when the wait runs
                isinstance(t, cst.Name) and t.value == name and a.node is not stmt.body[0]
                for a in fn.assignments
                for t in a.targets
            ):
                return name
    return None


def _without_comments(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """A second copy of a statement, without the comments above it and at its end (they stay on
    the first)."""
    stmt = stmt.with_changes(leading_lines=[])
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.with_changes(trailing_whitespace=cst.TrailingWhitespace())
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock) and len(body.body) == 1:
        return stmt.with_changes(body=body.with_changes(body=[_without_comments(body.body[0])]))
    return stmt


def _plan_eager_only_wrap_arounds(
    model: ModuleModel, cls: ClassInfo, producer: Producer, plan: StatementPlan, spelling: CaptureTestSpelling
) -> None:
    """`self.producer((i + 1) % n)` in the class: runs only eagerly (see the module docstring)."""
    if not producer.index_param:
        return
    for fn in model.functions:
        if fn.cls is not cls or fn is producer.method:
            continue
        for site in fn.calls:
            if site.method != producer.method.name or site.receiver is None or self_attribute(site.receiver) is not None:
                continue
            if not (isinstance(site.receiver, cst.Name) and site.receiver.value == "self"):
                continue
            argument = _argument(site, producer)
            if not (isinstance(argument, cst.BinaryOperation) and isinstance(argument.operator, cst.Modulo)):
                continue
            line = _line_of(fn, site.node)
            if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
                continue
            ahead = argument.left.with_changes(lpar=[], rpar=[])
            guarded = parse_template_statement(
                "if {ahead} < {bound} or not {capturing}:\n    {line}\n",
                ahead=ahead.deep_clone(),
                bound=argument.right.deep_clone(),
                capturing=spelling.call(),
                line=line.deep_clone().with_changes(leading_lines=[]),
            ).with_changes(
                leading_lines=[
                    *line.leading_lines,
                    _comment("# The wrap-around prefetch (the next forward's first copy) runs only eagerly: inside"),
                    _comment("# a capture it would be a fork no replay joins and a second copy per replay; a"),
                    _comment("# captured forward copies its first block itself, at its start."),
                ]
            )
            plan.replace(line, guarded, ("OFL103", "OFL101"), "no wrap-around prefetch while capturing")


def _argument(site: CallSite, producer: Producer) -> cst.BaseExpression | None:
    params, _ = _parameters(producer.method)
    names = [p.name.value for p in params]
    for position, arg in enumerate(site.node.args):
        if arg.keyword is not None:
            if arg.keyword.value == producer.index_param:
                return arg.value
        elif arg.star == "" and position < len(names) and names[position] == producer.index_param:
            return arg.value
    return None


# ----------------------------------------------------------------------------- hazard pairs


def paired_waits(model: ModuleModel, fork: CallSite, floor: Confidence) -> list[tuple[Found, CallSite]]:
    """The waits (OFL101) on an event that the forking call `fork` records on the side stream
    it forks: with the fork, one hazard pair (fork <-> wait, record <-> wait). A join at the fork
    alone silences the fork's finding while that wait still fails the capture (905), so the
    pair is fixed together or not at all."""
    forker = fork.function
    if forker.cls is None:
        return []
    paired = []
    for found, site in at_call_sites(model, RULES[:1], floor):
        method = site.function
        while method.parent is not None:  # a closure of a method sees its `self`
            method = method.parent
        if method.cls is not forker.cls or method is forker:
            continue
        event = site.receiver if site.method == "wait" else site.node.args[0].value
        storage = _storage(site.function, event) if event is not None else None
        if storage is not None and any(p.method is forker for p in _records_into(model, forker.cls, storage)):
            paired.append((found, site))
    return paired
