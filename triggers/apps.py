from django.apps import AppConfig

from triggers.decision_log import connect_worker_signals


class TriggersConfig(AppConfig):
    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connect_worker_signals()
