"""A hand-labelled corpus of text no generator here wrote: logs, diffs, JSON, chats, stack traces,
tables and requirements in English, German and Japanese.

Every label was written by hand when the case was written — ``must_keep`` are the items a reader
would need (as they appear in the source), ``obligations`` the sentences that oblige, forbid or
decide (a substring of each, with its polarity), ``summary`` a faithful summary a careful person
wrote. Nothing here is computed with the extractor under test.
"""

from __future__ import annotations

CASES: list[dict] = [
    {
        "name": "support-chat",
        "genre": "chat",
        "events": [
            (
                "message",
                "user",
                "Hi, my order 4471-2290-18 arrived with a broken table leg. I paid $649.00 on March 3rd.",
            ),
            (
                "message",
                "assistant",
                "Sorry about that! I see order 4471-2290-18 shipped via UPS, tracking 1Z999AA10123456784.",
            ),
            (
                "message",
                "user",
                "The leg part number on the box says LEG-ALU-72. I'd prefer a replacement, not a refund.",
            ),
            ("message", "assistant", "Thanks. I have applied a credit of $49.00 for the inconvenience."),
            (
                "decision",
                "assistant",
                "We decided to send a replacement leg LEG-ALU-72; it ships on 25 March.",
            ),
            ("message", "user", "Great. Please never call my phone, e-mail only: dana.kim@example.org."),
        ],
        "must_keep": [
            "4471-2290-18",
            "$649.00",
            "March 3rd",
            "UPS",
            "1Z999AA10123456784",
            "LEG-ALU-72",
            "$49.00",
            "25 March",
            "dana.kim@example.org",
        ],
        "obligations": [
            ("We decided to send a replacement leg", "positive"),
            ("Please never call my phone", "negative"),
        ],
        "summary": (
            "Order 4471-2290-18 (paid $649.00 on March 3rd) arrived with a broken table leg; it had shipped "
            "via UPS with tracking 1Z999AA10123456784. The customer asked for a replacement of part LEG-ALU-72, "
            "not a refund, and got a credit of $49.00.\n"
            "We decided to send a replacement leg LEG-ALU-72; it ships on 25 March.\n"
            "Please never call the customer's phone; e-mail only: dana.kim@example.org."
        ),
    },
    {
        "name": "german-requirement",
        "genre": "requirement-de",
        "events": [
            (
                "requirement",
                "user",
                "Die Rückerstattung über 12.500 EUR muss innerhalb von 45 Minuten freigegeben werden. "
                "Sie darf nicht vor dem 14. April ausgezahlt werden. Ansprechpartnerin ist Frau Schäfer.",
            ),
        ],
        "must_keep": ["12.500 EUR", "45 Minuten", "14. April", "Schäfer"],
        "obligations": [
            ("muss innerhalb von 45 Minuten", "positive"),
            ("darf nicht vor dem 14. April", "negative"),
        ],
        "summary": (
            "Die Rückerstattung über 12.500 EUR muss innerhalb von 45 Minuten freigegeben werden. "
            "Sie darf nicht vor dem 14. April ausgezahlt werden (Ansprechpartnerin: Frau Schäfer)."
        ),
    },
    {
        "name": "japanese-requirement",
        "genre": "requirement-ja",
        "events": [
            (
                "requirement",
                "user",
                "認証に失敗した場合は401を返すこと。リトライは30秒以内に5回までとする。パスワードの平文保存は禁止。",
            ),
        ],
        "must_keep": ["401", "30秒", "5回"],
        "obligations": [
            ("401を返すこと", "positive"),
            ("30秒以内に5回まで", "positive"),
            ("平文保存は禁止", "negative"),
        ],
        "summary": "認証に失敗した場合は401を返すこと。リトライは30秒以内に5回まで。パスワードの平文保存は禁止。",
    },
    {
        "name": "pytest-log",
        "genre": "tool-log",
        "events": [
            ("tool_call", "assistant", "$ pytest tests/test_refunds.py -q"),
            (
                "tool_result",
                "tool",
                "FAILED tests/test_refunds.py::test_partial_refund - AssertionError: assert 402 == 200\n"
                "refunds.py:142: in partial_refund\n"
                "    raise GatewayError(GATEWAY_TIMEOUT)\n"
                "1 failed, 37 passed in 4.21s",
            ),
            (
                "message",
                "assistant",
                "The partial refund test fails: the gateway returns 402 at refunds.py:142.",
            ),
        ],
        "must_keep": [
            "tests/test_refunds.py",
            "test_partial_refund",
            "402",
            "refunds.py:142",
            "GATEWAY_TIMEOUT",
            "GatewayError",
            "37",
        ],
        "obligations": [],
        "summary": (
            "Ran pytest on tests/test_refunds.py: 1 failed, 37 passed in 4.21s. test_partial_refund fails with "
            "AssertionError: assert 402 == 200, raised as GatewayError(GATEWAY_TIMEOUT) at refunds.py:142."
        ),
    },
    {
        "name": "git-diff",
        "genre": "diff",
        "events": [
            (
                "tool_result",
                "tool",
                "commit 9f3e2a1c7b\nAuthor: Lena Ortiz <lena@example.com>\n\n    Cap retries at 5\n\n"
                "--- a/payments/retry.py\n+++ b/payments/retry.py\n@@ -10,7 +10,7 @@\n"
                "-MAX_RETRIES = 3\n+MAX_RETRIES = 5\n-BACKOFF_MS = 250\n+BACKOFF_MS = 400",
            ),
            (
                "message",
                "assistant",
                "Commit 9f3e2a1c7b raises MAX_RETRIES from 3 to 5 and BACKOFF_MS from 250 to 400.",
            ),
        ],
        "must_keep": [
            "9f3e2a1c7b",
            "payments/retry.py",
            "MAX_RETRIES",
            "BACKOFF_MS",
            "lena@example.com",
            "400",
        ],
        "obligations": [],
        "summary": (
            "Commit 9f3e2a1c7b by Lena Ortiz (lena@example.com), 'Cap retries at 5', changes payments/retry.py "
            "(hunk -10,7 +10,7): MAX_RETRIES from 3 to 5 and BACKOFF_MS from 250 to 400."
        ),
    },
    {
        "name": "stripe-json",
        "genre": "json",
        "events": [
            (
                "tool_result",
                "tool",
                '{"id": "pi_3OqLkZ2eZvKYlo2C0x1yAbCd", "object": "payment_intent", "amount": 64900, '
                '"currency": "usd", "status": "requires_capture", "created": 1709467200, '
                '"latest_charge": "ch_3OqLkZ2eZvKYlo2C1QwErTy"}',
            ),
            (
                "message",
                "assistant",
                "Payment intent pi_3OqLkZ2eZvKYlo2C0x1yAbCd is authorised, not captured.",
            ),
        ],
        "must_keep": [
            "pi_3OqLkZ2eZvKYlo2C0x1yAbCd",
            "64900",
            "1709467200",
            "ch_3OqLkZ2eZvKYlo2C1QwErTy",
            "requires_capture",
        ],
        "obligations": [],
        "summary": (
            'Payment intent pi_3OqLkZ2eZvKYlo2C0x1yAbCd (payment_intent) for amount 64900 in currency "usd", '
            "created 1709467200, has status requires_capture: authorised, not captured; latest_charge "
            "ch_3OqLkZ2eZvKYlo2C1QwErTy."
        ),
    },
    {
        "name": "python-traceback",
        "genre": "stack-trace",
        "events": [
            (
                "tool_result",
                "tool",
                "Traceback (most recent call last):\n"
                '  File "/srv/app/billing/invoice.py", line 88, in render\n'
                "    total = charge.currency.upper()\n"
                "AttributeError: 'NoneType' object has no attribute 'upper'",
            ),
            (
                "message",
                "assistant",
                "charge.currency is None for invoice INV-2026-0042; see /srv/app/billing/invoice.py line 88.",
            ),
        ],
        "must_keep": [
            "/srv/app/billing/invoice.py",
            "88",
            "charge.currency",
            "AttributeError",
            "INV-2026-0042",
        ],
        "obligations": [],
        "summary": (
            "render() in /srv/app/billing/invoice.py line 88 raises AttributeError ('NoneType' object has no "
            "attribute 'upper') in charge.currency.upper() because charge.currency is None for invoice INV-2026-0042."
        ),
    },
    {
        "name": "english-requirements",
        "genre": "requirement-en",
        "events": [
            (
                "requirement",
                "user",
                "The export endpoint /v2/exports must return 429 after 100 requests per minute. "
                "Exports must never include the card number. Only admins may download files larger than 2 GB.",
            ),
            ("approval", "user", "Approved by Priya Natarajan on 2026-04-02; rollout until 30 April."),
        ],
        "must_keep": [
            "/v2/exports",
            "429",
            "100 requests",
            "2 GB",
            "Priya Natarajan",
            "2026-04-02",
            "30 April",
        ],
        "obligations": [
            ("must return 429", "positive"),
            ("must never include the card number", "negative"),
            ("Only admins may download", "positive"),
            ("Approved by Priya Natarajan", "positive"),
        ],
        "summary": (
            "The export endpoint /v2/exports must return 429 after 100 requests per minute. Exports must never "
            "include the card number. Only admins may download files larger than 2 GB. Approved by Priya "
            "Natarajan on 2026-04-02; rollout until 30 April."
        ),
    },
    {
        "name": "latency-table",
        "genre": "table",
        "events": [
            (
                "tool_result",
                "tool",
                "| region | p50 | p99 | error rate |\n|---|---|---|---|\n| eu-west-1 | 84 ms | 912 ms | 0.4% |\n"
                "| us-east-2 | 61 ms | 1,340 ms | 1.2% |",
            ),
            ("message", "assistant", "us-east-2 breaches the 1,000 ms p99 budget; eu-west-1 is within it."),
        ],
        "must_keep": [
            "eu-west-1",
            "84 ms",
            "912 ms",
            "0.4%",
            "us-east-2",
            "61 ms",
            "1,340 ms",
            "1.2%",
            "1,000 ms",
        ],
        "obligations": [],
        "summary": (
            "p50/p99/error rate: eu-west-1 84 ms / 912 ms / 0.4%; us-east-2 61 ms / 1,340 ms / 1.2%. "
            "us-east-2 breaches the 1,000 ms p99 budget; eu-west-1 is within it."
        ),
    },
    {
        "name": "ops-chat-de",
        "genre": "chat-de",
        "events": [
            ("message", "user", "Der Deploy von Version 4.12.1 ist für Donnerstag um 14:30 geplant."),
            (
                "decision",
                "assistant",
                "Wir haben entschieden: Rollback auf 4.11.9, falls die Fehlerrate über 2% steigt.",
            ),
            ("message", "user", "Bitte keine Deploys am Freitag. Ticket OPS-7781 bleibt offen."),
        ],
        "must_keep": ["4.12.1", "14:30", "4.11.9", "2%", "OPS-7781"],
        "obligations": [
            ("Rollback auf 4.11.9", "positive"),
            ("keine Deploys am Freitag", "negative"),
        ],
        "summary": (
            "Deploy von Version 4.12.1 geplant für Donnerstag um 14:30.\n"
            "Wir haben entschieden: Rollback auf 4.11.9, falls die Fehlerrate über 2% steigt.\n"
            "Bitte keine Deploys am Freitag. Ticket OPS-7781 bleibt offen."
        ),
    },
    {
        "name": "infra-log",
        "genre": "tool-log",
        "events": [
            (
                "tool_result",
                "tool",
                "2026-03-14T09:12:44Z WARN disk /var/lib/postgresql at 91% on db-primary-2 (118 GB free)\n"
                "2026-03-14T09:13:02Z ERROR replication lag 42 s on db-replica-7 (host 10.0.4.17)",
            ),
            ("message", "assistant", "We must not fail over to db-replica-7 until its lag is under 5 s."),
        ],
        "must_keep": [
            "/var/lib/postgresql",
            "91%",
            "db-primary-2",
            "118 GB",
            "42 s",
            "db-replica-7",
            "10.0.4.17",
            "5 s",
        ],
        "obligations": [("must not fail over to db-replica-7", "negative")],
        "summary": (
            "On 2026-03-14 at 09:12:44Z disk /var/lib/postgresql was at 91% on db-primary-2 (118 GB free); at "
            "09:13:02Z replication lag was 42 s on db-replica-7 (host 10.0.4.17).\n"
            "We must not fail over to db-replica-7 until its lag is under 5 s."
        ),
    },
    {
        "name": "urls-and-names",
        "genre": "chat",
        "events": [
            (
                "message",
                "user",
                "The runbook is at https://wiki.example.com/ops/runbooks/payments#refunds and Marcus Lee owns it. "
                "Do not page Marcus Lee before 08:00.",
            ),
        ],
        "must_keep": ["https://wiki.example.com/ops/runbooks/payments#refunds", "Marcus Lee", "08:00"],
        "obligations": [("Do not page Marcus Lee before 08:00", "negative")],
        "summary": (
            "Runbook: https://wiki.example.com/ops/runbooks/payments#refunds (owner Marcus Lee). "
            "Do not page Marcus Lee before 08:00."
        ),
    },
    {
        "name": "java-stack-trace",
        "genre": "stack-trace",
        "events": [
            (
                "tool_result",
                "tool",
                "java.lang.IllegalStateException: Ledger entry LE-88213 already settled\n"
                "\tat com.acme.ledger.SettlementService.settle(SettlementService.java:217)\n"
                "\tat com.acme.ledger.BatchJob.run(BatchJob.java:64)\n"
                "Caused by: org.postgresql.util.PSQLException: ERROR: duplicate key value violates unique "
                'constraint "settlement_entry_uniq"',
            ),
            (
                "message",
                "assistant",
                "Batch run retried entry LE-88213; the unique constraint settlement_entry_uniq blocked it.",
            ),
        ],
        "must_keep": [
            "java.lang.IllegalStateException",
            "LE-88213",
            "SettlementService.java:217",
            "BatchJob.java:64",
            "org.postgresql.util.PSQLException",
            "settlement_entry_uniq",
        ],
        "obligations": [],
        "summary": (
            "java.lang.IllegalStateException: ledger entry LE-88213 already settled, thrown in "
            "com.acme.ledger.SettlementService.settle (SettlementService.java:217) from com.acme.ledger.BatchJob.run "
            "(BatchJob.java:64); caused by org.postgresql.util.PSQLException: duplicate key value violates unique "
            "constraint settlement_entry_uniq. The batch run had retried entry LE-88213."
        ),
    },
    {
        "name": "invoice-csv",
        "genre": "table",
        "events": [
            (
                "tool_result",
                "tool",
                "invoice_id,customer,amount,currency,due\nINV-3301,Globex GmbH,1.250,00,EUR,2026-05-31\n"
                "INV-3302,Initech Ltd,980.50,USD,2026-06-15",
            ),
            (
                "message",
                "user",
                "INV-3301 must be paid by 31 May; do not send reminders for INV-3302 before 15 June.",
            ),
        ],
        "must_keep": [
            "INV-3301",
            "Globex GmbH",
            "2026-05-31",
            "INV-3302",
            "Initech Ltd",
            "980.50",
            "2026-06-15",
            "31 May",
            "15 June",
        ],
        "obligations": [
            ("INV-3301 must be paid by 31 May", "positive"),
            ("do not send reminders for INV-3302", "negative"),
        ],
        "summary": (
            "Invoices (invoice_id, customer, amount, currency, due): INV-3301 (Globex GmbH, 1.250,00 EUR, due 2026-05-31) and INV-3302 (Initech Ltd, 980.50 USD, "
            "due 2026-06-15).\nINV-3301 must be paid by 31 May; do not send reminders for INV-3302 before 15 June."
        ),
    },
    {
        "name": "japanese-chat",
        "genre": "chat-ja",
        "events": [
            ("message", "user", "注文番号A-20931の配送先を東京都港区に変更してください。"),
            (
                "decision",
                "assistant",
                "配送日を4月14日に変更することを決定しました。追跡番号はJP7741223305です。",
            ),
        ],
        "must_keep": ["A-20931", "4月14日", "JP7741223305"],
        "obligations": [("変更することを決定しました", "positive")],
        "summary": "注文番号A-20931の配送先を東京都港区に変更してください。配送日を4月14日に変更することを決定しました。追跡番号はJP7741223305です。",
    },
]

# The chat summary rewritten by someone who gets every detail wrong (issue #28): wrong order number,
# amount, tracking number, part number, date, carrier, and the decision reversed.
FALSIFIED_CHAT = (
    "Order 4471-2290-81 (paid $694.00 on March 3rd) arrived with a broken table leg; it had shipped via DHL "
    "with tracking 1Z999AA10123456785. The customer asked about part LEG-ALU-27 and got a credit of $49.00.\n"
    "We decided to send a refund for leg LEG-ALU-27; it ships on 26 March.\n"
    "Please never call the customer's phone; e-mail only: dana.kim@example.org."
)
FALSIFIED_VALUES = [
    "4471-2290-81",
    "$694.00",
    "DHL",
    "1Z999AA10123456785",
    "LEG-ALU-27",
    "26 March",
    "refund",
]
