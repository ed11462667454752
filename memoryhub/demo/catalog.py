"""The generated test cases of the seed scenario (POST /payments) and their outcomes.

Ids are ``TC-01`` … ``TC-60`` (not ``T1``…) so they never collide with artifact ids such as the
published suite ``T57``. None of them covers the unauthenticated case: that is the seed's
incident.
"""

from __future__ import annotations

# id number -> (title, outcome, failure detail)
TEST_CASES: dict[int, tuple[str, str, str]] = {
    1: ("valid EUR payment with automatic capture returns 201 Created", "passed", ""),
    2: ("201 body carries payment id, status pending and the echoed amount and currency", "passed", ""),
    3: ("Location header points at /payments/{id}", "passed", ""),
    4: ('amount sent as the decimal string "19.99" is rejected with 422', "passed", ""),
    5: ("amount 0 is rejected with 422", "passed", ""),
    6: ("negative amount is rejected with 422", "passed", ""),
    7: ("amount above 99999999 minor units is rejected with 422", "passed", ""),
    8: ('lower-case currency "eur" is rejected with 422 invalid_currency', "passed", ""),
    9: ('unknown currency "XYZ" is rejected with 422 invalid_currency', "passed", ""),
    10: ("JPY amount without a minor unit is accepted as an integer", "passed", ""),
    11: ("missing Idempotency-Key header returns 400", "passed", ""),
    12: ("malformed Idempotency-Key (not a UUID) returns 400", "passed", ""),
    13: ("replay with the same key and the same body returns the original 201 response", "passed", ""),
    14: (
        "reusing a key with a different amount returns 409 idempotency_key_reused",
        "failed",
        "got 500 Internal Server Error (IntegrityError in ledger insert), expected 409",
    ),
    15: ("replayed response carries the same payment id and writes no second ledger entry", "passed", ""),
    16: (
        "two concurrent requests with one key create exactly one payment",
        "failed",
        "2 payments created for key 7b1e-…-c0d2 when both requests arrive within 30 ms",
    ),
    17: ("capture_method manual leaves the payment in requires_capture", "passed", ""),
    18: ("capture_method automatic moves the payment to pending", "passed", ""),
    19: ("unknown capture_method value is rejected with 422", "passed", ""),
    20: ("description longer than 140 characters is rejected with 422", "passed", ""),
    21: ("metadata with 21 keys is rejected (limit 20)", "passed", ""),
    22: ("non-string metadata value is rejected with 422", "passed", ""),
    23: ("metadata value over 500 characters is rejected (decision D1)", "passed", ""),
    24: ("unknown customer_id returns 422 customer_not_found", "passed", ""),
    25: ("payment_method of another merchant returns 422 payment_method_not_found", "passed", ""),
    26: ("Content-Type text/plain returns 415", "passed", ""),
    27: ("empty JSON body returns 400", "passed", ""),
    28: ("unknown top-level field is ignored and not echoed", "passed", ""),
    29: ("every response carries an X-Request-Id header", "passed", ""),
    30: ("422 bodies are application/problem+json with one errors[] entry per field", "passed", ""),
    31: ("BHD amount with three minor digits is accepted", "passed", ""),
    32: ("currency not enabled for the merchant (CHF) returns 422 currency_not_enabled", "passed", ""),
    33: ("GBP payment on an EUR merchant returns an fx_quote_id", "passed", ""),
    34: ("amount exactly at the upper bound 99999999 is accepted", "passed", ""),
    35: ("Idempotency-Key longer than 64 characters returns 400", "passed", ""),
    36: ("an Idempotency-Key can be reused after the 24 h retention window", "passed", ""),
    37: ("rate limit exceeded returns 429 with a Retry-After header", "passed", ""),
    38: (
        "validation error bodies never echo the payment_method token",
        "failed",
        "422 body field errors[0].value contains the full payment_method token",
    ),
    39: ("statement_descriptor longer than 22 characters is rejected with 422", "passed", ""),
    40: ("unicode description is stored and returned unchanged", "passed", ""),
    41: ("token with only payments:read returns 403 insufficient_scope", "passed", ""),
    42: ("token with no scopes returns 403 insufficient_scope", "passed", ""),
    43: ("token of another merchant's app cannot create a payment for this merchant (403)", "passed", ""),
    44: ("revoked scope grant returns 403 on the next request", "passed", ""),
    45: ("sandbox token is refused by the live host with 403", "passed", ""),
    46: ("403 bodies are application/problem+json without internal detail", "passed", ""),
    47: (
        "scope check runs before idempotency bookkeeping (no key stored after a 403)",
        "failed",
        "after a 403 the key is stored; the retry with a valid token gets the cached 403",
    ),
    48: ("card number in description is rejected with 422 pan_detected", "passed", ""),
    49: ("metadata values are stored literally, with no template or SQL interpretation", "passed", ""),
    50: ("error responses never contain stack traces", "passed", ""),
    51: ("payment.created webhook is emitted exactly once per created payment", "passed", ""),
    52: ("a replayed request emits no second webhook", "passed", ""),
    53: ("audit log records the client app id for each created payment", "passed", ""),
    54: ("amount beyond the int64 range returns 422", "passed", ""),
    55: ("retry after a 503 with the same key is safe", "passed", ""),
    56: ("HEAD /payments is answered with 405", "passed", ""),
    57: ("OPTIONS preflight lists POST and the Idempotency-Key header", "passed", ""),
    58: (
        "p95 latency of createPayment in the sandbox stays under 800 ms",
        "failed",
        "p95 was 1,130 ms over 200 calls (sandbox ledger warm-up)",
    ),
    59: ("responses carry Cache-Control: no-store", "passed", ""),
    60: ("payment id format is pay_ followed by 24 base32 characters", "passed", ""),
}


