"""Prometheus text exposition (format 0.0.4) of every metric, one series per tenant.

Names are ``memoryhub_<metric>``; counters are totals since the beginning, everything else is a
gauge (ratios and means over the last hour, running totals now). Metrics without data (a ratio
over no rows) are left out rather than reported as 0.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Iterable

from django.conf import settings

from memoryhub.accounts.tenancy import verify_api_key
from memoryhub.models import Tenant
from memoryhub.observe.metrics import COUNTER, METRICS, needing_repair_by_source, snapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "memoryhub_"


def scrape_tenants(token: str) -> list[Tenant] | None:
    """The tenants a scrape with ``token`` exports: every tenant for MEMORYHUB_METRICS_TOKEN, its
    own tenant for a tenant API key, None for anything else."""
    configured = getattr(settings, "MEMORYHUB_METRICS_TOKEN", "")
    if configured and hmac.compare_digest(token.encode(), configured.encode()):
        return list(Tenant.objects.order_by("slug"))
    key = verify_api_key(token)
    return [key.tenant] if key is not None else None


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def render(tenants: Iterable[Tenant]) -> str:
    """The exposition text for ``tenants`` (one snapshot per tenant, aggregate queries only)."""
    tenants_list = list(tenants)
    values = {tenant.slug: snapshot(tenant, totals=True) for tenant in tenants_list}
    lines: list[str] = []
    for name, definition in METRICS.items():
        metric = PREFIX + name
        kind = "counter" if definition.kind == COUNTER else "gauge"
        lines.append(f"# HELP {metric} {escape_help(definition.description)} Unit: {definition.unit}.")
        lines.append(f"# TYPE {metric} {kind}")
        for slug in sorted(values):
            value = values[slug][name]
            if value is not None:
                lines.append(f'{metric}{{tenant="{escape_label(slug)}"}} {format_value(float(value))}')
    # Compactions that needed repair, per workflow source (totals since the beginning).
    metric = PREFIX + "compactions_needing_repair_by_source"
    lines.append(
        f"# HELP {metric} Framework compactions whose summary lost something or was empty, per workflow "
        "source. Unit: compactions."
    )
    lines.append(f"# TYPE {metric} counter")
    for tenant in sorted(tenants_list, key=lambda t: t.slug):
        for source, n in sorted(needing_repair_by_source(tenant).items()):
            lines.append(
                f'{metric}{{tenant="{escape_label(tenant.slug)}",source="{escape_label(source)}"}} {n}'
            )
    return "\n".join(lines) + "\n"
