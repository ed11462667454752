"""The demo's other workflows: acme/refunds-api-9 (no summary yet; the demo compacts it live
through the worker), globex/onboarding-7 (a second, smaller tenant) and an acme workflow whose id
is 110 characters long with one very long unbroken token (real thread ids and tool outputs look
like this; the pages must not break on them). Pure data."""

from __future__ import annotations

from typing import Any

from memoryhub.demo._build import Event, ev, fact, interleave, number, tool_pair

GLOBEX_SLUG = "globex"
GLOBEX_NAME = "Globex Logistics"

RA, TG, SR, PUB = "requirements-agent", "test-generator", "security-reviewer", "publisher"

# --- acme / refunds-api-9 ------------------------------------------------------------------------

REFUNDS_ID = "refunds-api-9"
REFUNDS_SPEC = "refunds-spec-v3"

# RF-nn -> (title, outcome)
REFUND_CASES: dict[int, tuple[str, str]] = {
    1: ("full refund of a captured EUR payment returns 201", "passed"),
    2: ("partial refund returns 201 and the remaining refundable amount", "passed"),
    3: ("refund body echoes payment id, amount and currency", "passed"),
    4: ("refund amount above the remaining captured amount returns 422", "passed"),
    5: ("refund of an uncaptured payment returns 409 payment_not_captured", "passed"),
    6: ("refund currency different from the payment currency returns 422", "passed"),
    7: ("refund amount 0 returns 422", "passed"),
    8: ("decimal refund amount returns 422", "passed"),
    9: ("two partial refunds summing above the captured amount: the second returns 422", "failed"),
    10: ("missing Idempotency-Key returns 400", "passed"),
    11: ("replayed refund returns the original 201", "passed"),
    12: ("refund key reused with a different amount returns 409", "passed"),
    13: ("refund of an unknown payment returns 404", "passed"),
    14: ("refund of another merchant's payment returns 404", "passed"),
    15: ("reason must be one of duplicate, fraudulent, requested_by_customer", "passed"),
    16: ("reason other is rejected with 422", "passed"),
    17: ("metadata limit of 20 keys applies to refunds", "passed"),
    18: ("refund.created webhook emitted once", "passed"),
    19: ("refund status starts as pending", "passed"),
    20: ("refund of a fully refunded payment returns 409 already_refunded", "passed"),
    21: ("JPY partial refund keeps integer amounts", "passed"),
    22: ("refund after the 180-day window returns 422 refund_window_closed", "failed"),
    23: ("token without refunds:write returns 403", "passed"),
    24: ("token with payments:write only returns 403 for refunds", "passed"),
    25: ("refund list is ordered by creation time", "passed"),
    26: ("refund amount in BHD accepts three minor digits", "passed"),
    27: ("concurrent partial refunds never exceed the captured amount", "passed"),
    28: ("refund response carries X-Request-Id", "passed"),
    29: ("problem+json errors name the invalid field", "passed"),
    30: ("refund of a disputed payment returns 409 payment_disputed", "passed"),
    31: ("refund description longer than 140 characters returns 422", "passed"),
    32: ("refunds are visible on GET /payments/{id}", "passed"),
    33: ("refund ids are re_ followed by 24 base32 characters", "passed"),
    34: ("Cache-Control no-store on refund responses", "passed"),
    35: ("rate limit on refunds returns 429 with Retry-After", "passed"),
    36: ("refund amount beyond int64 returns 422", "passed"),
    37: ("audit log records the refund's client app id", "passed"),
    38: ("refund of a payment in requires_capture returns 409", "passed"),
    39: ("full refund sets the payment status to refunded", "passed"),
    40: ("partial refund leaves the payment status succeeded", "passed"),
}

_THEMES = (
    "full and partial refunds",
    "amount and currency validation",
    "idempotency of refund requests",
    "ownership and lookup errors",
    "refund reasons and metadata",
    "webhooks and status transitions",
    "the refund window and scopes",
    "concurrency and listing",
    "error format and identifiers",
    "limits, audit and final status",
)


def _rf(n: int) -> str:
    return f"RF-{n:02d}"


def _rf_fact(n: int) -> dict[str, str]:
    title, outcome = REFUND_CASES[n]
    return fact(_rf(n), "test", f"{_rf(n)} {title}", outcome)


