"""The base of every result a route sends: services and the API share one class per result, and
api/models.py names each route's answer with them. A result describes itself in a comment, not a
docstring: pydantic would publish the docstring as its OpenAPI schema's description."""

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
    """A body as the route or service built it: keys the model does not name pass through, and
    the keys go out in the order they were given (the same record from two routes keeps its two
    orders)."""

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

    # The order the keys were given in is how the body is written, not what it says.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Body):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = BaseModel.__hash__  # unhashable, as every mutable model
