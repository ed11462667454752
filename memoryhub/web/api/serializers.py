"""Output serializers shared across the API (inputs are validated by service-level parsers)."""

from __future__ import annotations

from rest_framework import serializers

from memoryhub.models import Event, EventKind, Workflow, WorkflowSource
from memoryhub.models.workflows import EVENT_API_FIELDS


class WorkflowSerializer(serializers.ModelSerializer):
    active_summary_id = serializers.SerializerMethodField()
    active_summary_version = serializers.SerializerMethodField()
    active_watermark = serializers.SerializerMethodField()
    history_tokens = serializers.IntegerField(read_only=True)

    class Meta:
        model = Workflow
        fields = [
            "external_id",
            "name",
            "graph_release",
            "source",
            "model",
            "encoding",
            "head_seq",
            "total_tokens",
            "active_summary_id",
            "active_summary_version",
            "active_watermark",
            "active_revision",
            "tail_events",
            "tail_tokens",
            "summary_tokens",
            "history_tokens",
            "open_tool_calls",
            "pending_side_effects",
            "purge_epoch",
            "last_event_at",
            "last_compacted_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_active_summary_id(self, obj: Workflow) -> str | None:
        return obj.active_summary.summary_id if obj.active_summary else None

    def get_active_summary_version(self, obj: Workflow) -> int | None:
        return obj.active_summary.version if obj.active_summary else None

    def get_active_watermark(self, obj: Workflow) -> int:
        return obj.active_watermark


class WorkflowCreateSerializer(serializers.Serializer):
    external_id = serializers.CharField(max_length=200)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    graph_release = serializers.CharField(max_length=100, required=False, allow_blank=True)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # API field name shadows Field.source
        choices=WorkflowSource.choices,
        required=False,
        help_text="The integration that feeds it (api, langgraph, langchain, otel, openai-agents, claude-code, anthropic).",
    )
    model = serializers.CharField(max_length=100, required=False, allow_blank=True)
    encoding = serializers.CharField(max_length=64, required=False, allow_blank=True)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # API field name shadows Field.source
        choices=WorkflowSource.choices, required=False, help_text="The integration that feeds it."
    )


class EventSerializer(serializers.ModelSerializer):
    purge_id = serializers.SerializerMethodField()
    # A purged event's ids are shown as digests (they may quote its content).
    client_event_id = serializers.CharField(source="visible_client_event_id", allow_null=True, read_only=True)
    tool_call_id = serializers.CharField(source="visible_tool_call_id", read_only=True)

    class Meta:
        model = Event
        fields = list(EVENT_API_FIELDS)
        read_only_fields = fields

    def get_purge_id(self, obj: Event) -> str | None:
        # Purged events keep seq, kind, hash and token count as minimal provenance; content is gone.
        return obj.purge.purge_id if obj.purge else None


class FactInSerializer(serializers.Serializer):
    key = serializers.CharField(max_length=200)
    kind = serializers.CharField()
    text = serializers.CharField(allow_blank=True, required=False)
    state = serializers.CharField(required=False)


class EventInSerializer(serializers.Serializer):
    """Documentation of one event in an append batch (parsing is memoryhub.memory.events.parse_batch)."""

    kind = serializers.ChoiceField(choices=EventKind.choices)
    content = serializers.CharField(allow_blank=True)
    agent = serializers.CharField(required=False, allow_blank=True)
    role = serializers.CharField(required=False, allow_blank=True)
    client_event_id = serializers.CharField(required=False)
    tool_call_id = serializers.CharField(required=False, allow_blank=True)
    facts = FactInSerializer(many=True, required=False)
    refs = serializers.ListField(child=serializers.CharField(), required=False)
    side_effect = serializers.ChoiceField(choices=["none", "pending", "done"], required=False)
    token_estimate = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**53,
        help_text="The client's own token count of content; its drift from the exact count is recorded.",
    )
    token_estimate_model = serializers.CharField(
        required=False, max_length=100, help_text="Model the estimate was made for (default: the policy's)."
    )


class AppendBatchSerializer(serializers.Serializer):
    events = EventInSerializer(many=True)
    expected_head = serializers.IntegerField(required=False, min_value=0)


class AppendedEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    client_event_id = serializers.CharField(allow_null=True)
    token_count = serializers.IntegerField()
    content_hash = serializers.CharField()


class AppendResultSerializer(serializers.Serializer):
    events = AppendedEventSerializer(many=True)
    head_seq = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()


class EventPageSerializer(serializers.Serializer):
    events = EventSerializer(many=True)
    head_seq = serializers.IntegerField()
    next_after = serializers.IntegerField(
        allow_null=True, help_text="Pass as ?after= for the next page; null at the end."
    )
