"""memoryhub's Celery tasks, in the delivery layer: thin wrappers over the services.

* ``compaction`` — run a compaction job, sweep the job outbox (and once when a worker starts);
* ``alerting`` — evaluate due rules, deliver flips, metric rollups, test-sends;
* ``outbox`` — sweep the task outbox (messages a request could not hand to the broker).

Celery's autodiscovery (memoryhub/celery.py) imports this package, which imports each module so
its tasks register. Every task is named explicitly (``name=``): the names, not these modules, are
the contract with memoryhub/schedules.py, the outboxes and the messages already queued.
"""

from memoryhub.tasks import alerting, compaction, outbox

__all__ = ["alerting", "compaction", "outbox"]
