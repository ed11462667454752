"""Nine texts no one on the extractor's side wrote: a Kubernetes event log, a SQL migration diff,
French, Spanish and Chinese requirements, a Slack rollout chat, a YAML config, an incident
postmortem and a terraform plan. A reviewer wrote them and listed their must-keep items, their
obligation sentences (with polarity), a faithful summary and hand mutations of it before any of
them was run through ``memoryhub.core.salient`` (2026-12-04). ``test_unseen_corpus.py`` holds the
extractor, extractive-v3 and rules-8 to these labels.

must_keep: items a careful reader must keep, exactly as written in the source.
obligations: (substring of the obligation sentence, expected polarity).
summary: a faithful summary written by hand.
mutations: (label, old substring of summary, new substring, the changed value rules-8 should name)
  - "drop" mutations remove a sentence; the value to name is a unit / seq from it.
"""

CASES = [
    {
        "name": "k8s-log",
        "events": [
            (
                "tool_call",
                "assistant",
                "$ kubectl -n payments get events --field-selector involvedObject.name=checkout-api-7d9f8c6b5-x2kqp",
            ),
            (
                "tool_result",
                "tool",
                "LAST SEEN   TYPE      REASON      OBJECT                              MESSAGE\n"
                "3m12s       Warning   OOMKilled   pod/checkout-api-7d9f8c6b5-x2kqp    Container checkout exceeded memory limit 512Mi\n"
                "2m58s       Warning   BackOff     pod/checkout-api-7d9f8c6b5-x2kqp    Back-off restarting failed container, restart count 14\n"
                '2m40s       Normal    Pulled      pod/checkout-api-7d9f8c6b5-x2kqp    Container image "registry.acme.io/checkout:v2.14.3" already present on machine\n'
                "Mar 18 09:41:07 node-07 kubelet[2231]: E0318 09:41:07.512331 eviction_manager.go:349 eviction manager: node memory pressure, evicting pod payments/checkout-api-7d9f8c6b5-x2kqp",
            ),
            (
                "message",
                "assistant",
                "checkout-api-7d9f8c6b5-x2kqp is OOMKilled at the 512Mi limit and has restarted 14 times on node-07; "
                "I'll raise the limit to 768Mi in deploy/checkout/values.yaml.",
            ),
        ],
        "must_keep": [
            "checkout-api-7d9f8c6b5-x2kqp",
            "OOMKilled",
            "512Mi",
            "14",
            "registry.acme.io/checkout:v2.14.3",
            "node-07",
            "eviction_manager.go:349",
            "09:41:07",
            "768Mi",
            "deploy/checkout/values.yaml",
        ],
        "obligations": [],
        "summary": (
            "kubectl -n payments events for pod checkout-api-7d9f8c6b5-x2kqp: OOMKilled (container checkout exceeded "
            "memory limit 512Mi), BackOff with restart count 14, image registry.acme.io/checkout:v2.14.3 already present. "
            "On Mar 18 09:41:07 node-07 kubelet[2231] (eviction_manager.go:349) evicted it for node memory pressure.\n"
            "Plan: raise the limit to 768Mi in deploy/checkout/values.yaml."
        ),
        "mutations": [
            (
                "pod-id-digit",
                "checkout-api-7d9f8c6b5-x2kqp: OOMKilled",
                "checkout-api-7d9f8c6b6-x2kqp: OOMKilled",
                "checkout-api-7d9f8c6b6-x2kqp",
            ),
            ("limit-amount", "memory limit 512Mi", "memory limit 256Mi", "256Mi"),
            ("restart-count", "restart count 14", "restart count 41", "41"),
            ("image-version", "checkout:v2.14.3", "checkout:v2.13.4", "v2.13.4"),
            ("new-limit", "raise the limit to 768Mi", "raise the limit to 1024Mi", "1024Mi"),
        ],
    },
    {
        "name": "sql-migration-diff",
        "events": [
            (
                "tool_result",
                "tool",
                "diff --git a/migrations/0047_orders_currency.sql b/migrations/0047_orders_currency.sql\n"
                "--- a/migrations/0047_orders_currency.sql\n+++ b/migrations/0047_orders_currency.sql\n"
                "@@ -1,6 +1,8 @@\n"
                " ALTER TABLE orders\n"
                "-  ADD COLUMN currency CHAR(3) NOT NULL DEFAULT 'USD';\n"
                "+  ADD COLUMN currency CHAR(3) NOT NULL DEFAULT 'EUR',\n"
                "+  ADD COLUMN fx_rate NUMERIC(12,6);\n"
                "-CREATE INDEX idx_orders_created ON orders (created_at);\n"
                "+CREATE INDEX CONCURRENTLY idx_orders_created_currency ON orders (created_at, currency);\n"
                " UPDATE orders SET fx_rate = 1.084300 WHERE created_at >= '2026-01-01';",
            ),
            (
                "message",
                "user",
                "Reviewer (Tomasz Wierzbicki): the migration must not lock orders; CREATE INDEX CONCURRENTLY is required. "
                "Do not run it before the 02:00 UTC maintenance window on 2026-04-09.",
            ),
        ],
        "must_keep": [
            "migrations/0047_orders_currency.sql",
            "'EUR'",
            "'USD'",
            "fx_rate",
            "NUMERIC(12,6)",
            "idx_orders_created_currency",
            "1.084300",
            "2026-01-01",
            "Tomasz Wierzbicki",
            "02:00 UTC",
            "2026-04-09",
        ],
        "obligations": [
            ("the migration must not lock orders", "negative"),
            ("CREATE INDEX CONCURRENTLY is required", "positive"),
            ("Do not run it before the 02:00 UTC", "negative"),
        ],
        "summary": (
            "Migration migrations/0047_orders_currency.sql changes the orders.currency default from 'USD' to 'EUR', "
            "adds fx_rate NUMERIC(12,6), replaces idx_orders_created with idx_orders_created_currency on (created_at, currency) "
            "built CONCURRENTLY, and sets fx_rate = 1.084300 for orders created on or after 2026-01-01.\n"
            "Reviewer Tomasz Wierzbicki: the migration must not lock orders; CREATE INDEX CONCURRENTLY is required. "
            "Do not run it before the 02:00 UTC maintenance window on 2026-04-09."
        ),
        "mutations": [
            (
                "migration-number",
                "migrations/0047_orders_currency.sql",
                "migrations/0074_orders_currency.sql",
                "0074",
            ),
            ("fx-rate", "fx_rate = 1.084300", "fx_rate = 1.048300", "1.048300"),
            ("date-shift", "window on 2026-04-09", "window on 2026-04-10", "2026-04-10"),
            ("flip-must-not", "the migration must not lock orders", "the migration must lock orders", "must"),
            ("default-swap", "from 'USD' to 'EUR'", "from 'EUR' to 'USD'", "EUR"),
            (
                "drop-obligation",
                " Do not run it before the 02:00 UTC maintenance window on 2026-04-09.",
                "",
                "02:00",
            ),
        ],
    },
    {
        "name": "french-requirement",
        "events": [
            (
                "requirement",
                "user",
                "Le remboursement de 1 250,50 € doit être validé par Mme Lefèvre avant le 3 mai 2026. "
                "Il ne faut jamais envoyer le RIB par courriel. Le délai de réponse ne doit pas dépasser 48 heures. "
                "Référence du dossier : FR-2026-00871.",
            ),
        ],
        "must_keep": ["1 250,50 €", "Lefèvre", "3 mai 2026", "48 heures", "FR-2026-00871"],
        "obligations": [
            ("doit être validé par Mme Lefèvre", "positive"),
            ("Il ne faut jamais envoyer le RIB", "negative"),
            ("ne doit pas dépasser 48 heures", "negative"),
        ],
        "summary": (
            "Dossier FR-2026-00871 : le remboursement de 1 250,50 € doit être validé par Mme Lefèvre avant le 3 mai 2026. "
            "Il ne faut jamais envoyer le RIB par courriel. Le délai de réponse ne doit pas dépasser 48 heures."
        ),
        "mutations": [
            ("ref-digit", "FR-2026-00871", "FR-2026-00817", "FR-2026-00817"),
            ("amount", "1 250,50 €", "1 520,50 €", "1 520,50"),
            ("date-shift", "avant le 3 mai 2026", "avant le 13 mai 2026", "13 mai"),
            ("flip-jamais", "Il ne faut jamais envoyer le RIB", "Il faut toujours envoyer le RIB", "jamais"),
            ("duration", "dépasser 48 heures", "dépasser 72 heures", "72 heures"),
            ("drop-obligation", " Il ne faut jamais envoyer le RIB par courriel.", "", "RIB"),
        ],
    },
    {
        "name": "spanish-requirement",
        "events": [
            (
                "requirement",
                "user",
                "El pedido ES-55012-B debe entregarse antes del 15 de junio. No se debe cobrar más de 89,90 EUR por el envío. "
                "El cliente, Javier Morales, solo acepta entregas por la mañana.",
            ),
        ],
        "must_keep": ["ES-55012-B", "15 de junio", "89,90 EUR", "Javier Morales"],
        "obligations": [
            ("debe entregarse antes del 15 de junio", "positive"),
            ("No se debe cobrar más de 89,90 EUR", "negative"),
            ("solo acepta entregas por la mañana", "positive"),
        ],
        "summary": (
            "El pedido ES-55012-B debe entregarse antes del 15 de junio. No se debe cobrar más de 89,90 EUR por el envío. "
            "El cliente, Javier Morales, solo acepta entregas por la mañana."
        ),
        "mutations": [
            ("order-digit", "ES-55012-B", "ES-55021-B", "ES-55021-B"),
            ("amount", "89,90 EUR", "98,90 EUR", "98,90"),
            ("date-shift", "15 de junio", "25 de junio", "25 de junio"),
            ("flip-no-se-debe", "No se debe cobrar más de", "Se debe cobrar más de", "No se debe"),
            ("drop-obligation", " No se debe cobrar más de 89,90 EUR por el envío.", "", "89,90"),
        ],
    },
    {
        "name": "chinese-requirement",
        "events": [
            (
                "requirement",
                "user",
                "订单号CN-8830217的退款金额为1,299.00元，必须在3个工作日内完成。禁止通过短信发送验证码。"
                "每个账户每天最多提交3次申请。上线日期为2026年5月20日，负责人是王伟。",
            ),
        ],
        "must_keep": ["CN-8830217", "1,299.00元", "3个工作日", "3次", "2026年5月20日", "王伟"],
        "obligations": [
            ("必须在3个工作日内完成", "positive"),
            ("禁止通过短信发送验证码", "negative"),
            ("每天最多提交3次申请", "positive"),
        ],
        "summary": (
            "订单号CN-8830217的退款金额为1,299.00元，必须在3个工作日内完成。禁止通过短信发送验证码。"
            "每个账户每天最多提交3次申请。上线日期为2026年5月20日，负责人是王伟。"
        ),
        "mutations": [
            ("order-digit", "CN-8830217", "CN-8830271", "CN-8830271"),
            ("amount", "1,299.00元", "1,929.00元", "1,929.00"),
            ("date-shift", "2026年5月20日", "2026年5月21日", "2026年5月21日"),
            ("flip-forbid", "禁止通过短信发送验证码", "必须通过短信发送验证码", "禁止"),
            ("count", "最多提交3次", "最多提交5次", "5次"),
            ("drop-obligation", "禁止通过短信发送验证码。", "", "禁止"),
        ],
    },
    {
        "name": "slack-rollout",
        "events": [
            (
                "message",
                "user",
                "@maya: can we start the new-checkout flag rollout Thursday? Proposal: 5% on 2026-04-16, 25% on 2026-04-20.",
            ),
            (
                "message",
                "user",
                "@dev.okafor: error budget is at 62% for April, I'm ok with 5% but not 25% until p99 < 450 ms.",
            ),
            (
                "message",
                "user",
                "@maya: fair. Rollback if the checkout error rate exceeds 1.5% for 10 minutes.",
            ),
            (
                "decision",
                "user",
                "@lars.nyberg: Decision: we go with 5% on Thursday 16 April at 14:00 CET, not 10%. "
                "25% waits for the p99 review on April 20. Flag key: checkout_v2_enabled, ticket REL-4412.",
            ),
            (
                "message",
                "user",
                "@dev.okafor: 👍 I'll watch the dashboard https://grafana.acme.io/d/ck9/checkout-slo",
            ),
        ],
        "must_keep": [
            "5%",
            "25%",
            "2026-04-16",
            "2026-04-20",
            "62%",
            "450 ms",
            "1.5%",
            "10 minutes",
            "16 April",
            "14:00 CET",
            "10%",
            "April 20",
            "checkout_v2_enabled",
            "REL-4412",
            "https://grafana.acme.io/d/ck9/checkout-slo",
            "Lars",  # decider (as @lars.nyberg)
        ],
        "obligations": [
            ("Decision: we go with 5% on Thursday 16 April", "positive"),
            ("Rollback if the checkout error rate exceeds 1.5%", "positive"),
            ("not 25% until p99 < 450 ms", "negative"),
        ],
        "summary": (
            "Maya proposed rolling out the new-checkout flag at 5% on 2026-04-16 and 25% on 2026-04-20. "
            "Dev Okafor: error budget is at 62% for April; ok with 5% but not 25% until p99 < 450 ms. "
            "Rollback if the checkout error rate exceeds 1.5% for 10 minutes.\n"
            "Decision (@lars.nyberg): we go with 5% on Thursday 16 April at 14:00 CET, not 10%. "
            "25% waits for the p99 review on April 20. Flag key: checkout_v2_enabled, ticket REL-4412. "
            "Dashboard: https://grafana.acme.io/d/ck9/checkout-slo"
        ),
        "mutations": [
            ("percent-swap", "we go with 5% on Thursday", "we go with 10% on Thursday", "10%"),
            (
                "decision-reverse",
                "5% on Thursday 16 April at 14:00 CET, not 10%",
                "10% on Thursday 16 April at 14:00 CET, not 5%",
                "10%",
            ),
            ("date-shift", "Thursday 16 April at 14:00", "Thursday 17 April at 14:00", "17 April"),
            ("ticket-digit", "REL-4412", "REL-4421", "REL-4421"),
            ("threshold", "exceeds 1.5% for 10 minutes", "exceeds 5.1% for 10 minutes", "5.1%"),
            (
                "drop-rollback",
                "Rollback if the checkout error rate exceeds 1.5% for 10 minutes.\n",
                "\n",
                "1.5%",
            ),
        ],
    },
    {
        "name": "yaml-config",
        "events": [
            (
                "tool_result",
                "tool",
                "# config/billing.yaml\n"
                "billing:\n"
                "  provider: adyen\n"
                "  merchant_account: AcmeShopEU_ECOM\n"
                "  webhook_url: https://billing.acme.io/hooks/adyen\n"
                "  capture_delay_hours: 72\n"
                "  max_refund_eur: 2500\n"
                "  retry:\n"
                "    attempts: 6\n"
                "    backoff: 30s\n"
                "  allowed_currencies: [EUR, GBP, SEK]\n"
                "  hmac_key_ref: vault://secret/billing/adyen-hmac#v3\n",
            ),
            (
                "message",
                "user",
                "capture_delay_hours must stay at 72; never put the HMAC key itself in this file.",
            ),
        ],
        "must_keep": [
            "config/billing.yaml",
            "adyen",
            "AcmeShopEU_ECOM",
            "https://billing.acme.io/hooks/adyen",
            "72",
            "2500",
            "6",
            "30s",
            "SEK",
            "vault://secret/billing/adyen-hmac#v3",
        ],
        "obligations": [
            ("capture_delay_hours must stay at 72", "positive"),
            ("never put the HMAC key itself in this file", "negative"),
        ],
        "summary": (
            "config/billing.yaml: provider adyen, merchant_account AcmeShopEU_ECOM, webhook_url https://billing.acme.io/hooks/adyen, "
            "capture_delay_hours: 72, max_refund_eur: 2500, retry attempts: 6 with backoff: 30s, allowed_currencies EUR, GBP, SEK, "
            "hmac_key_ref vault://secret/billing/adyen-hmac#v3.\n"
            "capture_delay_hours must stay at 72; never put the HMAC key itself in this file."
        ),
        "mutations": [
            ("max-refund", "max_refund_eur: 2500", "max_refund_eur: 5200", "5200"),
            ("attempts", "attempts: 6", "attempts: 8", "8"),
            ("vault-version", "adyen-hmac#v3", "adyen-hmac#v2", "v2"),
            (
                "flip-never",
                "never put the HMAC key itself in this file",
                "always put the HMAC key itself in this file",
                "never",
            ),
            (
                "must-value",
                "capture_delay_hours must stay at 72",
                "capture_delay_hours must stay at 27",
                "27",
            ),
        ],
    },
    {
        "name": "incident-postmortem",
        "events": [
            (
                "message",
                "user",
                "Postmortem INC-2291 (SEV-2), author: Hannah Ebert.\n"
                "Timeline (UTC): 2026-03-11 07:52 deploy of api-gateway 4.8.0 started; 08:04 5xx rate reached 37%; "
                "08:11 on-call paged; 08:29 rollback to 4.7.2 completed; 08:46 error rate back under 0.1%.\n"
                "Impact: 54 minutes of degraded checkout, about 3,140 failed orders, estimated revenue loss $182,400.\n"
                "Root cause: connection pool size was read as 8 instead of 80 from the new env var GW_POOL_SIZE.",
            ),
            (
                "message",
                "user",
                "Action items: AI-1 add a config schema check for GW_POOL_SIZE (owner: Rui Costa, due 2026-03-25). "
                "AI-2 canary deploys must hold at 1% for 15 minutes. Deploys must not start before 09:00 UTC on weekdays.",
            ),
        ],
        "must_keep": [
            "INC-2291",
            "SEV-2",
            "Hannah Ebert",
            "2026-03-11",
            "07:52",
            "4.8.0",
            "08:04",
            "37%",
            "08:11",
            "08:29",
            "4.7.2",
            "08:46",
            "0.1%",
            "54 minutes",
            "3,140",
            "$182,400",
            "8",
            "80",
            "GW_POOL_SIZE",
            "Rui Costa",
            "2026-03-25",
            "1%",
            "15 minutes",
            "09:00 UTC",
        ],
        "obligations": [
            ("canary deploys must hold at 1% for 15 minutes", "positive"),
            ("Deploys must not start before 09:00 UTC", "negative"),
        ],
        "summary": (
            "Postmortem INC-2291 (SEV-2) by Hannah Ebert. On 2026-03-11 (UTC) the api-gateway 4.8.0 deploy started at 07:52; "
            "the 5xx rate reached 37% at 08:04, on-call was paged at 08:11, rollback to 4.7.2 completed at 08:29 and the error rate "
            "was back under 0.1% at 08:46. Impact: 54 minutes of degraded checkout, about 3,140 failed orders, estimated revenue "
            "loss $182,400. Root cause: the connection pool size was read as 8 instead of 80 from GW_POOL_SIZE.\n"
            "AI-1: add a config schema check for GW_POOL_SIZE (owner: Rui Costa, due 2026-03-25). "
            "AI-2: canary deploys must hold at 1% for 15 minutes. Deploys must not start before 09:00 UTC on weekdays."
        ),
        "mutations": [
            ("incident-digit", "Postmortem INC-2291", "Postmortem INC-2219", "INC-2219"),
            ("revenue", "loss $182,400", "loss $128,400", "$128,400"),
            (
                "time-shift",
                "rollback to 4.7.2 completed at 08:29",
                "rollback to 4.7.2 completed at 08:39",
                "08:39",
            ),
            ("duration", "54 minutes of degraded", "45 minutes of degraded", "45 minutes"),
            (
                "flip-must-not",
                "Deploys must not start before 09:00 UTC",
                "Deploys must start before 09:00 UTC",
                "must",
            ),
            ("due-date", "due 2026-03-25", "due 2026-03-28", "2026-03-28"),
            ("drop-obligation", " AI-2: canary deploys must hold at 1% for 15 minutes.", "", "15 minutes"),
        ],
    },
    {
        "name": "terraform-plan",
        "events": [
            ("tool_call", "assistant", "$ terraform plan -var-file=prod.tfvars"),
            (
                "tool_result",
                "tool",
                "  # aws_db_instance.orders will be updated in-place\n"
                '  ~ resource "aws_db_instance" "orders" {\n'
                '        id                = "orders-prod-db"\n'
                '      ~ instance_class    = "db.r6g.large" -> "db.r6g.xlarge"\n'
                "      ~ allocated_storage = 500 -> 750\n"
                "        # (38 unchanged attributes hidden)\n"
                "    }\n\n"
                "  # aws_security_group_rule.allow_pg will be destroyed\n"
                '  - resource "aws_security_group_rule" "allow_pg" {\n'
                '      - cidr_blocks = ["10.20.0.0/16"] -> null\n'
                "      - from_port   = 5432 -> null\n"
                "    }\n\n"
                "Plan: 0 to add, 1 to change, 1 to destroy.",
            ),
            (
                "message",
                "user",
                "Do not apply before the snapshot rds:orders-prod-db-2026-04-07-03-00 is verified. Only Ingrid may approve the destroy.",
            ),
        ],
        "must_keep": [
            "prod.tfvars",
            "aws_db_instance.orders",
            "orders-prod-db",
            "db.r6g.large",
            "db.r6g.xlarge",
            "500",
            "750",
            "aws_security_group_rule.allow_pg",
            "10.20.0.0/16",
            "5432",
            "0 to add, 1 to change, 1 to destroy",
            "rds:orders-prod-db-2026-04-07-03-00",
            "Ingrid",
        ],
        "obligations": [
            ("Do not apply before the snapshot", "negative"),
            ("Only Ingrid may approve the destroy", "positive"),
        ],
        "summary": (
            "terraform plan -var-file=prod.tfvars: aws_db_instance.orders (id orders-prod-db) updated in-place, instance_class "
            "db.r6g.large -> db.r6g.xlarge and allocated_storage 500 -> 750; aws_security_group_rule.allow_pg (cidr_blocks "
            "10.20.0.0/16, from_port 5432) destroyed. Plan: 0 to add, 1 to change, 1 to destroy.\n"
            "Do not apply before the snapshot rds:orders-prod-db-2026-04-07-03-00 is verified. Only Ingrid may approve the destroy."
        ),
        "mutations": [
            (
                "instance-class",
                "db.r6g.large -> db.r6g.xlarge",
                "db.r6g.large -> db.r6g.2xlarge",
                "db.r6g.2xlarge",
            ),
            ("storage", "500 -> 750", "500 -> 570", "570"),
            ("cidr", "10.20.0.0/16", "10.2.0.0/16", "10.2.0.0/16"),
            ("port", "from_port 5432", "from_port 5433", "5433"),
            (
                "snapshot-date",
                "orders-prod-db-2026-04-07-03-00",
                "orders-prod-db-2026-04-08-03-00",
                "2026-04-08",
            ),
            ("flip-do-not", "Do not apply before the snapshot", "Apply before the snapshot", "Do not"),
            ("reverse-approver", "Only Ingrid may approve", "Anyone but Ingrid may approve", "Ingrid"),
        ],
    },
]
