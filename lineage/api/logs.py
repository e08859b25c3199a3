"""The service's logs: one JSON object a line, each carrying the trace id of the request it
belongs to. The middleware takes the caller's trace id (`traceparent`, else `X-Trace-Id`, else a
new one), holds it for the whole request, answers it in `X-Trace-Id`, and logs the request."""

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lineage.core import telemetry

access_log = logging.getLogger("lineage.access")

# Attributes every LogRecord has; anything else was passed with `extra=` and is logged too
# (but not uvicorn's copy of the message with terminal colours).
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "taskName",
    "color_message",
}


class TraceIdFilter(logging.Filter):
    """Stamps each record with the trace id current where it was logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = telemetry.current_trace_id()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", None),
        }
        line |= {k: v for k, v in vars(record).items() if k not in _STANDARD and k not in line}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def log_config(level: str) -> dict[str, Any]:
    """A logging.config.dictConfig for `lineage serve`: everything, uvicorn's own lines
    included, goes to stderr as JSON."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"trace_id": {"()": TraceIdFilter}},
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "json",
                "filters": ["trace_id"],
            }
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        # uvicorn's loggers keep no handlers of their own, so their lines reach root as JSON.
        "loggers": {
            name: {"handlers": [], "propagate": True}
            for name in ("uvicorn", "uvicorn.error", "uvicorn.access")
        },
    }


class TraceIdMiddleware:
    """Plain ASGI, so the trace id stays set until the last byte of a (streamed) response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = telemetry.trace_id_from_headers(Headers(scope=scope))
        with telemetry.trace_context(sent) as trace_id:
            status = 500
            started = time.perf_counter()

            async def send_with_trace_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    MutableHeaders(scope=message).append("X-Trace-Id", trace_id)
                await send(message)

            try:
                await self.app(scope, receive, send_with_trace_id)
            finally:
                access_log.info(
                    "%s %s %d",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    },
                )
