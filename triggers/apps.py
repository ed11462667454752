from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from triggers.decision_log import connect_worker_signals

        connect_worker_signals()