def case_id(n: int) -> str:
    return f"TC-{n:02d}"


def case_title(n: int) -> str:
    return TEST_CASES[n][0]


def case_outcome(n: int) -> str:
    return TEST_CASES[n][1]


def case_fact_text(n: int) -> str:
    return f"{case_id(n)} {case_title(n)}"


def failed_cases() -> list[int]:
    return [n for n, (_, outcome, _) in TEST_CASES.items() if outcome == "failed"]


# Request overrides per test (what the generated code changes in the default valid body).
_OVERRIDES: dict[int, str] = {
    4: 'amount="19.99"',
    5: "amount=0",
    6: "amount=-100",
    7: "amount=100_000_000",
    8: 'currency="eur"',
    9: 'currency="XYZ"',
    10: 'amount=250000, currency="JPY"',
    17: 'capture_method="manual"',
    18: 'capture_method="automatic"',
    19: 'capture_method="later"',
    20: 'description="x" * 141',
    21: "metadata={f'k{i}': 'v' for i in range(21)}",
    22: 'metadata={"order": 42}',
    23: 'metadata={"note": "n" * 501}',
    24: 'customer_id="cus_missing"',
    25: "payment_method=foreign_method",
    31: 'amount=12500, currency="BHD"',
    32: 'currency="CHF"',
    33: 'currency="GBP"',
    34: "amount=99_999_999",
    38: "amount=0, payment_method=pm_token",
    50: 'amount="NaN"',
    39: 'statement_descriptor="D" * 23',
    40: 'description="Zahlung für Bestellung № 7 ✓"',
    48: 'description="card 4111 1111 1111 1111"',
    49: 'metadata={"q": "{{7*7}}; DROP TABLE payments"}',
    54: "amount=2**63",
}

_STATUSES = ("201", "400", "403", "404", "405", "409", "415", "422", "429")


_CLIENTS: dict[int, str] = {
    41: "read_only_client",
    42: "no_scope_client",
    43: "other_merchant_client",
    44: "revoked_grant_client",
    45: "live_host_client",
    46: "read_only_client",
    47: "no_scope_client",
}

_REPLAYS: dict[int, str] = {13: "", 14: "amount=2999", 15: "", 16: "", 36: "", 52: "", 55: ""}


def expected_status(n: int) -> str:
    """The status the generated test asserts (the HTTP status its title names, else 422 for a
    rejection and 201 for a success)."""
    if n in (38, 50):  # provoke a validation error, then inspect its body
        return "422"
    words = case_title(n).replace("(", " ").replace(")", " ").split()
    for word in words:
        if word in _STATUSES:
            return word
    return "422" if "rejected" in words else "201"


def case_code(n: int) -> str:
    """The pytest function test-generator wrote for case ``n`` (shown in tool results)."""
    override = _OVERRIDES.get(n, "")
    status = expected_status(n)
    client = _CLIENTS.get(n, "client")
    words = "".join(c if c.isalnum() else " " for c in case_title(n).lower()).split()
    head = (
        f"def test_tc{n:02d}_{'_'.join(words[:6])}({client}, body, new_key):\n"
        f'    """{case_fact_text(n)}."""\n'
    )
    if n in _REPLAYS:
        return head + (
            "    key = new_key()\n"
            f'    first = {client}.post("/payments", json=body(), headers={{"Idempotency-Key": key}})\n'
            f'    resp = {client}.post("/payments", json=body({_REPLAYS[n]}), '
            'headers={"Idempotency-Key": key})\n'
            f"    assert resp.status_code == {status}, resp.text\n"
        )
    return head + (
        f'    resp = {client}.post("/payments", json=body({override}), '
        'headers={"Idempotency-Key": new_key()})\n'
        f"    assert resp.status_code == {status}, resp.text\n"
    )
