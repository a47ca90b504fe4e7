"""The renderer's error tree: a deployment the renderer cannot express as a DGD.

    RenderError(message)
    +-- UnsupportedEngine(engine)        serving.engine is not vllm, sglang or trtllm
    +-- InvalidField(field, problem)     one field holds a value no DGD can carry

Raised by `agent.render.dgd.render_dgd` (through `agent.render.validation`); the reconciler
catches `RenderError` and reports it as a Reject of the revision, so the message is written
for the person who has to fix the workload: it names the field and says what would do.
Tests match these types and their fields, never message text.
"""

from __future__ import annotations

from agent.model import ENGINES


class RenderError(Exception):
    """Base of everything the renderer refuses."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnsupportedEngine(RenderError):
    def __init__(self, engine: str) -> None:
        known = ", ".join(ENGINES)
        super().__init__(f"serving.engine: unknown engine {engine!r}; use one of: {known}")
        self.engine = engine


class InvalidField(RenderError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
