"""Alerting: rules over the health metrics, evaluated by beat; state flips delivered to channels.

* ``evaluate`` — due rules (indexed next_eval_at) claimed by compare-and-set, one stored
  AlertEvaluation per run, an AlertEvent only when the state changes.
* ``deliver`` — unprocessed flips claimed by compare-and-set, one Notification per attempt,
  permanent errors disable the channel, transient ones are retried (bounded).
* ``transports`` — one module per channel kind behind a small registry.
* ``services`` — create/update/delete/mute/enable/test-send, shared by the API and the pages.

Their thin Celery wrappers are delivery: memoryhub/tasks/alerting.py (beat schedules live in
memoryhub/schedules.py).
"""
