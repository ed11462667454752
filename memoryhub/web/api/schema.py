"""OpenAPI generation: every operation documents the errors any endpoint can answer.

The API contract: errors are JSON {"error", "detail"} with 400/401/403/404/409/413/429. Views document
their own success shapes and specific errors; this adds the generic ones each view would
otherwise have to repeat (a bad query parameter or body, no/revoked key, a role too low, a
path object or page that is not there, a throttle).
Wire it with REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = "memoryhub.web.api.schema.MemoryHubAutoSchema".
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema

from memoryhub.web.api.serializers import ErrorSerializer

GENERIC_ERRORS = ("400", "401", "403", "404")


class MemoryHubAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        codes = list(GENERIC_ERRORS)
        if getattr(self.view, "throttle_classes", None):
            codes.append("429")
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
        return responses