def _refund_batch(k: int) -> list[Event]:
    ids = list(range(4 * k - 3, 4 * k + 1))
    path = f"tests/refunds/test_refunds_b{k:02d}.py"
    results = "\n".join(
        f"{_rf(n)} {'PASSED' if REFUND_CASES[n][1] == 'passed' else 'FAILED'} "
        f"({0.15 + ((n * 29 + k) % 70) / 100:.2f} s)"
        for n in ids
    )
    failed = sum(1 for n in ids if REFUND_CASES[n][1] == "failed")
    return [
        ev(
            "message",
            TG,
            f"Refund batch {k}: {_rf(ids[0])}…{_rf(ids[-1])} on {_THEMES[k - 1]}; every test "
            "first creates and captures its own payment so refunds never share state.",
        ),
        *tool_pair(
            TG,
            f"call-rf-generate-{k:02d}",
            f'generate_tests({{"batch": {k}, "ids": ["{_rf(ids[0])}", "{_rf(ids[-1])}"], '
            f'"target": "POST /payments/{{id}}/refunds", "source": "{REFUNDS_SPEC}"}})',
            f"Wrote {path} with {len(ids)} tests:\n"
            + "\n".join(f"- {_rf(n)}: {REFUND_CASES[n][0]}" for n in ids),
            refs=[REFUNDS_SPEC],
        ),
        *tool_pair(
            TG,
            f"call-rf-run-{k:02d}",
            f'run_tests({{"path": "{path}", "target": "sandbox", "build": "payments-api 3.14.2"}})',
            f"pytest -q {path}\n{results}\n{len(ids) - failed} passed, {failed} failed",
            result_facts=[_rf_fact(n) for n in ids],
        ),
        ev(
            "note",
            SR,
            f"Reviewed {_rf(ids[0])}…{_rf(ids[-1])}: refunds are created with the refunds:write "
            "token only, no payment method data appears in assertions"
            + (", one red test linked to its bug." if failed else "; no findings."),
        ),
    ]


_REFUND_FILLERS = (
    (RA, "message", "Cross-checked {tc} ({title}) against {spec} §{sec}: status and error code match."),
    (TG, "note", "Stabilised {tc}: it now waits for the capture webhook before refunding ({ms} ms)."),
    (PUB, "note", "Refund suite preview: {count} tests so far; {tc} listed as '{title}'."),
    (SR, "note", "Spot check of {tc}: fixtures redact tokens; request ids only in logs."),
    (RA, "note", "Traceability: {tc} cites its requirement in the docstring; catalogue title '{title}'."),
)


