"""How a module spells `torch.cuda.is_current_stream_capturing()`, for the code fixes write.

The module's own spelling when it has one (`torch.cuda.is_current_stream_capturing()` through
whatever alias, or a bare imported name); else `torch.cuda.is_current_stream_capturing()`, and
the plan asks for `import torch` (added by libcst's `AddImportsVisitor` when the plan applies)."""

from __future__ import annotations

import libcst as cst

from offlint.analysis.model import ModuleModel
from offlint.analysis.torch_api import CAPTURE_TESTS
from offlint.fixing.edits import StatementPlan
from offlint.fixing.shape import is_docstring

_DEFAULT = "torch.cuda.is_current_stream_capturing"


class CaptureTestSpelling:
    def __init__(self, model: ModuleModel, plan: StatementPlan, rules: tuple[str, ...] = ("OFL101",)) -> None:
        self.model = model
        self.plan = plan
        self.rules = rules
        self._func: cst.BaseExpression | None = None

    @property
    def text(self) -> str:
        """The call, as source text."""
        return cst.Module([]).code_for_node(self.call())

    def call(self) -> cst.Call:
        """A fresh call node (each use gets its own)."""
        if self._func is None:
            self._func = self._find()
        return cst.Call(func=self._func.deep_clone())

    def _find(self) -> cst.BaseExpression:
        for site in self.model.all_calls():
            if site.callee in CAPTURE_TESTS and not site.node.args:
                return site.node.func.deep_clone()
        if self.model.resolver.bindings.get("torch") != "torch":
            self.plan.need_import("torch", self._import_anchor(), self.rules, "import torch (for the capture test)")
        return cst.parse_expression(_DEFAULT)

    def _import_anchor(self) -> cst.BaseStatement | None:
        """The statement the import goes next to (for the report and the edited-lines check): the
        last import of the module's leading imports, or its first statement."""
        anchor = None
        for stmt in self.model.module.body:
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
            ):
                anchor = stmt
            elif anchor is not None or not is_docstring(stmt):
                break
        if anchor is None and self.model.module.body:
            return self.model.module.body[0]
        return anchor

