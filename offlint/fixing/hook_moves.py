"""A hook that moves or casts its module back after a captured forward (OFL201 on a module
move): keep what the module held before the capture and put it back instead.

`pre_forward(module)` casts (`module.to(compute_dtype)`) and `post_forward(module, out)` casts
back (`module.to(storage_dtype)`): inside a capture the cast back makes new tensors in the
graph's pool that only a replay writes, and the module leaves the capture holding them (the next
eager forward reads garbage); the captured cast of the next replay reads the tensors the cast
back dropped. The rewrite: while capturing, `pre_forward` keeps the module's tensors as they are
before its move (`module.state_dict(keep_vars=True)`, by name), and `post_forward` points the
module's tensors back at them instead of moving again. The module leaves the capture exactly as
it entered it (its replays read those same, live tensors); eager forwards are unchanged.

Needs the move in `post_forward` to undo one in `pre_forward` of the same hook class (that is
what makes "put back" equal to "move back"), and an `__init__` to start the kept state in.
Unsafe: while capturing, the post-forward move no longer runs (a cast that changed values on
the way back would be skipped). Compile-safe (`compile_safe.py`): not applied, since it keeps
and puts back only while capturing; the finding is left with that reason.
"""

from __future__ import annotations

import libcst as cst

from offlint.analysis.model import ClassInfo, ModuleModel
from offlint.analysis.module_moves import ModuleMove, module_moves
from offlint.analysis.syntax import walk
from offlint.diagnostics import Confidence
from offlint.fixing.capture_test import CaptureTestSpelling
from offlint.fixing.compile_safe import NEEDS_CAPTURE_STATE
from offlint.fixing.edits import Owner, StatementPlan
from offlint.fixing.findings import findings

RULES = ("OFL201",)
COMPILE_SAFE_REASON = (
    f"{NEEDS_CAPTURE_STATE}, or keep the module where its forward needs it (no move back after it)"
)
_KEPT = "_kept_before_capture"


def plan_hook_moves(model: ModuleModel, floor: Confidence, *, compile_safe: bool = False) -> StatementPlan:
    plan = StatementPlan()
    spelling = CaptureTestSpelling(model, plan, RULES)
    moves = None
    done: dict[int, Owner] = {}
    for found in findings(model, RULES, floor):
        if moves is None:
            moves = module_moves(model)
        move = next((m for m in moves if m.site.node is found.node and m.method == "post_forward"), None)
        if move is None:
            continue  # not a hook's move: another fixer's OFL201
        cls = move.site.function.cls
        assert cls is not None
        paired = next(
            (m for m in moves if m.site.function.cls is cls and m.method == "pre_forward" and m.target is move.target),
            None,
        )
        if paired is None:
            plan.not_fixed.append(
                (found.code, found.node, f"{cls.name}.post_forward moves the module with no matching move in pre_forward to undo")
            )
            continue
        init = cls.methods.get("__init__")
        if init is None or not isinstance(init.node.body, cst.IndentedBlock):
            plan.not_fixed.append((found.code, found.node, f"{cls.name} has no `__init__` to start the kept tensors in"))
            continue
        if compile_safe:  # keep-and-put-back happens only while capturing
            plan.not_fixed.append((found.code, found.node, COMPILE_SAFE_REASON))
            continue
        owner = Owner(found.code, found.node)
        if id(cls) in done:
            plan.join_units(done[id(cls)], owner)  # the class's one rewrite fixes both
            continue
        done[id(cls)] = owner
        with plan.owning([owner]):
            _plan(model, cls, paired, move, plan, spelling)
    return plan


def _line(move: ModuleMove) -> cst.SimpleStatementLine | None:
    for node in walk(move.site.function.node.body):
        if isinstance(node, cst.SimpleStatementLine) and any(n is move.site.node for n in walk(node)):
            return node
    return None


def _plan(
    model: ModuleModel,
    cls: ClassInfo,
    pre: ModuleMove,
    post: ModuleMove,
    plan: StatementPlan,
    spelling: CaptureTestSpelling,
) -> None:
    module = post.site.receiver
    pre_module = pre.site.receiver
    pre_line, post_line = _line(pre), _line(post)
    init = cls.methods["__init__"]
    assert isinstance(module, cst.Name) and isinstance(pre_module, cst.Name) and pre_line and post_line
    assert isinstance(init.node.body, cst.IndentedBlock)
    kept = _KEPT if _KEPT not in cls.attrs else f"_offlint{_KEPT}"
    plan.insert_after(
        init.node.body.body[-1],
        [
            cst.parse_statement(f"self.{kept} = None\n").with_changes(
                leading_lines=[
                    cst.EmptyLine(comment=cst.Comment("# The module's tensors from before a captured forward (by name), put back after it.")),
                ]
            )
        ],
        RULES,
        "start the kept tensors",
    )
    keep = cst.If(
        test=spelling.call(),
        body=cst.IndentedBlock(
            [
                cst.parse_statement(
                    f"self.{kept} = {{\n"
                    f"    name: tensor.data for name, tensor in {pre_module.value}.state_dict(keep_vars=True).items()\n"
                    "}\n"
                )
            ]
        ),
        leading_lines=[
            cst.EmptyLine(comment=cst.Comment("# The captured move reads these at every replay: keep them, post_forward puts them back.")),
        ],
    )
    plan.insert_before(pre_line, [keep], RULES, "keep the module's tensors before a captured forward")
    restore = cst.If(
        test=spelling.call(),
        body=cst.IndentedBlock(
            [
                cst.parse_statement(f"kept, self.{kept} = self.{kept}, None\n").with_changes(
                    leading_lines=[
                        cst.EmptyLine(comment=cst.Comment("# Leaving a captured forward: put back what the module held before it (what")),
                        cst.EmptyLine(comment=cst.Comment("# its replays read). Moving again would leave it holding tensors made in the")),
                        cst.EmptyLine(comment=cst.Comment("# capture, which only a replay writes.")),
                    ]
                ),
                cst.parse_statement(
                    f"for name, tensor in {module.value}.state_dict(keep_vars=True).items():\n    tensor.data = kept[name]\n"
                ),
            ]
        ),
        orelse=cst.Else(cst.IndentedBlock([post_line.deep_clone()])),
        leading_lines=[],
    )
    plan.replace(post_line, restore, RULES, "put the module's tensors back after a captured forward")