def _refunds_events() -> list[Event]:
    start = [
        ev(
            "message",
            RA,
            "Kickoff for refunds-api-9: test suite for POST /payments/{id}/refunds from the "
            "refunds specification version 3. Same team and sandbox as api-tests-42.",
        ),
        *tool_pair(
            RA,
            "call-rf-fetch-spec-1",
            'fetch_spec({"document": "refunds-openapi.yaml", "version": "latest"})',
            "refunds-openapi.yaml resolved to version 3 (refunds-spec-v3): POST "
            "/payments/{id}/refunds with RefundCreate {amount: integer, reason: enum[duplicate, "
            "fraudulent, requested_by_customer], metadata?: map<string,string>}; responses 201, "
            "400, 403, 404, 409, 422, 429; scope refunds:write.",
            result_facts=[
                fact(
                    REFUNDS_SPEC,
                    "source_version",
                    "refunds-openapi.yaml version 3 is the source specification for refunds",
                )
            ],
            refs=[REFUNDS_SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Scope: creating a refund requires OAuth scope refunds:write; payments:write alone is "
            "not enough (403 insufficient_scope).",
            facts=[
                fact(
                    "refunds:write",
                    "scope",
                    "OAuth scope refunds:write is required to create a refund",
                )
            ],
            refs=[REFUNDS_SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Constraint RC1: the sum of refunds never exceeds the captured amount of the payment; "
            "an over-refund returns 422 amount_exceeds_refundable.",
            facts=[
                fact(
                    "RC1-refund-cap",
                    "constraint",
                    "The sum of refunds never exceeds the captured amount (422 amount_exceeds_refundable)",
                )
            ],
            refs=[REFUNDS_SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Constraint RC2: refund amounts are integers in minor units and use the payment's "
            "currency; a refund carries no currency of its own.",
            facts=[
                fact(
                    "RC2-refund-currency",
                    "constraint",
                    "Refund amounts are integer minor units in the payment's currency",
                )
            ],
            refs=[REFUNDS_SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Constraint RC3: refunds are only possible within 180 days of capture; later requests "
            "return 422 refund_window_closed.",
            facts=[
                fact(
                    "RC3-refund-window",
                    "constraint",
                    "Refunds are possible within 180 days of capture (422 refund_window_closed)",
                )
            ],
            refs=[REFUNDS_SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Requirement RR1: a refund is idempotent on its Idempotency-Key exactly like payments; "
            "a reused key with a different amount returns 409.",
            facts=[
                fact(
                    "RR1-refund-idempotency",
                    "requirement",
                    "Refunds are idempotent on Idempotency-Key; reuse with a different amount returns 409",
                )
            ],
            refs=[REFUNDS_SPEC],
        ),
        ev(
            "decision",
            TG,
            "Decision RD1: each refund test creates and captures its own payment through the "
            "payments fixture from api-tests-42.",
            facts=[
                fact(
                    "RD1-own-payment",
                    "decision",
                    "Each refund test creates and captures its own payment",
                )
            ],
        ),
        *tool_pair(
            TG,
            "call-rf-sandbox-1",
            'create_oauth_app({"merchant": "m_sbx_7731", "scopes": ["refunds:write"]})',
            "OAuth app app_sbx_2291 registered with scope refunds:write; token issued (value "
            "redacted, expires in 3600 s).",
        ),
        ev(
            "message",
            PUB,
            "Refund suite will be published next to the payments suite on staging, as its own artifact.",
        ),
    ]
    blocks: list[list[Event]] = [start]
    for k in range(1, 11):
        blocks.append(_refund_batch(k))
        if k == 3:
            blocks.append(
                [
                    ev(
                        "message",
                        TG,
                        "Filed bug-102: two partial refunds that together exceed the captured "
                        "amount are both accepted when sent 50 ms apart (RF-09).",
                        facts=[
                            fact(
                                "bug-102",
                                "issue",
                                "bug-102: two partial refunds can together exceed the captured "
                                "amount (RF-09)",
                                "open",
                            )
                        ],
                    )
                ]
            )
        if k == 6:
            blocks.append(
                [
                    ev(
                        "message",
                        TG,
                        "RF-22 fails: the sandbox accepts refunds 200 days after capture. Asked "
                        "the ledger team whether RC3 is enforced in sandbox at all.",
                    ),
                    ev(
                        "note",
                        RA,
                        "Ledger team: RC3 is enforced in production only; tracked as a sandbox "
                        "parity gap, test stays red.",
                    ),
                ]
            )
        if k == 8:
            blocks.append(
                tool_pair(
                    PUB,
                    "call-rf-request-approval-15",
                    'request_approval({"id": "approval-15", "approver": "payments-qa-lead", '
                    '"subject": "publish refunds-api-9 suite to staging"})',
                    "approval-15 created for the payments QA lead; state pending.",
                    result_facts=[
                        fact(
                            "approval-15",
                            "approval",
                            "approval-15: QA sign-off to publish the refund suite",
                            "pending",
                        )
                    ],
                )
            )
    blocks.append(
        [
            ev(
                "validation",
                SR,
                "Refund suite review complete: RC1–RC3 and RR1 each have tests; scope "
                "refunds:write enforced (RF-23, RF-24); red tests RF-09 (bug-102) and RF-22 "
                "(sandbox parity).",
                refs=[REFUNDS_SPEC],
            ),
            ev(
                "message",
                PUB,
                "Holding the refund suite until approval-15 is granted; nothing published yet.",
            ),
        ]
    )

    prelude = [
        ev(
            "note",
            RA,
            "refunds-spec-v3 reuses the problem+json error format and the Idempotency-Key rules "
            "of payments; C1 from api-tests-42 applies unchanged.",
        ),
        ev(
            "message",
            SR,
            "For refunds the interesting security cases are scope separation (refunds:write vs "
            "payments:write) and cross-merchant access; I will review each batch as it lands.",
        ),
    ]

    def make_filler(i: int, so_far: list[Event]) -> Event:
        tested = sorted(
            {int(f["key"][3:]) for e in so_far for f in e.get("facts", []) if f["kind"] == "test"}
        )
        if not tested:
            return prelude[i]
        agent, kind, template = _REFUND_FILLERS[i % len(_REFUND_FILLERS)]
        # Comment on the tests written most recently.
        n = tested[-1 - (i * 3) % min(4, len(tested))]
        return ev(
            kind,
            agent,
            template.format(
                tc=_rf(n),
                title=REFUND_CASES[n][0],
                spec=REFUNDS_SPEC,
                sec=2 + (n + i) % 5,
                ms=150 + (n * 17 + i * 31) % 200,
                count=len(tested),
            ),
        )

    return number(interleave(blocks, make_filler, 120), REFUNDS_ID)


# --- globex / onboarding-7 -----------------------------------------------------------------------

ONBOARDING_ID = "onboarding-7"
IA, KYC, DW = "intake-agent", "kyc-reviewer", "doc-writer"


def _onboarding_events() -> list[Event]:
    events: list[Event] = [
        ev(
            "message",
            IA,
            "Onboarding run 7 for carrier partner Northwind Freight: collect company details, run "
            "KYC checks and write the partner integration guide for POST /shipments.",
        ),
        *tool_pair(
            IA,
            "call-ob-fetch-form-1",
            'fetch_document({"id": "partner-form-v2", "partner": "northwind-freight"})',
            "partner-form-v2 received: legal name Northwind Freight GmbH, country DE, VAT id "
            "present, 2 technical contacts, requested API scope shipments:write.",
            result_facts=[
                fact(
                    "partner-form-v2",
                    "source_version",
                    "Partner form version 2 submitted by Northwind Freight",
                )
            ],
            refs=["partner-form-v2"],
        ),
        ev(
            "requirement",
            IA,
            "The partner needs scope shipments:write to create shipments; shipments:read is "
            "granted by default.",
            facts=[
                fact(
                    "shipments:write",
                    "scope",
                    "Northwind Freight requests scope shipments:write to create shipments",
                )
            ],
        ),
        ev(
            "requirement",
            IA,
            "Constraint: country codes in shipment addresses are ISO-3166 alpha-2; weights in "
            "grams as integers.",
            facts=[
                fact(
                    "OC1-address-format",
                    "constraint",
                    "Shipment addresses use ISO-3166 alpha-2 country codes; weights are integer grams",
                )
            ],
        ),
        *tool_pair(
            KYC,
            "call-ob-kyc-1",
            'kyc_check({"legal_name": "Northwind Freight GmbH", "country": "DE", "checks": '
            '["registry", "sanctions", "vat"]})',
            "registry: match (HRB 20417, Hamburg); sanctions: no hit; vat: valid.",
        ),
        ev(
            "validation",
            KYC,
            "KYC passed for Northwind Freight GmbH: registry match, no sanctions hit, VAT valid.",
        ),
        ev(
            "note",
            KYC,
            "KYC evidence (registry extract and sanctions screening reports) is stored in the "
            "compliance vault; only their reference ids are kept in this workflow.",
        ),
        ev(
            "approval",
            KYC,
            "approval-3: compliance approved the partner for production access after KYC.",
            facts=[
                fact(
                    "approval-3",
                    "approval",
                    "approval-3: compliance approved Northwind Freight for production access",
                    "approved",
                )
            ],
        ),
        ev(
            "message",
            IA,
            "Open question: the partner wants webhook deliveries to two URLs; our platform "
            "supports one per app.",
            facts=[
                fact(
                    "q-7",
                    "issue",
                    "q-7: partner wants webhooks delivered to two URLs; only one per app is supported",
                    "open",
                )
            ],
        ),
        ev(
            "decision",
            DW,
            "Decision: the integration guide documents one webhook URL and a fan-out recipe on "
            "the partner side until q-7 is settled.",
            facts=[
                fact(
                    "OD1-webhook-guide",
                    "decision",
                    "Guide documents one webhook URL plus a partner-side fan-out recipe",
                )
            ],
        ),
    ]
    sections = (
        "authentication with client credentials",
        "creating a shipment",
        "address validation errors",
        "label retrieval",
        "tracking webhooks",
        "rate limits",
        "sandbox vs production hosts",
    )
    for i, section in enumerate(sections, start=1):
        events += [
            ev(
                "message",
                DW,
                f"Drafting guide section {i}: {section}; examples use the partner's sandbox app "
                f"and integer gram weights ({500 * i + 250} g in the sample).",
            ),
            ev(
                "note",
                IA,
                f"Reviewed section {i} ({section}) against partner-form-v2; contact names and VAT "
                "id are kept out of the guide.",
                refs=["partner-form-v2"],
            ),
        ]
    events += [
        *tool_pair(
            DW,
            "call-ob-publish-guide-1",
            'publish_document({"id": "northwind-guide-1", "audience": "partner"})',
            "Published northwind-guide-1 to the partner portal (7 sections).",
            side_effect=True,
        ),
        ev(
            "artifact",
            DW,
            "Artifact G1: Northwind Freight integration guide, 7 sections.",
            facts=[fact("G1", "artifact", "G1: Northwind Freight integration guide published", "done")],
        ),
        ev(
            "message",
            IA,
            "Onboarding run 7 complete apart from q-7, which stays open with the platform team.",
            facts=[
                fact(
                    "q-7",
                    "issue",
                    "q-7: partner wants webhooks delivered to two URLs; only one per app is supported",
                    "open",
                )
            ],
        ),
    ]
    assert len(events) == 30, len(events)
    return number(events, ONBOARDING_ID)


# --- acme / a workflow with a 110-character id ---------------------------------------------------------

LONG_ID = (
    "nightly-regression.payments-api.eu-west-1.acme-prod.langgraph-thread-"
    "7f3c9a2e-5b1d-4e8a-9c6f-0a1b2c3d4e5f.r2-a"
)
assert len(LONG_ID) == 110, len(LONG_ID)
LONG_TOKEN_PARTS = 120  # the unbroken token in the coverage report is ~3,600 characters
NR = "nightly-runner"


def _long_named_events() -> list[Event]:
    token = ".".join(f"payments.v2.refunds.case{i:03d}" for i in range(LONG_TOKEN_PARTS))
    events: list[Event] = [
        ev(
            "message",
            NR,
            "Nightly regression of the payments API in eu-west-1: rerun the refund and capture suites "
            "against release 2026.11.3 and report coverage per endpoint.",
        ),
        ev(
            "requirement",
            NR,
            "Every endpoint touched by release 2026.11.3 must have at least one passing test tonight.",
            facts=[
                fact(
                    "NR-1",
                    "constraint",
                    "Every endpoint touched by release 2026.11.3 needs one passing test",
                )
            ],
        ),
        *tool_pair(
            NR,
            "call-nr-coverage-1",
            'coverage_report({"suite": "payments-nightly", "format": "dotted"})',
            "coverage_report returned the covered case path: " + token,
        ),
        ev(
            "decision",
            NR,
            "Coverage is complete for the refund endpoints; the capture suite reruns tomorrow.",
        ),
    ]
    return number(events, "nightly-regression")


def workflows() -> list[dict[str, Any]]:
    """Both extra workflows with identity, events and what the demo does with them."""
    return [
        {
            "tenant": "acme",
            "external_id": REFUNDS_ID,
            "name": "Refunds API test generation",
            "graph_release": "api-testgen@2026.11.2",
            "events": _refunds_events(),
            "compact_live": True,  # no summary yet: the demo asks the worker to compact it
        },
        {
            "tenant": GLOBEX_SLUG,
            "external_id": ONBOARDING_ID,
            "name": "Partner onboarding: Northwind Freight",
            "graph_release": "onboarding@2026.10.4",
            "events": _onboarding_events(),
            "compact_live": False,
        },
        {
            "tenant": "acme",
            "external_id": LONG_ID,
            "name": "Nightly regression (a thread id as long as real ones get)",
            "graph_release": "api-testgen@2026.11.3",
            "events": _long_named_events(),
            "compact_live": False,
        },
    ]
