"""The base of every result a route sends: services and the API share one class per result, and
api/models.py names each route's answer with them."""

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = ["Body"]


class Body(BaseModel):
    """A body as the route built it: keys the model does not name pass through, and the keys go
    out in the order the route put them (the same record from two routes keeps its two orders)."""

    model_config = ConfigDict(extra="allow")
    _sent_order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        body = handler(data)
        if isinstance(data, dict) and isinstance(body, Body):
            body._sent_order = tuple(data)
        return body

    # No return annotation: pydantic would document it in place of the model's fields.
    @model_serializer(mode="wrap")
    def _in_sent_order(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        dumped = handler(self)
        if not self._sent_order or not isinstance(dumped, dict):
            return dumped
        ordered = {key: dumped[key] for key in self._sent_order if key in dumped}
        return ordered | dumped
